/**
 * The real worker (`node src/worker.ts`) as a child process, for tests that need what an in-process
 * worker cannot give: SIGKILL in the middle of a send, SIGTERM handling and the exit code. Spawning,
 * output capture and clean-up: tools/child-process.ts (call `killAllWorkers()` in afterEach/afterAll).
 */
import { fileURLToPath } from 'node:url';
import { killAllChildren, spawnNodeScript, type NodeScript, type NodeScriptOptions } from '../../tools/child-process.ts';
import { PROCESS_MS } from './timeouts.ts';

export { PROJECT_ROOT, type ExitInfo } from '../../tools/child-process.ts';
export const WORKER_SCRIPT = fileURLToPath(new URL('../../src/worker.ts', import.meta.url));

export type WorkerProcess = NodeScript;
export type SpawnWorkerOptions = Pick<NodeScriptOptions, 'name' | 'maxOutputChars' | 'echo' | 'execArgv'>;

/**
 * Spawns `node src/worker.ts` with `env` over a cleaned process.env (what `npm start` runs). Waiting for a
 * line ('worker started') is bounded by PROCESS_MS: a start on a busy machine takes that long.
 */
export function spawnWorker(env: Record<string, string>, opts: SpawnWorkerOptions = {}): WorkerProcess {
  return spawnNodeScript(WORKER_SCRIPT, { name: 'worker', waitTimeoutMs: PROCESS_MS, ...opts, env });
}

/** SIGKILLs every child still running and waits until each has exited (use in afterEach/afterAll). */
export const killAllWorkers = killAllChildren;
