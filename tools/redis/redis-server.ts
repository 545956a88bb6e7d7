/**
 * Spawn private `redis-server` processes (tests, demo, benchmark).
 *
 * Every server binds 127.0.0.1 on a free port with a fresh temp dir, so tests
 * never touch a shared Redis (e.g. one on 6379) and never need to flush.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

export interface StartRedisServerOptions {
  /** Fixed port; default: a free loopback port. */
  port?: number;
  /**
   * `--appendonly yes|no`; default true (the data survives restart(), as the worker's start-up check
   * requires). false: no AOF and no RDB saves, a volatile Redis the worker refuses without
   * REDIS_ALLOW_VOLATILE=1.
   */
  appendonly?: boolean;
  /** Data dir; default: a fresh mkdtemp dir (removed by stop()). A dir you pass is never removed. */
  dir?: string;
  /** Start with `--cluster-enabled yes` (and a cluster bus port on another free port). */
  clusterEnabled?: boolean;
  /** Extra `redis-server` arguments, appended last (e.g. ['--maxmemory', '10mb']). */
  extraArgs?: string[];
  /** How long to wait for PING after spawning; default 10 s. */
  startTimeoutMs?: number;
}

export interface RedisServerHandle {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Cluster bus port (only when clusterEnabled). */
  readonly clusterPort: number | undefined;
  /** PID of the current process (changes after restart()). */
  readonly pid: number;
  readonly dir: string;
  /** SIGTERM (SIGKILL after a timeout), wait for exit, remove the temp dir if we created it. Idempotent. */
  stop(): Promise<void>;
  /** Stop (keeping the dir) and start again on the same port and dir. */
  restart(): Promise<void>;
  /** SIGKILL without a graceful shutdown (keeps the dir, so restart() still works). Simulates a crash. */
  kill(): Promise<void>;
}

const STOP_GRACE_MS = 5_000;

/** Every live child we spawned, so a dying test process doesn't leave orphans. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of liveChildren) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/** A port that was free on 127.0.0.1 a moment ago (the OS picks it). */
export function getFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * Send one inline command over a raw socket and return the first reply as text
 * (simple string, error as `-ERR ...`, integer as digits, bulk string body).
 * No retries, no reconnects: handy for readiness probes.
 */
export function rawRedisCommand(port: number, command: string, host = '127.0.0.1', timeoutMs = 1_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host, port });
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = (err: Error | null, value?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value ?? '');
    };
    const timer = setTimeout(() => finish(new Error(`timeout waiting for reply to ${command}`)), timeoutMs);
    sock.once('error', (err) => finish(err));
    sock.once('close', () => finish(new Error('connection closed before a full reply')));
    sock.on('connect', () => sock.write(`${command}\r\n`));
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const eol = buf.indexOf('\r\n');
      if (eol < 0) return;
      const head = buf.subarray(0, eol).toString('utf8');
      const type = head[0];
      if (type === '+' || type === ':') return finish(null, head.slice(1));
      if (type === '-') return finish(null, head);
      if (type === '$') {
        const len = Number(head.slice(1));
        if (len < 0) return finish(null, '');
        if (buf.length < eol + 2 + len) return;
        return finish(null, buf.subarray(eol + 2, eol + 2 + len).toString('utf8'));
      }
      // Verbatim string (RESP3) or anything else: return the raw text we have.
      return finish(null, buf.toString('utf8'));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readLogTail(logFile: string): Promise<string> {
  try {
    const text = await readFile(logFile, 'utf8');
    return text.split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

interface Running {
  child: ChildProcess;
  exited: Promise<void>;
}

function waitExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
  });
}

async function spawnAndWait(args: string[], port: number, logFile: string, timeoutMs: number): Promise<Running> {
  const child = spawn(REDIS_SERVER_BIN, args, { stdio: 'ignore' });
  installExitHook();
  liveChildren.add(child);
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  const exited = waitExit(child).then(() => {
    liveChildren.delete(child);
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (spawnError) {
      liveChildren.delete(child);
      throw new Error(`cannot spawn ${REDIS_SERVER_BIN}: ${spawnError.message}`);
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `redis-server on port ${port} exited early (code ${child.exitCode}, signal ${child.signalCode}):\n${await readLogTail(logFile)}`,
      );
    }
    try {
      const reply = await rawRedisCommand(port, 'PING', '127.0.0.1', 500);
      // -LOADING while the AOF is replayed: keep waiting.
      if (reply === 'PONG') {
        // Make sure it is OUR process answering, not someone who grabbed the port first.
        const info = await rawRedisCommand(port, 'INFO server', '127.0.0.1', 500);
        if (/^process_id:(\d+)/m.exec(info)?.[1] === String(child.pid)) return { child, exited };
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms:\n${await readLogTail(logFile)}`);
    }
    await sleep(25);
  }
}

async function terminate(run: Running, graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const { child, exited } = run;
  if (child.exitCode !== null || child.signalCode !== null) return exited;
  child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    exited.then(() => false),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), graceMs);
    }),
  ]);
  clearTimeout(timer);
  if (timedOut) {
    child.kill('SIGKILL');
    await exited;
  }
}

export async function startRedisServer(opts: StartRedisServerOptions = {}): Promise<RedisServerHandle> {
  const ownsDir = opts.dir === undefined;
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'redis-test-')));
  const logFile = join(dir, 'redis.log');
  const timeoutMs = opts.startTimeoutMs ?? 10_000;

  const buildArgs = (port: number, clusterPort: number | undefined): string[] => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--daemonize',
      'no',
      '--save',
      '',
      '--appendonly',
      opts.appendonly === false ? 'no' : 'yes',
      '--dir',
      dir,
      '--logfile',
      logFile,
    ];
    if (opts.clusterEnabled) {
      args.push(
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, 'nodes.conf'),
        '--cluster-port',
        String(clusterPort),
        '--cluster-node-timeout',
        '5000',
      );
    }
    args.push(...(opts.extraArgs ?? []));
    return args;
  };

  let port = opts.port ?? 0;
  let clusterPort: number | undefined;
  let running: Running | undefined;
  // A free port can be grabbed by someone else before redis binds it: retry a few times.
  const attempts = opts.port === undefined ? 5 : 1;
  let lastErr: unknown;
  for (let i = 0; i < attempts && !running; i++) {
    if (opts.port === undefined) port = await getFreePort();
    if (opts.clusterEnabled) {
      do clusterPort = await getFreePort();
      while (clusterPort === port);
    }
    try {
      running = await spawnAndWait(buildArgs(port, clusterPort), port, logFile, timeoutMs);
    } catch (err) {
      lastErr = err;
    }
  }
  if (!running) {
    if (ownsDir) await rm(dir, { recursive: true, force: true });
    throw lastErr;
  }

  let current: Running = running;
  let stopped = false;
  const args = buildArgs(port, clusterPort);

  const handle: RedisServerHandle = {
    url: `redis://127.0.0.1:${port}`,
    host: '127.0.0.1',
    port,
    clusterPort,
    get pid(): number {
      return current.child.pid ?? -1;
    },
    dir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await terminate(current, STOP_GRACE_MS);
      if (ownsDir) await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      if (stopped) throw new Error('redis-server handle already stopped');
      await terminate(current, 0, 'SIGKILL');
    },
    async restart() {
      if (stopped) throw new Error('cannot restart a redis-server handle after stop()');
      await terminate(current, STOP_GRACE_MS);
      current = await spawnAndWait(args, port, logFile, timeoutMs);
    },
  };
  return handle;
}

/** True while a process with this PID exists (for "stop() really killed it" assertions). */
export function pidIsAlive(pid: number): boolean {
  return isAlive(pid);
}
