/**
 * How much CPU the benchmark's processes and everything else on the machine used during a window
 * (Linux /proc; elsewhere the figures are absent). Every process of the benchmark is this process or
 * a direct child of it (Redis, simulator, workers), and exited children are counted through this
 * process's cutime/cstime, so "others" is the machine's busy time minus ours: a figure measured while
 * others used a lot of CPU is not comparable with one that was not.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

interface Snapshot {
  /** Busy jiffies of the whole machine (all cores). */
  busy: number;
  /** Jiffies of this process tree. */
  ours: number;
  /** Jiffies of each live child and of this process, by label. */
  processes: Map<string, number>;
  at: number;
}

export interface CpuShare {
  /** Length of the window. */
  seconds: number;
  /** Cores' worth of CPU used by the benchmark's processes (1.0 = one core busy). */
  benchCores: number;
  /** Cores' worth used by every other process on the machine. */
  otherCores: number;
  /** Cores' worth used by each process of the benchmark alive for the whole window, by label. */
  processes: Record<string, number>;
}

const labels = new Map<number, string>();

/** Names a child process in CpuShare.processes (unnamed children go by their command name). */
export function labelProcess(pid: number, label: string): void {
  labels.set(pid, label);
}

/** USER_HZ: 100 on every Linux the benchmark is likely to meet. */
const TICKS_PER_SECOND = 100;

function fields(stat: string): string[] {
  // pid (comm) state ...: comm may hold spaces and parentheses, so split after the last ')'.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

function snapshot(): Snapshot | undefined {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...: busy is everything but idle and iowait.
    const busy = cpu.reduce((sum, value, index) => (index === 3 || index === 4 ? sum : sum + value), 0);
    const self = fields(readFileSync('/proc/self/stat', 'utf8'));
    // after the comm: [0] state [1] ppid ... [11] utime [12] stime [13] cutime [14] cstime
    let ours = Number(self[11]) + Number(self[12]) + Number(self[13]) + Number(self[14]);
    const processes = new Map<string, number>([['load generator', Number(self[11]) + Number(self[12])]]);
    const me = String(process.pid);
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const child = fields(stat);
        if (child[1] !== me) continue;
        const ticks = Number(child[11]) + Number(child[12]);
        ours += ticks;
        const label = labels.get(Number(entry)) ?? stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        processes.set(label, (processes.get(label) ?? 0) + ticks);
      } catch {
        // gone meanwhile
      }
    }
    return { busy, ours, processes, at: performance.now() };
  } catch {
    return undefined;
  }
}

/** Starts a window; `end()` returns the shares, or undefined where /proc is not available. */
export function cpuWindow(): { end(): CpuShare | undefined } {
  const start = snapshot();
  return {
    end() {
      const stop = snapshot();
      if (!start || !stop) return undefined;
      const seconds = (stop.at - start.at) / 1000;
      if (seconds <= 0) return undefined;
      const cores = (ticks: number) => Math.max(0, ticks / TICKS_PER_SECOND / seconds);
      const bench = cores(stop.ours - start.ours);
      const total = cores(stop.busy - start.busy);
      const processes: Record<string, number> = {};
      for (const [label, ticks] of stop.processes) {
        const before = start.processes.get(label);
        if (before !== undefined) processes[label] = cores(ticks - before);
      }
      return { seconds, benchCores: Math.min(bench, cpus().length), otherCores: Math.max(0, total - bench), processes };
    },
  };
}
