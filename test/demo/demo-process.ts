/**
 * `npm run demo` (`node tools/demo/main.ts`) as a child process, the way a person runs it. Spawning and
 * clean-up: tools/child-process.ts.
 */
import { fileURLToPath } from 'node:url';
import { killAllChildren, spawnNodeScript, type ChildResult, type NodeScript } from '../../tools/child-process.ts';

export const DEMO_SCRIPT = fileURLToPath(new URL('../../tools/demo/main.ts', import.meta.url));

export type DemoResult = ChildResult;
export type DemoProcess = NodeScript;

export function spawnDemo(args: string[], env: Record<string, string>): DemoProcess {
  return spawnNodeScript(DEMO_SCRIPT, { name: `demo ${args.join(' ')}`.trim(), args, env, waitTimeoutMs: 30_000, exitTimeoutMs: 45_000 });
}

/** SIGKILLs every demo still running and waits for each to exit. */
export const killAllDemos = killAllChildren;
