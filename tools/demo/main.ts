// `npm run demo`: the whole flow on this machine (docs/contract.md section 1). Wires options → output → stack →
// run → summary → stop, handles Ctrl-C, and sets the exit code. Usage and exit codes: tools/demo/options.ts.
import { EX_CONFIG } from '../../src/config/config.ts';
import { readDemoOptions, USAGE } from './options.ts';
import { DemoOutput } from './output.ts';
import { runSamples } from './run.ts';
import { buildSamples, enqueueOrder, newRunId, type SampleKind } from './samples.ts';
import { DemoStack, describeRedis } from './stack.ts';

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const EXIT_INTERRUPTED = 130;
/** Stopping that takes longer than this is cut short (a second Ctrl-C cuts it at once). */
const STOP_TIMEOUT_MS = 20_000;

const read = readDemoOptions(process.argv.slice(2), process.env);
if (!read.ok) {
  process.stderr.write(`${read.problems.map((problem) => `demo: ${problem}`).join('\n')}\n`);
  if (read.usage) process.stderr.write(`\n${USAGE}\n`);
  process.exit(read.usage ? EXIT_USAGE : EX_CONFIG);
}
const options = read.options;
if (options.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(EXIT_OK);
}

const out = new DemoOutput({
  json: options.json,
  stdout: process.stdout,
  stderr: process.stderr,
  color: process.stdout.isTTY === true && !options.noColor,
});
const runId = newRunId();
const stack = new DemoStack(options, runId, (line) => out.notice(line));
const controller = new AbortController();

let signals = 0;
const onSignal = (signal: NodeJS.Signals) => {
  signals++;
  if (signals > 1) {
    // Child processes (a private redis-server) are killed by their exit hook.
    out.notice(`${signal} again: exiting without a clean stop`);
    process.exit(EXIT_INTERRUPTED);
  }
  out.notice(`${signal}: stopping everything the demo started (again to force)`);
  controller.abort(new Error(`interrupted by ${signal}`));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

let code: number = EXIT_FAILED;
let summarised = false;
try {
  const started = await stack.start(controller.signal);
  const samples = buildSamples(runId, options.normal, options.provider);
  // In the samples' order: normal, duplicate, blocked (with BitGo: integer-wallet), invalid.
  const counts: Partial<Record<SampleKind, number>> = {};
  for (const sample of samples) counts[sample.kind] = (counts[sample.kind] ?? 0) + 1;
  out.start({
    runId,
    redis: describeRedis(started.redis),
    simulator: started.sim.url,
    prefix: started.config.queue.prefix,
    eventsStream: started.config.queue.eventsStream,
    dashboardUrl: started.dashboardUrl,
    generatedCredentials: started.generatedCredentials,
    configuredUser: options.dashboardUser,
    samples: counts,
    jobs: enqueueOrder(samples).length,
    bitgo: started.bitgo && {
      approvalAfterMs: started.bitgo.settings().approvalAfterMs,
      txidAfterMs: started.bitgo.settings().txidAfterMs,
    },
  });

  const result = await runSamples(started, samples, out, {
    paceMs: options.paceMs,
    timeoutMs: options.timeoutMs,
    signal: controller.signal,
  });
  out.summary({
    runId,
    prefix: started.config.queue.prefix,
    eventsStream: started.config.queue.eventsStream,
    dashboardUrl: started.dashboardUrl,
    verdict: result.verdict,
    jobs: result.jobs,
    events: result.events.length,
    durationMs: result.durationMs,
    timedOut: result.timedOut,
    keep: options.keep,
    approvals: result.approvals,
  });
  summarised = true;
  code = result.verdict.ok ? EXIT_OK : EXIT_FAILED;

  if (options.keep && !controller.signal.aborted) {
    out.notice(`still running (--keep): browse ${started.dashboardUrl}, Ctrl-C stops everything`);
    await new Promise((resolve) => controller.signal.addEventListener('abort', resolve, { once: true }));
  }
} catch (error) {
  if (!controller.signal.aborted) out.error((error as Error).message);
} finally {
  // After the summary a Ctrl-C is how --keep ends: the run's own result stands.
  if (controller.signal.aborted && !summarised) code = EXIT_INTERRUPTED;
  setTimeout(() => {
    out.notice(`stopping took longer than ${STOP_TIMEOUT_MS} ms, exiting anyway`);
    process.exit(EXIT_FAILED);
  }, STOP_TIMEOUT_MS).unref();
  await stack.stop();
}

process.exitCode = code;
// Everything is closed, so the process ends on its own; should a handle still be open, say so and go.
setTimeout(() => {
  out.notice('a handle was left open after stopping; exiting');
  process.exit(code);
}, 2_000).unref();
