/**
 * Time-outs for tests that start Node processes of the package (the CLI, the worker) or tools (npm, tsc).
 *
 * A start costs about 1.5 s of CPU (Node, type stripping, the imports). The tests run on a 2-core machine
 * that other test runs share: at a load average of 16 to 20, `node src/cli/main.ts --help` took 12 to 27 s
 * of wall time, and a worker did not log 'worker started' within 20 s. These are bounds for a hang, never
 * a measure of speed: a test's time-out grows with the processes it starts one after another, so a slow
 * machine makes a test slower, not red.
 */

/** One Node process started and, for a short command, run to its exit (its own wait fails first). */
export const PROCESS_MS = 60_000;

/** The time-out of a test that starts `processes` Node processes one after another, plus `restMs` for its other work. */
export function processesTimeout(processes: number, restMs = 30_000): number {
  return restMs + processes * PROCESS_MS;
}
