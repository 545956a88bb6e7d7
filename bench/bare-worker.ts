/**
 * The baseline of the benchmark: the least a BullMQ worker can do for the same work, run as its own
 * process against the same simulator and Redis as ours.
 *
 *   submit: one HTTP POST sendTransaction (Bearer token fetched once at start) and one XADD of the
 *           answer to a stream (MAXLEN ~ like ours); no validation, no ledger, no tracking job.
 *   submit-same-work: the least a BullMQ worker does for the guarantees ours gives a submission, without
 *           ours' design (bench/README.md, "The same work, bare"): (1) one script that checks the
 *           transfer's record (a hash) and sets state=submitting with a lease before the send, so that a
 *           job run again never sends twice; (2) the POST; (3) one script that checks the lease is still
 *           this run's, marks the record submitted with the answer and XADDs the event, atomically; (4) one
 *           tracking job, Queue.add with a delay of BARE_TRACK_DELAY_MS and a job id per transfer. A job
 *           run again after (3) skips the send and only adds the tracking job (the job id dedupes it).
 *           No validation, no indexes, no epoch, no request budget, no tracker outbox.
 *   track:  one HTTP POST get-transfer (Basic auth) per job, then the job re-delays itself with
 *           moveToDelayed + DelayedError, the BullMQ idiom for "poll again later" (ours does the same).
 *           With BARE_PROVIDER=bitgo: one BitGo GET /api/v2/{coin}/wallet/{walletId}/transfer/sequenceId/{sequenceId}
 *           (Bearer BARE_ACCESS_TOKEN) instead, what ours polls with CUSTODY_PROVIDER=bitgo.
 *
 * BARE_PROVIDER: wallet-service (default; BARE_CLIENT_ID and BARE_CLIENT_SECRET required) or bitgo
 * (BARE_ACCESS_TOKEN required; track mode only).
 *
 * BARE_LIMIT_RPS (optional, > 0): a BullMQ `limiter` of one job per 1000/R ms on the Worker, so it
 * polls at most R/s (bench/scale.ts compares it with ours under CUSTODY_MAX_RPS=R).
 *
 * Both keep completed jobs as ours does by default (removeOnComplete age 1 d, count 1000) and use one undici
 * keep-alive pool with as many connections as ours. Started by bench/processes.ts; prints one line
 * "bare worker ready", stops on SIGTERM.
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { Pool } from 'undici';

const env = process.env;
const required = (name: string): string => {
  const value = env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const mode = required('BARE_MODE');
const provider = env.BARE_PROVIDER || 'wallet-service';
if (provider !== 'wallet-service' && provider !== 'bitgo')
  throw new Error(`BARE_PROVIDER must be wallet-service or bitgo, not ${provider}`);
const prefix = required('BARE_PREFIX');
const stream = required('BARE_STREAM');
const concurrency = Number(required('BARE_CONCURRENCY'));
const trackDelayMs = Number(env.BARE_TRACK_DELAY_MS ?? '10');
const limitRps = Number(env.BARE_LIMIT_RPS ?? '0');
const EVENTS_MAXLEN = 1_000_000;
/** submit-same-work: how long a send's lease holds the record (ours' default lease is of the same order). */
const LEASE_MS = 60_000;

const redis = new Redis(required('BARE_REDIS_URL'), { maxRetriesPerRequest: null });
const pool = new Pool(required('BARE_SIM_URL'), { connections: Number(required('BARE_CONNECTIONS')), keepAliveTimeout: 30_000 });

async function post(path: string, headers: Record<string, string>, body: string): Promise<string> {
  const response = await pool.request({
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body,
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`${path}: HTTP ${response.statusCode}`);
  return text;
}

async function get(path: string, headers: Record<string, string>): Promise<string> {
  const response = await pool.request({ method: 'GET', path, headers: { accept: 'application/json', ...headers } });
  const text = await response.body.text();
  // BitGo documents 206 (the transfer without inputs/outputs) as a success of get-transfer-by-sequenceId.
  if (response.statusCode !== 200 && response.statusCode !== 206) throw new Error(`${path}: HTTP ${response.statusCode}`);
  return text;
}

interface SubmitData {
  walletId: number;
  txHex: string;
  halfSigned: { txBase64: string; txHex: string; sequenceId: string };
}

interface TrackData {
  sequenceId: string;
  /** wallet-service: an integer; bitgo: 32 lowercase hex. */
  walletId: number | string;
  coin: string;
}

/** wallet-service: a Bearer token from the client credentials, fetched once at start. */
async function bearerAuthorization(): Promise<string> {
  const body = { grant_type: 'client_credentials', client_id: required('BARE_CLIENT_ID'), client_secret: required('BARE_CLIENT_SECRET') };
  const answer = JSON.parse(await post('/oauth/token', {}, JSON.stringify(body))) as { access_token: string };
  return `Bearer ${answer.access_token}`;
}

/** wallet-service sendTransaction: the answer's text. */
function sendTransaction(data: SubmitData, authorization: string): Promise<string> {
  return post(
    `/api/wallet/${data.walletId}/sendTransaction`,
    { authorization },
    JSON.stringify({ txHex: data.txHex, halfSigned: data.halfSigned }),
  );
}

let processor: (job: Job, token?: string) => Promise<void>;
let queueName: string;
/** Closed on stop besides the worker (submit-same-work's tracking queue). */
const closing: Array<{ close(): Promise<void> }> = [];

/**
 * submit-same-work, before the send: one script (EVALSHA, HMGET, HSET). Returns `claimed` (send now),
 * `submitted` (sent and recorded by an earlier run: skip the send) or `in-flight` (another run holds the
 * record, or a lease ran out with the send's outcome unknown: never send again blindly).
 */
const CLAIM = `
local record = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil')
if record[1] == 'submitted' then return 'submitted' end
if record[1] == 'submitting' then return 'in-flight' end
redis.call('HSET', KEYS[1], 'state', 'submitting', 'lease', ARGV[1], 'leaseUntil', ARGV[2])
return 'claimed'`;

/**
 * submit-same-work, after the answer: one script (EVALSHA, HGET, HSET, XADD): only the lease's holder
 * marks the record submitted, and the event is written with that mark or not at all.
 */
const MARK = `
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'submitted', 'answer', ARGV[4])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'event', 'transfer.submitted', 'sequenceId', ARGV[3], 'data', ARGV[4])
return 1`;

interface SameWorkCommands {
  bareClaim(record: string, lease: string, leaseUntil: number): Promise<string>;
  bareMark(record: string, stream: string, lease: string, maxLen: number, sequenceId: string, answer: string): Promise<number>;
}
if (provider === 'bitgo') {
  if (mode !== 'track') throw new Error(`BARE_PROVIDER=bitgo: BARE_MODE must be track, not ${mode}`);
  const authorization = `Bearer ${required('BARE_ACCESS_TOKEN')}`;
  queueName = 'track-transfer';
  processor = async (job, token) => {
    const data = job.data as TrackData;
    const wallet = `/api/v2/${encodeURIComponent(data.coin)}/wallet/${encodeURIComponent(String(data.walletId))}`;
    await get(`${wallet}/transfer/sequenceId/${encodeURIComponent(data.sequenceId)}`, { authorization });
    await job.moveToDelayed(Date.now() + trackDelayMs, token);
    throw new DelayedError();
  };
} else if (mode === 'submit') {
  const authorization = await bearerAuthorization();
  queueName = 'submit-transaction';
  processor = async (job) => {
    const data = job.data as SubmitData;
    const answer = await sendTransaction(data, authorization);
    await redis.xadd(
      stream,
      'MAXLEN',
      '~',
      EVENTS_MAXLEN,
      '*',
      'event',
      'transfer.submitted',
      'sequenceId',
      data.halfSigned.sequenceId,
      'data',
      answer,
    );
  };
} else if (mode === 'submit-same-work') {
  const authorization = await bearerAuthorization();
  redis.defineCommand('bareClaim', { numberOfKeys: 1, lua: CLAIM });
  redis.defineCommand('bareMark', { numberOfKeys: 2, lua: MARK });
  const scripts = redis as unknown as SameWorkCommands;
  const trackQueue = new Queue('track-transfer', { connection: redis, prefix });
  closing.push(trackQueue);
  queueName = 'submit-transaction';
  processor = async (job) => {
    const data = job.data as SubmitData & { coin: string };
    const sequenceId = data.halfSigned.sequenceId;
    const record = `${prefix}:bare-transfer:${sequenceId}`;
    const lease = randomUUID();
    const claim = await scripts.bareClaim(record, lease, Date.now() + LEASE_MS);
    if (claim === 'in-flight') throw new Error(`${sequenceId}: a send is in flight or in doubt; not sending again`);
    if (claim === 'claimed') {
      const answer = await sendTransaction(data, authorization);
      if ((await scripts.bareMark(record, stream, lease, EVENTS_MAXLEN, sequenceId, answer)) !== 1)
        throw new Error(`${sequenceId}: the lease was lost before the answer was recorded`);
    }
    await trackQueue.add('track', { sequenceId, walletId: data.walletId, coin: data.coin } satisfies TrackData, {
      jobId: `track-${sequenceId}`,
      delay: trackDelayMs,
    });
  };
} else if (mode === 'track') {
  const clientId = required('BARE_CLIENT_ID');
  const clientSecret = required('BARE_CLIENT_SECRET');
  const authorization = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
  queueName = 'track-transfer';
  processor = async (job, token) => {
    const data = job.data as TrackData;
    await post(
      '/api/wallet/get-transfer',
      { authorization },
      JSON.stringify({ wallet: { walletId: data.walletId, coin: data.coin }, sequenceId: data.sequenceId }),
    );
    await job.moveToDelayed(Date.now() + trackDelayMs, token);
    throw new DelayedError();
  };
} else {
  throw new Error(`BARE_MODE must be submit, submit-same-work or track, not ${mode}`);
}

const worker = new Worker(queueName, processor, {
  connection: redis,
  prefix,
  concurrency,
  removeOnComplete: { age: 86_400, count: 1_000 },
  removeOnFail: { age: 30 * 86_400 },
  ...(limitRps > 0 ? { limiter: { max: 1, duration: Math.max(1, Math.round(1000 / limitRps)) } } : {}),
});
worker.on('error', (error) => process.stderr.write(`bare worker error: ${error.message}\n`));
worker.on('failed', (job, error) => process.stderr.write(`bare job ${job?.id} failed: ${error.message}\n`));
await worker.waitUntilReady();
process.stdout.write(`${JSON.stringify({ msg: 'bare worker ready', provider, mode, concurrency, limitRps })}\n`);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await worker.close();
  for (const resource of closing) await resource.close();
  await pool.close();
  await redis.quit();
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
