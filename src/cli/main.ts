#!/usr/bin/env node
// The operator and producer CLI (package bin `custody-worker`, `npm run cli -- <command>`). Usage: src/cli/usage.ts.
import { runCli } from './run.ts';

// An exit code, not process.exit(): every command closes its connections, so the process ends on its
// own once stdout is flushed (and a leaked handle shows up as a hang in the tests).
process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
});
