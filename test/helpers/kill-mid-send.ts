/**
 * A SIGKILL that lands while sends are mid-request, by construction rather than by a race.
 *
 * The simulators apply their latency after a request is processed: a send is accepted, then its answer
 * waits. Raising the send latency to HOLD_MS (under the worker's CUSTODY_TIMEOUT of 1 s, so the worker
 * still waits for the answer) holds every answer from then on. The kill waits for a send accepted after
 * the raise: its answer cannot have reached the worker. Watching for a send accepted in the last few
 * milliseconds instead (the earlier way) missed the window on a loaded machine.
 */
import type { ExitInfo, WorkerProcess } from './worker-process.ts';
import { until } from './wait.ts';

/** How long a held send answer waits: under FAST_ENV's CUSTODY_TIMEOUT (1 s). */
export const HOLD_MS = 700;

/** How long the kill waits for a send accepted while answers are held (sends run all the time: one comes within ms). */
export const HELD_SEND_WAIT_MS = 5_000;

export interface SendHold {
  /** Sets the simulator's sendTransaction latency. */
  setSendLatency(ms: number): void;
  /** The latency to put back after the kill. */
  normalMs: number;
  /** When the simulator accepted each transfer it holds (ISO text), in any order. */
  acceptedAts(): Iterable<string>;
}

/** Holds send answers, kills `worker` once one send is accepted and unanswered; returns how many were. */
export async function killMidSend(worker: WorkerProcess, hold: SendHold): Promise<{ inFlight: number; exit: ExitInfo }> {
  // The simulator runs in this process: no request is processed between these two lines.
  const since = Date.now();
  hold.setSendLatency(HOLD_MS);
  try {
    const inFlight = await until(
      `a send accepted while its answer is held (${worker.name})`,
      HELD_SEND_WAIT_MS,
      async () => {
        let count = 0;
        for (const at of hold.acceptedAts()) if (Date.parse(at) >= since) count += 1;
        return count > 0 ? count : undefined;
      },
      2,
    );
    worker.kill('SIGKILL');
    return { inFlight, exit: await worker.waitForExit(5_000) };
  } finally {
    hold.setSendLatency(hold.normalMs);
  }
}
