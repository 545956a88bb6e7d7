/**
 * `npm run demo` (`node src/demo/main.ts`) as a child process, the way a person runs it.
 */
import { fileURLToPath } from 'node:url';
import { killAllScripts, spawnScript, type ScriptProcess, type ScriptResult } from '../helpers/script-process.ts';

export const DEMO_SCRIPT = fileURLToPath(new URL('../../src/demo/main.ts', import.meta.url));

/** Variables of the test process never passed on: each test sets what the demo sees. */
const STRIPPED = [/^REDIS_/, /^DEMO_/, /^HTTP_/, /^DASHBOARD_/, /^LOG_LEVEL$/, /^QUEUE_PREFIX$/, /^NODE_OPTIONS$/, /^NO_COLOR$/];

export type DemoResult = ScriptResult;
export type DemoProcess = ScriptProcess;

export function spawnDemo(args: string[], env: Record<string, string>): DemoProcess {
  return spawnScript(DEMO_SCRIPT, args, { env, stripped: STRIPPED, label: 'demo', waitTimeoutMs: 30_000, exitTimeoutMs: 45_000 });
}

/** SIGKILLs every demo still running and waits for each to exit. */
export const killAllDemos = killAllScripts;
