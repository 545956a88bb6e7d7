/**
 * `npm run test:interop`: the Python producer and consumer of examples/python-producer/ against the
 * real worker (docs/contract.md sections 3, 4 and 8, from another language).
 *
 * Sets up a virtualenv with the example's pinned requirements (cached in .tmp/venv-interop, redone when
 * requirements.txt or the Python changes), then starts a private Redis, the custody simulator (travel
 * rule mandatory, txids only when the run sets them) and the worker in this process, and:
 *   1. producer.py enqueues a normal payload, one with an all-digit sequenceId (and walletId as text),
 *      one without a travel-rule reference, and refuses an invalid one with the schema's errors;
 *   2. consumer.py follows the three enqueued transfers over XREAD while the run sets their txids;
 *   3. the run checks the outcomes: broadcast (submitted, then broadcast) for the two normal ones,
 *      blocked for the third, every event valid for the consumer and equal to what the Node reader sees,
 *      one accepted send per broadcast transfer, the job ids per the shared rule, and no trace of the
 *      invalid payload (no job, no BullMQ `added` event, no event, nothing sent upstream).
 * Ends with `interop: N passed, N failed`; exit code 0 when every check passed, else 1.
 *
 * Where no package index serves the pinned `bullmq` (a machine without PyPI) the run fails, unless
 * INTEROP_ALLOW_NO_BULLMQ=1: then it sets up `redis` and `jsonschema` alone (pinned when available),
 * producer.py only validates (`--check`), the Node producer enqueues the valid payloads, the consumer
 * half runs in full, and the checks that need the Python enqueue are reported as skipped.
 *
 * Environment: REDIS_URL (use that Redis, under a fresh prefix deleted at the end), TEST_REDIS_NO_CONTAINERS=1
 * (skip testcontainers), PYTHON (default python3), INTEROP_VENV (default .tmp/venv-interop), SCHEMAS_DIR
 * (default packages/producer/schemas), INTEROP_LOG_LEVEL (the worker's log level, default silent; logs
 * go to stderr). pip reads its usual PIP_* variables (an index or a wheel folder of your own).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import {
  EVENT_TYPES,
  parseStreamEntry,
  TransferProducer,
  type SubmitPayloadInput,
  type TransferEvent,
} from '../../packages/producer/src/index.ts';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { acquireRedis, redactRedisUrl, type PrivateRedis } from '../../tools/redis/private-redis.ts';
import { createLogger } from '../../src/logger.ts';
import { startSimulator, workerCustodyEnv, type Simulator } from '../../src/simulator/index.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const EXAMPLE = join(ROOT, 'examples', 'python-producer');
const REQUIREMENTS = join(EXAMPLE, 'requirements.txt');
const SCHEMAS = resolve(process.env.SCHEMAS_DIR || join(ROOT, 'packages', 'producer', 'schemas'));
const SCHEMA_GENERATOR = join(ROOT, 'packages', 'producer', 'scripts', 'generate-schemas.ts');
const VENV = resolve(process.env.INTEROP_VENV || join(ROOT, '.tmp', 'venv-interop'));
const PYTHON = process.env.PYTHON || 'python3';
const VENV_PYTHON = join(VENV, 'bin', 'python');
const STAMP = join(VENV, '.interop-stamp');

const SETUP_TIMEOUT_MS = 10 * 60_000;
const PYTHON_TIMEOUT_MS = 60_000;
const FLOW_TIMEOUT_MS = 60_000;

/** Worker settings for a run that ends in seconds; everything else is the worker's default. */
const WORKER_ENV = {
  CUSTODY_TIMEOUT: '2s',
  CUSTODY_CONNECT_TIMEOUT: '1s',
  SUBMIT_RETRY_BASE: '50ms',
  SUBMIT_RETRY_MAX: '500ms',
  TRACK_POLL_MIN: '50ms',
  TRACK_POLL_MAX: '250ms',
  RECONCILE_EVERY: '1h',
  HTTP_PORT: '0',
} as const;

// ----------------------------------------------------------------------------------------------------
// Output and checks

const started = Date.now();
const results: Array<{ name: string; ok: boolean | 'skipped'; detail?: string }> = [];

function note(line: string): void {
  process.stdout.write(`interop: ${line}\n`);
}

function check(name: string, ok: boolean, detail?: string): boolean {
  results.push({ name, ok, ...(detail === undefined ? {} : { detail }) });
  process.stdout.write(`  ${ok ? 'ok  ' : 'FAIL'} ${name}${!ok && detail ? `\n       ${detail.replaceAll('\n', '\n       ')}` : ''}\n`);
  return ok;
}

function skip(name: string, reason: string): void {
  results.push({ name, ok: 'skipped', detail: reason });
  process.stdout.write(`  skip ${name} (${reason})\n`);
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

class SetupError extends Error {}

// ----------------------------------------------------------------------------------------------------
// Processes

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Children still running, killed at teardown (a flow that failed half-way leaves the consumer waiting). */
const children = new Set<ChildProcess>();

function run(command: string, args: string[], options: { cwd?: string; timeoutMs: number; env?: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n[interop: killed after ${seconds(options.timeoutMs)}]`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      children.delete(child);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

function tail(text: string, lines = 15): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}

function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return { unparsable: line };
      }
    });
}

// ----------------------------------------------------------------------------------------------------
// Set-up: schemas and the virtualenv

function missingSchemas(): string[] {
  const files = ['submit-payload.schema.json', ...EVENT_TYPES.map((type) => join('events', `${type}.schema.json`))];
  return files.filter((file) => !existsSync(join(SCHEMAS, file)));
}

async function ensureSchemas(): Promise<void> {
  if (missingSchemas().length > 0 && !process.env.SCHEMAS_DIR && existsSync(SCHEMA_GENERATOR)) {
    note(`generating the producer package's schemas (node ${SCHEMA_GENERATOR.slice(ROOT.length + 1)})`);
    const generated = await run(process.execPath, [SCHEMA_GENERATOR], { timeoutMs: PYTHON_TIMEOUT_MS });
    if (generated.code !== 0)
      throw new SetupError(`schema generator failed (exit ${generated.code}):\n${tail(generated.stderr || generated.stdout)}`);
  }
  const missing = missingSchemas();
  if (missing.length > 0) {
    throw new SetupError(`the producer package's JSON Schemas are missing in ${SCHEMAS}: ${missing.join(', ')}`);
  }
}

/** `full`: every pinned requirement; `no-bullmq`: redis and jsonschema only (INTEROP_ALLOW_NO_BULLMQ=1). */
type PythonMode = 'full' | 'no-bullmq';

function pip(args: string[]): Promise<Run> {
  return run(VENV_PYTHON, ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-q', ...args], {
    timeoutMs: SETUP_TIMEOUT_MS,
  });
}

/** pip's answer when it could not reach an index at all (its retries there only cost time). */
const UNREACHABLE = /NewConnectionError|Name or service not known|Temporary failure in name resolution|Network is unreachable/;

/** Reuses the virtualenv when requirements.txt and the Python are unchanged; else builds it anew. */
async function ensureVenv(): Promise<{ state: 'cached' | 'created'; mode: PythonMode }> {
  const allowNoBullmq = process.env.INTEROP_ALLOW_NO_BULLMQ === '1';
  const version = await run(PYTHON, ['-c', 'import sys; print(sys.version)'], { timeoutMs: PYTHON_TIMEOUT_MS }).catch((error: Error) => {
    throw new SetupError(`${PYTHON} cannot be run (${error.message}): install Python 3.10 or later, or set PYTHON`);
  });
  if (version.code !== 0) throw new SetupError(`${PYTHON} failed: ${tail(version.stderr)}`);
  const requirements = await readFile(REQUIREMENTS, 'utf8');
  const hash = createHash('sha256').update(requirements).update(version.stdout).digest('hex');
  const [stampHash, stampMode] = (await readFile(STAMP, 'utf8').catch(() => '')).split(' ');
  if (existsSync(VENV_PYTHON) && stampHash === hash && (stampMode === 'full' || (stampMode === 'no-bullmq' && allowNoBullmq))) {
    return { state: 'cached', mode: stampMode };
  }

  await mkdir(resolve(VENV, '..'), { recursive: true });
  const venv = await run(PYTHON, ['-m', 'venv', '--clear', VENV], { timeoutMs: SETUP_TIMEOUT_MS });
  if (venv.code !== 0) {
    throw new SetupError(`${PYTHON} -m venv failed (on Debian: apt-get install python3-venv):\n${tail(venv.stderr || venv.stdout)}`);
  }
  let mode: PythonMode = 'full';
  const full = await pip(['-r', REQUIREMENTS]);
  if (full.code !== 0) {
    const output = full.stderr || full.stdout;
    if (!allowNoBullmq || !/No matching distribution found for bullmq\b/i.test(output)) {
      throw new SetupError(
        `pip could not install ${REQUIREMENTS.slice(ROOT.length + 1)} (the pinned packages come from PyPI, or from the ` +
          `index / wheel folder that PIP_INDEX_URL / PIP_FIND_LINKS name):\n${tail(output)}`,
      );
    }
    // No index here serves bullmq: the consumer half with redis and jsonschema, pinned when available.
    const others = requirements
      .split('\n')
      .map((line) => line.replace(/#.*/, '').trim())
      .filter((line) => line !== '' && !/^bullmq\b/i.test(line));
    note(`bullmq cannot be installed here (no package index serves it); INTEROP_ALLOW_NO_BULLMQ=1: installing ${others.join(' ')}`);
    const retries = UNREACHABLE.test(output) ? ['--retries', '0'] : [];
    let partial = await pip([...retries, ...others]);
    if (partial.code !== 0) {
      const names = others.map((line) => line.split(/[=<>!~ ;[]/)[0]!);
      note(`not available as pinned; installing the latest available ${names.join(' ')}`);
      partial = await pip([...retries, ...names]);
    }
    if (partial.code !== 0)
      throw new SetupError(`pip could not install redis and jsonschema either:\n${tail(partial.stderr || partial.stdout)}`);
    mode = 'no-bullmq';
  }
  await writeFile(STAMP, `${hash} ${mode}`);
  return { state: 'created', mode };
}

// ----------------------------------------------------------------------------------------------------
// The flow

function hexTx(): { txHex: string; txBase64: string } {
  const bytes = Buffer.concat([Buffer.from([2, 0xf8]), randomBytes(96)]);
  return { txHex: bytes.toString('hex'), txBase64: bytes.toString('base64') };
}

function payload(sequenceId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const tx = hexTx();
  return {
    walletId: 310,
    coin: 'eth',
    txHex: tx.txHex,
    halfSigned: { ...tx, sequenceId },
    metadata: { orderId: `PY-${sequenceId.slice(0, 8)}`, source: 'python' },
    ...extra,
  };
}

async function eventsOf(redis: Redis, stream: string): Promise<TransferEvent[]> {
  const entries = await redis.xrange(stream, '-', '+');
  return entries.map((entry) => parseStreamEntry(entry as [string, string[]]));
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds(timeoutMs)} waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Stack {
  redis?: PrivateRedis;
  client?: Redis;
  sim?: Simulator;
  app?: App;
  queue?: Queue;
  producer?: TransferProducer;
  prefix: string;
  dir?: string;
}

async function flow(stack: Stack, mode: PythonMode): Promise<void> {
  const redis = await acquireRedis({ url: process.env.REDIS_URL, noContainers: Boolean(process.env.TEST_REDIS_NO_CONTAINERS) });
  stack.redis = redis;
  const client = new Redis(redis.url, { maxRetriesPerRequest: null, connectionName: 'interop' });
  stack.client = client;
  client.on('error', () => {});
  const info = await client.info('server');
  note(`Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'} at ${redactRedisUrl(redis.url)} (${redis.note})`);

  const sim = await startSimulator({
    port: 0,
    // Spec 4.4: the rule applies (outgoingTxn 1, mandatory); txids show only when the run sets them.
    settings: { travelRule: { outgoingTxn: 1, mandatory: true }, txidAfterMs: 3_600_000 },
  });
  stack.sim = sim;
  const env = {
    REDIS_URL: redis.url,
    QUEUE_PREFIX: stack.prefix,
    ...workerCustodyEnv(sim),
    ...WORKER_ENV,
    LOG_LEVEL: process.env.INTEROP_LOG_LEVEL || 'silent',
  };
  const config = loadConfig(env);
  stack.app = await createApp(config, createLogger({ level: config.log.level, name: 'interop-worker' }, process.stderr));
  const stream = config.queue.eventsStream;
  note(`worker and simulator up; prefix ${stack.prefix}, stream ${stream}`);

  // The payloads, as files the way a service would hand them over.
  const dir = await mkdtemp(join(tmpdir(), 'interop-'));
  stack.dir = dir;
  const normal = randomUUID();
  const digits = `9${Array.from(randomBytes(17), (b) => String(b % 10)).join('')}`;
  const blocked = randomUUID();
  const invalid = randomUUID();
  const valid = [
    { label: 'normal', file: 'normal.json', sequenceId: normal },
    { label: 'all-digit sequenceId', file: 'digits.json', sequenceId: digits },
    { label: 'no travel-rule reference', file: 'blocked.json', sequenceId: blocked },
  ] as const;
  const payloads: Record<string, Record<string, unknown>> = {
    'normal.json': payload(normal, { travelRule: { reference: `tr-${normal.slice(0, 8)}` } }),
    'digits.json': payload(digits, { walletId: '310', travelRule: { reference: `tr-${digits.slice(0, 8)}` } }),
    'blocked.json': payload(blocked),
    'invalid.json': { ...payload(invalid), coin: 'ETH', txHex: 'not-hex' },
  };
  for (const [name, body] of Object.entries(payloads)) await writeFile(join(dir, name), JSON.stringify(body, null, 2));
  const files = Object.keys(payloads).map((name) => join(dir, name));
  const common = ['--redis-url', redis.url, '--prefix', stack.prefix, '--schemas', SCHEMAS];
  const queue = new Queue('submit-transaction', { connection: client, prefix: stack.prefix });
  stack.queue = queue;
  const nodeProducer = new TransferProducer({ connection: client, prefix: stack.prefix, eventsStream: stream });
  stack.producer = nodeProducer;

  // 1. producer.py: validates all four, enqueues the three valid ones (with --check: validates only).
  const t0 = Date.now();
  const produced = await run(VENV_PYTHON, [join(EXAMPLE, 'producer.py'), ...common, ...(mode === 'full' ? [] : ['--check']), ...files], {
    cwd: EXAMPLE,
    timeoutMs: PYTHON_TIMEOUT_MS,
  });
  note(`producer.py${mode === 'full' ? '' : ' --check'} exited ${produced.code} in ${seconds(Date.now() - t0)}`);
  const lines = jsonLines(produced.stdout);
  const bySource = new Map(lines.map((line) => [String(line.source), line]));
  check(
    `producer.py exits 1: one payload refused, the others ${mode === 'full' ? 'enqueued' : 'valid'}`,
    produced.code === 1,
    `exit ${produced.code}\n${tail(produced.stderr)}`,
  );
  const jobIds = new Map<string, string>();
  for (const { file, sequenceId } of valid) {
    const line = bySource.get(join(dir, file));
    if (mode === 'full') {
      check(
        `${file}: enqueued by the Python bullmq client with job id transfer-<sequenceId>`,
        line?.status === 'enqueued' && line.sequenceId === sequenceId && line.jobId === `transfer-${sequenceId}`,
        JSON.stringify(line ?? lines),
      );
      jobIds.set(sequenceId, String(line?.jobId));
    } else {
      check(
        `${file}: valid for producer.py --check`,
        line?.status === 'valid' && line.sequenceId === sequenceId,
        JSON.stringify(line ?? lines),
      );
      skip(`${file}: enqueued by the Python bullmq client`, 'bullmq not installed');
      // A valid file's body, typed loosely because it is written to disk as JSON; submit() validates it again.
      jobIds.set(sequenceId, await nodeProducer.submit(payloads[file] as SubmitPayloadInput));
    }
  }
  const refused = bySource.get(join(dir, 'invalid.json'));
  const issues = (refused?.issues ?? []) as Array<{ path: string; message: string }>;
  check(
    'invalid.json: refused locally with the JSON Schema errors (coin, txHex)',
    refused?.status === 'refused' && issues.some((i) => i.path === 'coin') && issues.some((i) => i.path === 'txHex'),
    JSON.stringify(refused ?? lines),
  );

  // 2. consumer.py follows the three transfers while the run sets the txids.
  const followed = valid.map((v) => v.sequenceId) as string[];
  const consumer = run(
    VENV_PYTHON,
    [join(EXAMPLE, 'consumer.py'), ...common, '--stream', stream, '--timeout', String(FLOW_TIMEOUT_MS / 1000), ...followed],
    {
      cwd: EXAMPLE,
      timeoutMs: FLOW_TIMEOUT_MS + 15_000,
    },
  );
  const txids = new Map<string, string>();
  for (const sequenceId of [normal, digits]) {
    await waitFor(
      `transfer.submitted of ${sequenceId}`,
      async () =>
        (await eventsOf(client, stream)).some((e) => e.sequenceId === sequenceId && e.event === 'transfer.submitted') ? true : undefined,
      FLOW_TIMEOUT_MS,
    );
    const txid = `0x${randomBytes(32).toString('hex')}`;
    sim.setTxid(sequenceId, txid);
    txids.set(sequenceId, txid);
  }
  const consumed = await consumer;
  note(`consumer.py exited ${consumed.code} after ${seconds(Date.now() - t0)} from the first enqueue`);
  const seen = jsonLines(consumed.stdout);
  check(
    'consumer.py exits 0: every transfer ended, every event valid',
    consumed.code === 0,
    `exit ${consumed.code}\n${tail(consumed.stderr)}`,
  );
  check(
    "consumer.py validated every event's data against its schema",
    seen.length > 0 && seen.every((line) => line.valid === true),
    JSON.stringify(
      seen
        .filter((line) => line.valid !== true)
        .map(({ id, event, sequenceId, valid, issues }) => ({ id, event, sequenceId, valid, issues })),
    ),
  );

  const sequence = (sequenceId: string) =>
    seen.filter((line) => line.sequenceId === sequenceId).map((line) => `${line.event}@${line.version}`);
  for (const { label, sequenceId } of valid.slice(0, 2)) {
    const broadcast = seen.find((line) => line.sequenceId === sequenceId && line.event === 'transfer.broadcast');
    check(
      `${label}: transfer.submitted@1 then transfer.broadcast@2 with the txid set upstream`,
      sequence(sequenceId).join(',') === 'transfer.submitted@1,transfer.broadcast@2' &&
        (broadcast?.data as { txid?: string } | undefined)?.txid === txids.get(sequenceId),
      `${sequence(sequenceId).join(',')} ${JSON.stringify(broadcast?.data ?? null).slice(0, 200)}`,
    );
    check(
      `${label}: one accepted send upstream`,
      sim.stats().sends[sequenceId]?.accepted === 1,
      JSON.stringify(sim.stats().sends[sequenceId]),
    );
  }
  const blockedLine = seen.find((line) => line.sequenceId === blocked);
  check(
    'no travel-rule reference: transfer.blocked@1 (TRAVEL_RULE_REQUIRED), nothing sent',
    sequence(blocked).join(',') === 'transfer.blocked@1' &&
      (blockedLine?.data as { code?: string } | undefined)?.code === 'TRAVEL_RULE_REQUIRED' &&
      !sim.stats().sends[blocked],
    `${sequence(blocked).join(',')} sends=${JSON.stringify(sim.stats().sends[blocked])}`,
  );
  const fileOf = new Map<string, string>(valid.map((v) => [v.sequenceId, v.file]));
  check(
    'metadata echoed in every event as given',
    seen.every((line) => JSON.stringify(line.metadata) === JSON.stringify(payloads[fileOf.get(String(line.sequenceId)) ?? '']?.metadata)),
  );

  // 3. The Node reader's view of the stream is the consumer's, entry for entry.
  const nodeView = (await eventsOf(client, stream))
    .filter((event) => followed.includes(event.sequenceId))
    .map((event) => ({
      id: event.id,
      event: event.event,
      sequenceId: event.sequenceId,
      version: event.version,
      data: event.data,
      metadata: event.metadata,
    }));
  const pythonView = seen.map((line) => ({
    id: line.id,
    event: line.event,
    sequenceId: line.sequenceId,
    version: Number(line.version),
    data: line.data,
    metadata: line.metadata,
  }));
  check(
    'the Python consumer and the Node stream reader see the same events',
    JSON.stringify(nodeView) === JSON.stringify(pythonView),
    `node ${nodeView.length} events, python ${pythonView.length}`,
  );

  // 4. The invalid payload left no trace: no job, no BullMQ "added" event, no event, nothing upstream.
  const added = (await client.xrange(`${stack.prefix}:submit-transaction:events`, '-', '+'))
    .map(([, fields]) => Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]])))
    .filter((fields) => fields.event === 'added')
    .map((fields) => String(fields.jobId))
    .sort();
  check(
    'BullMQ saw exactly the three valid jobs added',
    JSON.stringify(added) === JSON.stringify([...jobIds.values()].sort()),
    `added: ${added.join(', ')}; expected ${[...jobIds.values()].join(', ')}`,
  );
  check(
    'invalid payload never reached the queue, the stream or upstream',
    (await queue.getJob(`transfer-${invalid}`)) === undefined &&
      !(await eventsOf(client, stream)).some((event) => event.sequenceId === invalid) &&
      sim.transfer(invalid) === undefined &&
      !sim.stats().sends[invalid],
  );

  // 5. One rule for job ids: the Node TransferProducer derives the one producer.py uses, and the same
  //    transfer enqueued again from the other language stays one transfer.
  if (mode === 'full') {
    const before = (await eventsOf(client, stream)).filter((event) => event.sequenceId === normal).length;
    const nodeJobId = await nodeProducer.submit(payloads['normal.json'] as SubmitPayloadInput);
    check(
      'the Node TransferProducer derives the same job id as producer.py (transfer-<sequenceId>)',
      nodeJobId === jobIds.get(normal),
      `node: ${nodeJobId}, python: ${jobIds.get(normal)}`,
    );
    await waitFor(
      `the Node duplicate of ${normal} to be processed`,
      async () => (['completed', 'failed', 'unknown'].includes(await queue.getJobState(nodeJobId)) ? true : undefined),
      FLOW_TIMEOUT_MS,
    );
    await new Promise((r) => setTimeout(r, 300));
    const after = (await eventsOf(client, stream)).filter((event) => event.sequenceId === normal).length;
    check(
      'the same transfer enqueued again from Node: no new event, still one accepted send',
      after === before && sim.stats().sends[normal]?.accepted === 1,
      `events ${before} -> ${after}, sends ${JSON.stringify(sim.stats().sends[normal])}`,
    );
  } else {
    const nodeJobId = jobIds.get(normal);
    check(
      'the Node TransferProducer derives the job id producer.py uses (transfer-<sequenceId>)',
      nodeJobId === `transfer-${normal}`,
      `node: ${nodeJobId}`,
    );
    skip('the same transfer enqueued again from the other language', 'bullmq not installed');
  }
}

async function teardown(stack: Stack): Promise<void> {
  const steps: Array<[string, () => Promise<unknown>]> = [
    ['python processes', async () => children.forEach((child) => child.kill('SIGKILL'))],
    ['queue', async () => stack.queue?.close()],
    ['node producer', async () => stack.producer?.close()],
    ['worker', async () => stack.app?.close()],
    [
      'keys',
      async () => {
        // A Redis that is not ours (REDIS_URL): delete what the run wrote under its prefix.
        if (stack.redis?.source !== 'env' || !stack.client) return;
        let cursor = '0';
        do {
          const [next, keys] = await stack.client.scan(cursor, 'MATCH', `${stack.prefix}:*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length > 0) await stack.client.del(...keys);
        } while (cursor !== '0');
      },
    ],
    ['connection', async () => stack.client?.quit()],
    ['simulator', async () => stack.sim?.close()],
    ['redis', async () => (stack.redis && stack.redis.source !== 'env' ? stack.redis.stop() : undefined)],
    ['payload files', async () => (stack.dir ? rm(stack.dir, { recursive: true, force: true }) : undefined)],
  ];
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (error) {
      note(`stopping ${name} failed: ${(error as Error).message}`);
    }
  }
}

// ----------------------------------------------------------------------------------------------------

const stack: Stack = { prefix: `interop-${randomBytes(4).toString('hex')}` };
let fatal: string | undefined;
try {
  await ensureSchemas();
  const venvStart = Date.now();
  const venv = await ensureVenv();
  note(
    `virtualenv ${VENV.slice(ROOT.length + 1) || VENV} ${venv.state} in ${seconds(Date.now() - venvStart)}${venv.mode === 'full' ? '' : ' (without bullmq)'}`,
  );
  const packages = venv.mode === 'full' ? ['bullmq', 'redis', 'jsonschema'] : ['redis', 'jsonschema'];
  const versions = await run(
    VENV_PYTHON,
    ['-c', `import importlib.metadata as m; print(" ".join(f"{p}=={m.version(p)}" for p in ${JSON.stringify(packages)}))`],
    { timeoutMs: PYTHON_TIMEOUT_MS },
  );
  if (versions.code !== 0) throw new SetupError(`the virtualenv lacks a requirement:\n${tail(versions.stderr)}`);
  note(`python: ${versions.stdout.trim()}`);
  await flow(stack, venv.mode);
} catch (error) {
  fatal = error instanceof SetupError ? `set-up: ${error.message}` : ((error as Error).stack ?? String(error));
} finally {
  await teardown(stack);
}

if (fatal !== undefined) check('the run completed', false, fatal);
const failed = results.filter((result) => result.ok === false).length;
const skipped = results.filter((result) => result.ok === 'skipped').length;
const passed = results.length - failed - skipped;
note(`took ${seconds(Date.now() - started)}`);
// The plain closing line CI reads: "interop: N passed, N failed[, N skipped]".
note(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed === 0 ? 0 : 1);
