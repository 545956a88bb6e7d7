import { isIP } from 'node:net';
import { z } from 'zod';
import { createKeys } from '../ledger/keys.ts';
import { hashTag, keySlot } from '../../packages/producer/src/redis-slot.ts';
import { QueueName } from '../queues/names.ts';
import { PROVIDERS } from '../custody/providers.ts';
import type { AnyCustodyProvider, VariableDoc } from '../custody/provider-kind.ts';
import { TOMBSTONE_RETENTION_FLOOR_MS } from '../timing.ts';
import { bool, duration, integer, optionalDuration, optionalHttpUrl, text } from './validators.ts';
import { endpointUrlProblems, parseEndpoints, parseRetrySchedule, RETRY_SCHEDULE_RULE } from '../webhooks/endpoints.ts';
import { consoleProblems, consoleUsers, headerName, submitApiKeys, trustedProxies } from './console.ts';

/** Exit code for a configuration error (EX_CONFIG from sysexits.h). */
export const EX_CONFIG = 78;
/** Exit code when Redis stayed unreachable for REDIS_CONNECT_TIMEOUT, or the HTTP port is taken (EX_UNAVAILABLE). */
export const EX_UNAVAILABLE = 69;
/** Exit code for any other failure at start-up (EX_SOFTWARE). */
export const EX_SOFTWARE = 70;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const providerNames = PROVIDERS.map((provider) => provider.name);

/** The custody providers the worker can talk to (CUSTODY_PROVIDER, src/custody/providers.ts); the first is the default. */
export const CUSTODY_PROVIDERS: readonly CustodyProviderName[] = providerNames;
export type CustodyProviderName = (typeof PROVIDERS)[number]['name'];

const custodyProvider = z.preprocess(
  (v) => (v === undefined || v === '' ? CUSTODY_PROVIDERS[0] : v),
  z.enum(providerNames as [CustodyProviderName, ...CustodyProviderName[]], `must be one of ${CUSTODY_PROVIDERS.join(', ')}`),
);

const redisUrl = z.preprocess(
  (v) => (v === undefined || v === '' ? 'redis://127.0.0.1:6379' : v),
  z.string().refine((v) => URL.canParse(v) && /^rediss?:$/.test(new URL(v).protocol), 'must be a redis:// or rediss:// URL'),
);

const hostPorts = () =>
  z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string()
      .transform((v, ctx) => {
        const nodes = v.split(',').map((part) => part.trim());
        const parsed = nodes.map((node) => /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(node));
        if (parsed.some((m) => m === null || Number(m[2]) > 65535)) {
          ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of host:port' });
          return z.NEVER;
        }
        return parsed.map((m) => ({ host: m![1]!.replace(/^\[|\]$/g, ''), port: Number(m![2]) }));
      })
      .optional(),
  );

/** A comma-separated list of names, each trimmed; unset or empty means none. */
const nameList = () =>
  z.preprocess(
    (v) => (v === undefined ? '' : v),
    z.string().transform((v, ctx) => {
      if (v === '') return [];
      const names = v.split(',').map((name) => name.trim());
      if (names.some((name) => name === '')) {
        ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of names, none of them empty' });
        return z.NEVER;
      }
      return [...new Set(names)];
    }),
  );

const queuePrefix = z.preprocess(
  (v) => (v === undefined || v === '' ? 'bull' : v),
  z.string().regex(/^[A-Za-z0-9_{}.:-]{1,64}$/, 'must be 1-64 of letters, digits and _{}.:-'),
);

/** WEBHOOK_ENDPOINTS: unset (no webhooks), or the endpoints; a problem never quotes the value (it holds secrets). */
const webhookEndpoints = z.preprocess(
  (v) => (v === '' ? undefined : v),
  z
    .string()
    .transform((v, ctx) => {
      const parsed = parseEndpoints(v);
      if ('endpoints' in parsed) return parsed.endpoints;
      for (const message of parsed.problems) ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    })
    .optional(),
);

const retrySchedule = z.preprocess(
  (v) => (v === undefined || v === '' ? '0,5s,5m,30m,2h,5h,10h,14h,20h,24h' : v),
  z.string().transform((v, ctx) => {
    const schedule = parseRetrySchedule(v);
    if (schedule === undefined) {
      ctx.addIssue({ code: 'custom', message: RETRY_SCHEDULE_RULE });
      return z.NEVER;
    }
    return schedule;
  }),
);

/**
 * The environment as the contract names it (docs/contract.md section 2), one key per variable, but for
 * the custody providers' own variables (each provider's `env`, src/custody/providers.ts), which come
 * right after CUSTODY_PROVIDER.
 */
const envSchema = z.object({
  REDIS_URL: redisUrl,
  REDIS_CLUSTER_NODES: hostPorts(),
  REDIS_SENTINELS: hostPorts(),
  REDIS_SENTINEL_MASTER: z.preprocess(
    (v) => (v === undefined || v === '' ? 'mymaster' : v),
    z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 of letters, digits and ._-'),
  ),
  REDIS_SENTINEL_PASSWORD: text(),
  REDIS_PASSWORD: text(),
  REDIS_MIN_REPLICAS: integer(0, 0, 16),
  REDIS_REPLICA_TIMEOUT: duration('1s', 1),
  REDIS_CONNECT_TIMEOUT: duration('60s', 0),
  REDIS_ALLOW_VOLATILE: bool(false),
  REDIS_ALLOW_EVICTION: bool(false),
  QUEUE_PREFIX: queuePrefix,
  EVENTS_STREAM: text(),
  EVENTS_MAXLEN: integer(1_000_000, 1_000, 1_000_000_000),

  CUSTODY_PROVIDER: custodyProvider,
  CUSTODY_TIMEOUT: duration('15s', 100),
  CUSTODY_CONNECT_TIMEOUT: duration('5s', 100),
  CUSTODY_MAX_RPS: integer(0, 0, 1_000_000),
  CUSTODY_MAX_PAUSE: duration('10m', 1_000),
  CUSTODY_CONNECTIONS: integer(64, 1, 4096),

  HTTP_HOST: z.preprocess((v) => (v === undefined || v === '' ? '127.0.0.1' : v), z.string()),
  HTTP_PORT: integer(3000, 0, 65535),
  DASHBOARD_USER: text(),
  DASHBOARD_PASSWORD: text(),
  DASHBOARD_READ_ONLY: bool(true),
  DASHBOARD_METADATA_KEYS: nameList(),
  CONSOLE_USERS: consoleUsers(),
  CONSOLE_PROXY_USER_HEADER: headerName(),
  CONSOLE_PROXY_ROLE_HEADER: headerName(),
  CONSOLE_TRUSTED_PROXIES: trustedProxies(),
  CONSOLE_APPROVAL_WAIT: duration('1h', 1),
  SUBMIT_API_KEYS: submitApiKeys(),
  LOG_LEVEL: z.preprocess((v) => (v === undefined || v === '' ? 'info' : v), z.enum(LOG_LEVELS, `must be one of ${LOG_LEVELS.join(', ')}`)),

  SUBMIT_CONCURRENCY: integer(16, 1, 10_000),
  TRACK_CONCURRENCY: integer(64, 1, 10_000),
  SUBMIT_ATTEMPTS: integer(8, 1, 1_000),
  LOOKUP_BEFORE_FIRST_SEND: bool(false),
  SUBMIT_RETRY_BASE: duration('1s', 1),
  SUBMIT_RETRY_MAX: duration('60s', 1),
  UNRESOLVED_AFTER: duration('10m', 1),
  JOB_LOCK_DURATION: duration('30s', 1_000),
  JOB_MAX_STALLED: integer(5, 0, 1_000),
  WORKER_STALL_TIMEOUT: duration('30s', 0),
  TRAVEL_RULE_CACHE_TTL: duration('30s', 0),
  TRACK_POLL_MIN: duration('2s', 10),
  TRACK_POLL_MAX: duration('60s', 10),
  TRACK_DEADLINE: duration('24h', 1_000),
  RECONCILE_EVERY: duration('5m', 1_000),
  RECONCILE_GRACE: duration('2m', 0),
  RETENTION: duration('30d', 1_000),
  TOMBSTONE_RETENTION: duration(
    '3650d',
    TOMBSTONE_RETENTION_FLOOR_MS,
    'must be at least 365d: once RETENTION + TOMBSTONE_RETENTION have passed, a sequenceId whose transfer ended (a cancelled one too) is sent again if a job for it comes',
  ),
  LEDGER_INIT: z.preprocess((v) => (v === undefined || v === '' ? 'auto' : v), z.enum(['auto', 'manual'], 'must be auto or manual')),
  LEDGER_RECOVERY_WINDOW: optionalDuration(1_000),
  AUDIT_RETENTION: duration('365d', 1_000),
  JOB_RETENTION: duration('1d', 1_000),
  JOB_KEEP_COMPLETED: integer(1_000, 0, 10_000_000),
  SHUTDOWN_TIMEOUT: duration('30s', 1_000),

  WEBHOOK_ENDPOINTS: webhookEndpoints,
  WEBHOOK_ALLOW_HTTP: bool(false),
  WEBHOOK_ALLOW_PRIVATE: bool(false),
  WEBHOOK_TIMEOUT: duration('15s', 100),
  WEBHOOK_RETRY_SCHEDULE: retrySchedule,

  OTEL_EXPORTER_OTLP_ENDPOINT: optionalHttpUrl(),
  OTEL_SERVICE_NAME: z.preprocess((v) => (v === undefined || v === '' ? 'custody-transfer-worker' : v), z.string().max(256)),
});

type Provider = (typeof PROVIDERS)[number];

/** A variable of one provider's own (its `env`). */
type ProviderVariable = { [P in Provider as P['name']]: keyof P['env']['shape'] & string }[Provider['name']];

/** The provider CUSTODY_PROVIDER names, or undefined for a value that names none. */
function providerNamed(name: unknown): AnyCustodyProvider | undefined {
  return (PROVIDERS as readonly AnyCustodyProvider[]).find((provider) => provider.name === name);
}

/** A shape with `inserted` right after CUSTODY_PROVIDER, so that problems (and docs rows) keep that order. */
function afterCustodyProvider<T>(shape: Record<string, T>, inserted: Record<string, T>): Record<string, T> {
  const entries = Object.entries(shape);
  const at = entries.findIndex(([name]) => name === 'CUSTODY_PROVIDER') + 1;
  return Object.fromEntries([...entries.slice(0, at), ...Object.entries(inserted), ...entries.slice(at)]);
}

/**
 * envSchema as CUSTODY_PROVIDER chooses it: a provider's own variables are read (and required) only
 * when it is the one chosen. With an unknown provider none are read, so that the CUSTODY_PROVIDER
 * problem is not buried under those of variables the operator may not have meant to set.
 */
function schemaFor(provider: AnyCustodyProvider | undefined): z.ZodObject {
  return provider ? z.object(afterCustodyProvider<z.core.$ZodType>(envSchema.shape, provider.env.shape)) : envSchema;
}

/** An environment variable the worker reads: a key of envSchema, or one of a provider's own. */
export type ConfigVariable = keyof typeof envSchema.shape | ProviderVariable;

/** `A`, `B` and `C`, in backticks. */
function list(names: readonly string[]): string {
  return new Intl.ListFormat('en', { type: 'conjunction' }).format(names.map((name) => `\`${name}\``));
}

/** Shared by the two header variables, which the table then shows in one row. */
const PROXY_HEADERS_MEANING =
  "request headers that name the user and the role (`viewer` or `operator`) when a reverse proxy signs people in; both or neither, and only with `CONSOLE_TRUSTED_PROXIES`. Read only from those peers (the connection's own address, never `X-Forwarded-For`); from any other peer they are ignored, so the proxy must replace them in what clients send";

/**
 * What each variable means and what it defaults to, as Markdown for docs/configuration.md
 * (`npm run docs` writes its table from this; test/infra/docs-generated.test.ts fails when the page is
 * stale), with each provider's `docs` after CUSTODY_PROVIDER. Typed by envSchema's keys (and a
 * provider's by its `env`), so a variable without an entry, or an entry without a variable,
 * does not compile. `default` is what an operator reads ("unset", "required", or the value in
 * backticks); the value itself is envSchema's. Variables next to each other with the same `meaning`
 * share one row of the table.
 */
const CORE_DOCS: Readonly<Record<keyof typeof envSchema.shape, VariableDoc>> = {
  REDIS_URL: { default: '`redis://127.0.0.1:6379`', meaning: 'Redis (`rediss://` for TLS; user/password in the URL)' },
  REDIS_CLUSTER_NODES: {
    default: 'unset',
    meaning: '`host:port,…`: use Redis Cluster; then `QUEUE_PREFIX` must carry a hash tag such as `{wtx}`',
  },
  REDIS_SENTINELS: {
    default: 'unset',
    meaning:
      '`host:port,…` of Redis Sentinels: reach the master they name instead of `REDIS_URL` (ioredis follows a failover to the new master); not with `REDIS_CLUSTER_NODES`',
  },
  REDIS_SENTINEL_MASTER: { default: '`mymaster`', meaning: "the master's name at the Sentinels" },
  REDIS_SENTINEL_PASSWORD: { default: 'unset', meaning: "the Sentinels' password, and the data nodes' password (with Sentinel)" },
  REDIS_PASSWORD: { default: 'unset', meaning: "the Sentinels' password, and the data nodes' password (with Sentinel)" },
  REDIS_MIN_REPLICAS: {
    default: '`0`',
    meaning:
      'with 1 or more, every replica the master lists online, and at least this many, must acknowledge (Redis `WAIT`) the record of a send in flight before any sendTransaction request is written; when fewer do within `REDIS_REPLICA_TIMEOUT`, nothing is sent, the lease is released, `custody_redis_replica_wait_failures_total` counts it and the step retries later. Production with replicas: `1`',
  },
  REDIS_REPLICA_TIMEOUT: { default: '`1s`', meaning: 'how long that `WAIT` may take' },
  REDIS_CONNECT_TIMEOUT: {
    default: '`60s`',
    meaning:
      'how long start-up waits for Redis (one log line per attempt, every 2 s; HTTP answers meanwhile, `/readyz` 503) before exiting 69; `0` waits for ever',
  },
  REDIS_ALLOW_VOLATILE: {
    default: 'unset',
    meaning:
      "at start-up the worker reads the primary's persistence (`INFO persistence`, `CONFIG GET save`; every master of a Cluster); when it has no AOF it refuses to start (exit 78, one line naming the risk) unless this is `1`: with neither AOF nor RDB saves a restart empties it, with RDB saves only (snapshot-only) a restart loses the writes since the last snapshot. Fields a managed service hides count as unknown (a warning), not refused",
  },
  REDIS_ALLOW_EVICTION: {
    default: 'unset',
    meaning:
      'at start-up the worker reads `maxmemory-policy` (`CONFIG GET`, else `INFO memory`) on the primary and every master of a Cluster; any policy but `noeviction` may evict keys with a TTL (tombstones, ended records, cancel records), so it refuses to start (exit 78, one line naming the risk) unless this is `1` (then one warning). A policy a managed service hides counts as unknown (a warning), not refused',
  },
  QUEUE_PREFIX: { default: '`bull`', meaning: 'BullMQ prefix; every key the worker owns starts with it' },
  EVENTS_STREAM: {
    default: '`<QUEUE_PREFIX>:transfer-events`',
    meaning: "the events stream (on a cluster it must carry the prefix's hash tag)",
  },
  EVENTS_MAXLEN: { default: '`1000000`', meaning: 'approximate length the stream is trimmed to (`XADD MAXLEN ~`); at least 1000' },
  CUSTODY_PROVIDER: {
    default: `\`${CUSTODY_PROVIDERS[0]}\``,
    meaning: `the custody provider: ${new Intl.ListFormat('en', { type: 'disjunction' }).format(
      PROVIDERS.map((p) => `\`${p.name}\` (reads ${list(Object.keys(p.env.shape))})`),
    )}; only the chosen provider's own variables are read (the others' are ignored, not even checked), and anything else is a configuration error. The time-outs, \`CUSTODY_MAX_RPS\`, \`CUSTODY_MAX_PAUSE\` and \`CUSTODY_CONNECTIONS\` apply to every provider`,
  },
  CUSTODY_TIMEOUT: {
    default: '`15s`',
    meaning:
      'deadline of one custody request (connect + headers + body); a whole sendTransaction call (rate-limit wait, token requests, a 401 and its retry) has `5s + 2 × CUSTODY_TIMEOUT`, and the send lease 10 s more (`src/timing.ts`)',
  },
  CUSTODY_CONNECT_TIMEOUT: { default: '`5s`', meaning: 'TCP/TLS connect time-out' },
  CUSTODY_MAX_RPS: { default: '`0` (no limit)', meaning: 'custody requests per second, shared by all worker processes' },
  CUSTODY_MAX_PAUSE: {
    default: '`10m`',
    meaning:
      "longest pause a provider's 429 imposes: every request class of every process stops for the answer's `Retry-After`, at most this long; each 429 logs one warn line naming the endpoint, the `Retry-After` asked and the pause applied, and `custody_upstream_paused_until_seconds` shows when the pause ends. At least `1s`",
  },
  CUSTODY_CONNECTIONS: { default: '`64`', meaning: 'keep-alive connections per custody origin' },
  HTTP_HOST: { default: '`127.0.0.1`', meaning: 'the HTTP server' },
  HTTP_PORT: { default: '`3000`', meaning: 'the HTTP server' },
  DASHBOARD_USER: { default: 'unset', meaning: 'dashboard Basic auth; required when `HTTP_HOST` is not loopback' },
  DASHBOARD_PASSWORD: { default: 'unset', meaning: 'dashboard Basic auth; required when `HTTP_HOST` is not loopback' },
  DASHBOARD_READ_ONLY: { default: '`true`', meaning: 'Bull Board without destructive actions' },
  DASHBOARD_METADATA_KEYS: {
    default: 'unset (none)',
    meaning:
      'comma-separated `metadata` keys whose values the dashboard and `/transfers/:sequenceId` show, scalars only (under such a key an object keeps its keys, each value `[redacted]`); every other `metadata` value and every value under `travelRule` is shown as `[redacted]`',
  },
  CONSOLE_USERS: {
    default: 'unset',
    meaning:
      'console and `/api/v1` users who sign in with Basic auth: comma-separated `name:role:hash`, `role` `viewer` (reads) or `operator` (also acts), `hash` as `npm run cli -- hash-secret` prints it (scrypt), names unique (1-64 of letters, digits and `._@+-`, not `DASHBOARD_USER`). `DASHBOARD_USER`/`DASHBOARD_PASSWORD` remain valid as one more `viewer`',
  },
  CONSOLE_PROXY_USER_HEADER: { default: 'unset', meaning: PROXY_HEADERS_MEANING },
  CONSOLE_PROXY_ROLE_HEADER: { default: 'unset', meaning: PROXY_HEADERS_MEANING },
  CONSOLE_TRUSTED_PROXIES: {
    default: 'unset',
    meaning:
      'the peers whose proxy headers count: comma-separated IPv4 or IPv6 addresses or CIDRs (`10.0.0.0/8`, `fd00::/8`); required with them',
  },
  CONSOLE_APPROVAL_WAIT: {
    default: '`1h`',
    meaning:
      'a submitted transfer the provider has been holding for an approval (BitGo `pendingApproval`) this long needs attention (the console\'s "needs attention" list, reason `approval`); since when is recorded by the first tracking poll that sees it',
  },
  SUBMIT_API_KEYS: {
    default: 'unset (the route is off)',
    meaning:
      'keys of `POST /api/v1/transfers` (`Authorization: Bearer <key>`): comma-separated `name:hash`, `hash` as `npm run cli -- hash-secret` prints it for the key (scrypt), names unique (1-64 of letters, digits and `._@+-`); the route answers 404 when unset',
  },
  LOG_LEVEL: { default: '`info`', meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace`, `silent`' },
  SUBMIT_CONCURRENCY: { default: '`16`', meaning: 'jobs at once per worker process' },
  TRACK_CONCURRENCY: { default: '`64`', meaning: 'jobs at once per worker process' },
  SUBMIT_ATTEMPTS: {
    default: '`8`',
    meaning:
      'sendTransaction requests (or failed travel-rule lookups) of a submission before `transfer.failed` when every one was answered "not taken"; also the most sends made while a send\'s outcome is unknown (then only lookups)',
  },
  LOOKUP_BEFORE_FIRST_SEND: {
    default: 'unset',
    meaning:
      '`1`: every transfer is looked up by sequenceId before its first send, and sent only when the lookup finds nothing (found: submitted without a send; a record it cannot tell: no send, unresolved). For a provider that does not refuse a reused sequenceId: it covers a ledger that went back in time unnoticed (every worker process restarted onto an older Redis). Costs one lookup per transfer (bench/README.md)',
  },
  SUBMIT_RETRY_BASE: { default: '`1s`', meaning: 'first and largest delay between two submission attempts (capped exponential, jittered)' },
  SUBMIT_RETRY_MAX: { default: '`60s`', meaning: 'first and largest delay between two submission attempts (capped exponential, jittered)' },
  UNRESOLVED_AFTER: {
    default: '`10m`',
    meaning:
      'a send whose outcome is still unknown this long after it was made gets `transfer.unresolved` (once); the worker keeps resolving',
  },
  JOB_LOCK_DURATION: { default: '`30s`', meaning: "BullMQ job lock; a killed worker's jobs are recovered after about this long" },
  JOB_MAX_STALLED: { default: '`5`', meaning: 'how often one job may be recovered from a dead worker before it fails' },
  WORKER_STALL_TIMEOUT: {
    default: '`30s`',
    meaning:
      "a queue's worker in this process that has started no job for this long while its queue has work due (waiting, or delayed and overdue) is replaced by a new one (`custody_worker_replaced_total`); `0` turns this off",
  },
  TRAVEL_RULE_CACHE_TTL: { default: '`30s`', meaning: 'how long an is-enabled answer is reused (`0` = ask every time)' },
  TRACK_POLL_MIN: { default: '`2s`', meaning: 'first and largest delay between two polls of one transfer' },
  TRACK_POLL_MAX: { default: '`60s`', meaning: 'first and largest delay between two polls of one transfer' },
  TRACK_DEADLINE: {
    default: '`24h`',
    meaning:
      'tracking gives up (`transfer.expired`) this long after submission; an unresolved send ends `transfer.expired` `SEND_OUTCOME_UNKNOWN` this long after it was made, and a sequenceId found in use by another transaction `SEQUENCE_ID_IN_USE` this long after it was found',
  },
  RECONCILE_EVERY: { default: '`5m`', meaning: 'interval of the reconciliation schedule' },
  RECONCILE_GRACE: { default: '`2m`', meaning: 'how long a transfer may sit in a non-terminal state before reconciliation repairs it' },
  RETENTION: { default: '`30d`', meaning: 'how long terminal transfers are kept' },
  TOMBSTONE_RETENTION: {
    default: '`3650d`',
    meaning:
      'how long the fact that a sequenceId ended (its terminal state and last version) outlives `RETENTION`: within it, a job for that sequenceId completes without a send or an event; after it, that sequenceId can be sent again. At least `365d` (shorter exits 78)',
  },
  LEDGER_INIT: {
    default: '`auto`',
    meaning:
      '`auto`: a ledger without an epoch writes one at the first start; `manual`: nothing is sent until an operator runs `npm run cli -- ledger init` (production: a Redis that came back empty never starts sending unannounced)',
  },
  LEDGER_RECOVERY_WINDOW: {
    default: '`TRACK_DEADLINE`',
    meaning: 'after the ledger was found lost, how long every transfer is looked up before a send (`ledger accept-epoch` ends it early)',
  },
  AUDIT_RETENTION: {
    default: '`365d`',
    meaning:
      'how long operator actions (cancel, resolve, accept-epoch; allowed or refused) stay on the audit stream `<QUEUE_PREFIX>:audit`: each new entry trims the entries older than this (by age, never by count). At least `1s`',
  },
  JOB_RETENTION: { default: '`1d`', meaning: 'how long completed jobs stay visible in the queues' },
  JOB_KEEP_COMPLETED: {
    default: '`1000`',
    meaning:
      'at most this many completed jobs are kept per queue (the ledger and the stream keep the transfers; completed jobs are only for looking at)',
  },
  SHUTDOWN_TIMEOUT: { default: '`30s`', meaning: 'how long SIGTERM waits for in-flight jobs before exiting anyway' },
  WEBHOOK_ENDPOINTS: {
    default: 'unset (no webhooks)',
    meaning:
      'outbound webhooks (docs/contract.md, "Webhooks"): a JSON array, or `@` and the path of a file holding one, of `{ "name", "url", "secrets": ["whsec_…", …], "events": [types] }`; `name` 1-64 of letters, digits, `_` and `-`, unique; each secret `whsec_` and the base64 of at least 16 bytes; `events` optional (every type when absent), each a known event type',
  },
  WEBHOOK_ALLOW_HTTP: { default: 'unset', meaning: '`1` allows `http://` endpoint URLs (refused otherwise)' },
  WEBHOOK_ALLOW_PRIVATE: {
    default: 'unset',
    meaning:
      '`1` allows endpoints whose address is loopback, private (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7), link-local (169.254/16, fe80::/10) or unspecified, IPv4-mapped IPv6 included; otherwise refused, checked on every connection on the address the name resolved to',
  },
  WEBHOOK_TIMEOUT: {
    default: '`15s`',
    meaning: 'time-out of one delivery try (connect, answer and at most 64 KiB of its body, which is never logged)',
  },
  WEBHOOK_RETRY_SCHEDULE: {
    default: '`0,5s,5m,30m,2h,5h,10h,14h,20h,24h`',
    meaning:
      "the delay before each try of one delivery (the first counted from when the event was read); after the last failed try the delivery goes to the endpoint's dead-letter stream. A 429 or 503 answer's `Retry-After` (at most 24h) is a floor for the next delay",
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    default: 'unset',
    meaning: 'OTLP/HTTP endpoint; when set, jobs and custody calls are traced (nothing is loaded otherwise)',
  },
  OTEL_SERVICE_NAME: { default: '`custody-transfer-worker`', meaning: 'service name on the traces' },
};

// A provider's variable named like one of the worker's own would silently replace its validator.
for (const provider of PROVIDERS) {
  const taken = Object.keys(provider.env.shape).filter((name) => Object.hasOwn(envSchema.shape, name));
  if (taken.length > 0) throw new Error(`custody provider ${provider.name} declares the worker's own variables: ${taken.join(', ')}`);
}

export const CONFIG_DOCS: Readonly<Record<ConfigVariable, VariableDoc>> = afterCustodyProvider<VariableDoc>(
  CORE_DOCS,
  Object.assign({}, ...PROVIDERS.map((provider) => provider.docs)),
) as Record<ConfigVariable, VariableDoc>;

/**
 * Rules across variables. They read the raw text (defaults applied by hand) so that they are reported
 * together with the per-variable problems, not only once those are fixed.
 */
function crossProblems(env: NodeJS.ProcessEnv): string[] {
  const set = (name: string) => env[name] !== undefined && env[name] !== '';
  const problems: string[] = [];
  problems.push(...(providerNamed(env.CUSTODY_PROVIDER || CUSTODY_PROVIDERS[0])?.check?.(env) ?? []));
  if (set('REDIS_CLUSTER_NODES') && set('REDIS_SENTINELS')) {
    problems.push('REDIS_SENTINELS: cannot be combined with REDIS_CLUSTER_NODES (a Cluster fails over on its own)');
  }
  if (set('REDIS_CLUSTER_NODES')) problems.push(...clusterSlotProblems(env.QUEUE_PREFIX || 'bull', env.EVENTS_STREAM || undefined));
  problems.push(...webhookProblems(env));
  problems.push(...consoleProblems(env));
  if (!isLoopback(env.HTTP_HOST || '127.0.0.1')) {
    for (const name of ['DASHBOARD_USER', 'DASHBOARD_PASSWORD']) {
      if (!set(name)) problems.push(`${name}: required when HTTP_HOST is not a loopback address`);
    }
  }
  return problems;
}

/** WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE against the endpoints' URLs (when both parse). */
function webhookProblems(env: NodeJS.ProcessEnv): string[] {
  const endpoints = webhookEndpoints.safeParse(env.WEBHOOK_ENDPOINTS);
  const allowHttp = bool(false).safeParse(env.WEBHOOK_ALLOW_HTTP);
  const allowPrivate = bool(false).safeParse(env.WEBHOOK_ALLOW_PRIVATE);
  if (!endpoints.success || endpoints.data === undefined || !allowHttp.success || !allowPrivate.success) return [];
  return endpointUrlProblems(endpoints.data, { http: allowHttp.data, private: allowPrivate.data }).map(
    (problem) => `WEBHOOK_ENDPOINTS: ${problem}`,
  );
}

/**
 * On Redis Cluster every key one Lua script or one BullMQ command touches must hash to one slot. The
 * slots are computed as Redis computes them (packages/producer/src/redis-slot.ts) for a key of every
 * family the worker and BullMQ write, not guessed from the text: `{}{wtx}` carries no hash tag at all, `{a}{wtx}:events` the
 * tag `a`. Values are never quoted in the message, as a secret pasted into the wrong variable would be.
 */
export function clusterSlotProblems(prefix: string, eventsStream: string | undefined): string[] {
  const wanted = 'when REDIS_CLUSTER_NODES is set';
  if (hashTag(`${prefix}:`) === undefined) {
    return [`QUEUE_PREFIX: must carry a Redis hash tag such as {wtx} (a non-empty text between its first "{" and the next "}") ${wanted}`];
  }
  const keys = createKeys(prefix, eventsStream ?? `${prefix}:transfer-events`);
  const sample = 'a88a1846-b23d-f7e8-2344-f2bddb0c16f9';
  const slot = keySlot(keys.transfer(sample));
  const owned = [
    keys.transferPayload(sample),
    keys.tombstone(sample),
    keys.attempts(sample),
    keys.jobRejection(sample),
    keys.legacyActive,
    keys.terminal,
    keys.broadcast,
    keys.trackerOutbox,
    keys.epoch,
    keys.workerSettings,
    keys.audit,
    keys.travelRule,
    keys.travelRuleLock,
    keys.rateLimit,
    keys.reconcileLock,
    keys.reconcileRetries(sample, 1_700_000_000_000),
    keys.lookupNarrowing(310, 'eth'),
    // BullMQ's keys: <prefix>:<queue>:<suffix or job id>.
    ...Object.values(QueueName).flatMap((queue) => [
      `${prefix}:${queue}:wait`,
      `${prefix}:${queue}:meta`,
      `${prefix}:${queue}:Qn4xfxmEoGQ6LcqXYkS6oB`,
    ]),
  ];
  if (owned.some((key) => keySlot(key) !== slot)) {
    return [`QUEUE_PREFIX: its hash tag must come before anything else in braces, so that every key under it hashes to one slot ${wanted}`];
  }
  if (keySlot(keys.events) !== slot) {
    return [`EVENTS_STREAM: must hash to the same Redis Cluster slot as QUEUE_PREFIX (carry the same hash tag first) ${wanted}`];
  }
  return [];
}

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

function build(env: z.infer<typeof envSchema>, custody: CustodySettings) {
  const prefix = env.QUEUE_PREFIX;
  return {
    redis: {
      ...redisConnection(env),
      minReplicas: env.REDIS_MIN_REPLICAS,
      replicaTimeoutMs: env.REDIS_REPLICA_TIMEOUT,
      /** How long start-up waits for Redis before exiting EX_UNAVAILABLE; 0 = for ever. */
      connectTimeoutMs: env.REDIS_CONNECT_TIMEOUT,
      /** Start even when the primary keeps no AOF (nothing on disk, or RDB snapshots only): only for throw-away set-ups. */
      allowVolatile: env.REDIS_ALLOW_VOLATILE,
      /** Start even when the primary's maxmemory-policy may evict keys: tombstones and ended records could go. */
      allowEviction: env.REDIS_ALLOW_EVICTION,
    },
    queue: {
      prefix,
      eventsStream: env.EVENTS_STREAM ?? `${prefix}:transfer-events`,
      eventsMaxLen: env.EVENTS_MAXLEN,
    },
    custody: {
      /** Which adapter src/custody/provider.ts builds (src/custody/providers.ts), and its own settings. */
      ...custody,
      timeoutMs: env.CUSTODY_TIMEOUT,
      connectTimeoutMs: env.CUSTODY_CONNECT_TIMEOUT,
      maxRps: env.CUSTODY_MAX_RPS,
      /** A 429's Retry-After above this is read as this: the longest pause of every request class. */
      maxPauseMs: env.CUSTODY_MAX_PAUSE,
      connections: env.CUSTODY_CONNECTIONS,
    },
    http: {
      host: env.HTTP_HOST,
      port: env.HTTP_PORT,
      dashboardUser: env.DASHBOARD_USER,
      dashboardPassword: env.DASHBOARD_PASSWORD,
      dashboardReadOnly: env.DASHBOARD_READ_ONLY,
      /** Keys of a job's `metadata` whose values the dashboard shows; every other value is redacted. */
      dashboardMetadataKeys: env.DASHBOARD_METADATA_KEYS,
      /** Who may use the console and `/api/v1`, with which role (src/http/access/). */
      console: {
        users: env.CONSOLE_USERS,
        proxy:
          env.CONSOLE_PROXY_USER_HEADER && env.CONSOLE_PROXY_ROLE_HEADER && env.CONSOLE_TRUSTED_PROXIES
            ? { userHeader: env.CONSOLE_PROXY_USER_HEADER, roleHeader: env.CONSOLE_PROXY_ROLE_HEADER, trusted: env.CONSOLE_TRUSTED_PROXIES }
            : undefined,
        /** A transfer waiting for the provider's approval this long needs attention (TransferQueries). */
        approvalWaitMs: env.CONSOLE_APPROVAL_WAIT,
      },
    },
    log: { level: env.LOG_LEVEL },
    submit: {
      concurrency: env.SUBMIT_CONCURRENCY,
      attempts: env.SUBMIT_ATTEMPTS,
      /** Every transfer is looked up by sequenceId before its first send (not only while the ledger recovers). */
      lookupBeforeFirstSend: env.LOOKUP_BEFORE_FIRST_SEND,
      retryBaseMs: env.SUBMIT_RETRY_BASE,
      retryMaxMs: env.SUBMIT_RETRY_MAX,
      unresolvedAfterMs: env.UNRESOLVED_AFTER,
      travelRuleCacheTtlMs: env.TRAVEL_RULE_CACHE_TTL,
      /** Keys of `POST /api/v1/transfers` (src/http/api-v1/submit.ts); empty: the route is off. */
      apiKeys: env.SUBMIT_API_KEYS,
    },
    track: {
      concurrency: env.TRACK_CONCURRENCY,
      pollMinMs: env.TRACK_POLL_MIN,
      pollMaxMs: env.TRACK_POLL_MAX,
      deadlineMs: env.TRACK_DEADLINE,
    },
    reconcile: {
      everyMs: env.RECONCILE_EVERY,
      graceMs: env.RECONCILE_GRACE,
    },
    retention: {
      transfersMs: env.RETENTION,
      tombstonesMs: env.TOMBSTONE_RETENTION,
      jobsMs: env.JOB_RETENTION,
      jobsCount: env.JOB_KEEP_COMPLETED,
    },
    ledger: {
      /** Whether an empty ledger initialises its epoch itself (`auto`) or waits for `ledger init`. */
      init: env.LEDGER_INIT,
      /** After the ledger was found lost, how long every transfer is looked up before its first send. */
      recoveryWindowMs: env.LEDGER_RECOVERY_WINDOW ?? env.TRACK_DEADLINE,
    },
    audit: {
      /** How long an operator action stays on the audit stream (trimmed by age on each append). */
      retentionMs: env.AUDIT_RETENTION,
    },
    jobs: {
      lockDurationMs: env.JOB_LOCK_DURATION,
      maxStalledCount: env.JOB_MAX_STALLED,
      /** A worker that starts no job this long while its queue has work due is replaced; 0 = never. */
      workerStallMs: env.WORKER_STALL_TIMEOUT,
    },
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT,
    webhooks: {
      /** Empty when WEBHOOK_ENDPOINTS is unset: then no webhook subsystem starts. */
      endpoints: env.WEBHOOK_ENDPOINTS ?? [],
      allowPrivate: env.WEBHOOK_ALLOW_PRIVATE,
      timeoutMs: env.WEBHOOK_TIMEOUT,
      /** The delay before each try; after the last, the dead-letter. */
      retryScheduleMs: env.WEBHOOK_RETRY_SCHEDULE,
    },
    telemetry: {
      otlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT,
      serviceName: env.OTEL_SERVICE_NAME,
    },
  };
}

/**
 * What `Config['custody']` holds for the chosen provider: its name and its settings, typed per provider
 * (narrow by `provider` to read them; src/custody/provider.ts hands them back to the provider).
 */
export type CustodySettings = {
  [P in Provider as P['name']]: { provider: P['name']; settings: ReturnType<P['settings']> };
}[Provider['name']];

export type Config = ReturnType<typeof build>;

/** Thrown by loadConfig; `problems` holds one line per variable, never a value. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Parses the environment once. Only this module reads the environment. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const provider = providerNamed(custodyProvider.safeParse(env.CUSTODY_PROVIDER).data);
  const result = schemaFor(provider).safeParse(env);
  const problems = result.success ? [] : issueLines(result.error);
  problems.push(...crossProblems(env));
  if (!result.success || !provider) throw new ConfigError([...new Set(problems)]);
  // The same text parsed again by the shapes it was validated with: typed, and cheap.
  const core = envSchema.parse(env);
  if (core.TRACK_POLL_MAX < core.TRACK_POLL_MIN) problems.push('TRACK_POLL_MAX: must not be smaller than TRACK_POLL_MIN');
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  const custody = { provider: provider.name, settings: provider.settings(provider.env.parse(env) as never) } as CustodySettings;
  return deepFreeze(build(core, custody));
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** For entry points: parse or print one line per problem to stderr and exit 78. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`configuration error, not starting:\n${error.problems.map((p) => `  ${p}`).join('\n')}\n`);
      process.exit(EX_CONFIG);
    }
    throw error;
  }
}

/** Every environment variable the worker reads (for the container files' test and the docs). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(CONFIG_DOCS);

const queueEnvSchema = envSchema.pick({
  REDIS_URL: true,
  REDIS_CLUSTER_NODES: true,
  REDIS_SENTINELS: true,
  REDIS_SENTINEL_MASTER: true,
  REDIS_SENTINEL_PASSWORD: true,
  REDIS_PASSWORD: true,
  QUEUE_PREFIX: true,
  EVENTS_STREAM: true,
});

/** Where Redis is: a URL, a Cluster's nodes, or Sentinels and the master's name (with passwords). */
function redisConnection(
  env: Pick<
    z.infer<typeof envSchema>,
    'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_MASTER' | 'REDIS_SENTINEL_PASSWORD' | 'REDIS_PASSWORD'
  >,
) {
  return {
    url: env.REDIS_URL,
    clusterNodes: env.REDIS_CLUSTER_NODES,
    sentinel: env.REDIS_SENTINELS
      ? {
          nodes: env.REDIS_SENTINELS,
          master: env.REDIS_SENTINEL_MASTER,
          sentinelPassword: env.REDIS_SENTINEL_PASSWORD,
          password: env.REDIS_PASSWORD,
        }
      : undefined,
  };
}

/**
 * Only where the queues and the stream are (REDIS_*, QUEUE_PREFIX, EVENTS_STREAM): for tools such as
 * the CLI's enqueue/status/events, which need no custody credentials.
 */
export type RedisConnection = ReturnType<typeof redisConnection>;

export function loadQueueConfig(
  env: NodeJS.ProcessEnv = process.env,
): Readonly<{ redis: RedisConnection; queue: Omit<Config['queue'], 'eventsMaxLen'> }> {
  const result = queueEnvSchema.safeParse(env);
  const problems = result.success ? [] : issueLines(result.error);
  if (env.REDIS_CLUSTER_NODES) problems.push(...clusterSlotProblems(env.QUEUE_PREFIX || 'bull', env.EVENTS_STREAM || undefined));
  if (!result.success || problems.length > 0) throw new ConfigError([...new Set(problems)]);
  const { QUEUE_PREFIX, EVENTS_STREAM } = result.data;
  return deepFreeze({
    redis: redisConnection(result.data),
    queue: { prefix: QUEUE_PREFIX, eventsStream: EVENTS_STREAM ?? `${QUEUE_PREFIX}:transfer-events` },
  });
}

/** The queue settings and `schema`'s variables, or a ConfigError listing every problem of both. */
function withQueueConfig<S extends z.ZodType>(
  env: NodeJS.ProcessEnv,
  schema: S,
): { queueConfig: ReturnType<typeof loadQueueConfig>; data: z.output<S> } {
  const problems: string[] = [];
  let queueConfig: ReturnType<typeof loadQueueConfig> | undefined;
  try {
    queueConfig = loadQueueConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  const result = schema.safeParse(env);
  if (!result.success) problems.push(...issueLines(result.error));
  if (!queueConfig || !result.success) throw new ConfigError([...new Set(problems)]);
  return { queueConfig, data: result.data };
}

const ledgerEnvSchema = envSchema.pick({
  EVENTS_MAXLEN: true,
  RETENTION: true,
  TOMBSTONE_RETENTION: true,
  LEDGER_INIT: true,
  LEDGER_RECOVERY_WINDOW: true,
  TRACK_DEADLINE: true,
  REDIS_MIN_REPLICAS: true,
  REDIS_REPLICA_TIMEOUT: true,
  AUDIT_RETENTION: true,
});

/**
 * What a tool needs to change the ledger the way the worker does (the CLI's `resolve` and `ledger`):
 * the queue settings plus EVENTS_MAXLEN (stream trimming), RETENTION (how long a terminal record is
 * kept), the epoch's LEDGER_INIT and LEDGER_RECOVERY_WINDOW (default TRACK_DEADLINE), and
 * REDIS_MIN_REPLICAS / REDIS_REPLICA_TIMEOUT (a cancel waits for the replicas) and AUDIT_RETENTION (the audit stream), all with the worker's defaults. Every problem of either part is listed.
 */
export function loadLedgerConfig(env: NodeJS.ProcessEnv = process.env): Readonly<{
  redis: RedisConnection;
  queue: Config['queue'];
  retention: Pick<Config['retention'], 'transfersMs' | 'tombstonesMs'>;
  ledger: Config['ledger'];
  /** REDIS_MIN_REPLICAS and REDIS_REPLICA_TIMEOUT: what a cancel waits for before it answers. */
  replicas: { min: number; timeoutMs: number };
  /** AUDIT_RETENTION: the CLI's operator actions go on the audit stream as the worker's do. */
  audit: Config['audit'];
}> {
  const { queueConfig, data } = withQueueConfig(env, ledgerEnvSchema);
  return deepFreeze({
    redis: queueConfig.redis,
    queue: { ...queueConfig.queue, eventsMaxLen: data.EVENTS_MAXLEN },
    retention: { transfersMs: data.RETENTION, tombstonesMs: data.TOMBSTONE_RETENTION },
    // As loadConfig has them (the worker's `ledger` section).
    ledger: { init: data.LEDGER_INIT, recoveryWindowMs: data.LEDGER_RECOVERY_WINDOW ?? data.TRACK_DEADLINE },
    replicas: { min: data.REDIS_MIN_REPLICAS, timeoutMs: data.REDIS_REPLICA_TIMEOUT },
    audit: { retentionMs: data.AUDIT_RETENTION },
  });
}

function issueLines(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${String(issue.path[0] ?? 'environment')}: ${issue.message}`);
}

const webhookEnvSchema = envSchema.pick({ WEBHOOK_ENDPOINTS: true, DASHBOARD_METADATA_KEYS: true });

/**
 * What the CLI's `webhooks` command needs: the queue settings, the endpoints of WEBHOOK_ENDPOINTS (their
 * names and event types; their URLs are neither checked against WEBHOOK_ALLOW_* nor contacted) and
 * DASHBOARD_METADATA_KEYS (a replayed event's body is built as the worker builds it). Every problem of
 * either part is listed, never a value.
 */
export function loadWebhookConfig(env: NodeJS.ProcessEnv = process.env): Readonly<{
  redis: RedisConnection;
  queue: ReturnType<typeof loadQueueConfig>['queue'];
  endpoints: Config['webhooks']['endpoints'];
  metadataKeys: Config['http']['dashboardMetadataKeys'];
}> {
  const { queueConfig, data } = withQueueConfig(env, webhookEnvSchema);
  return deepFreeze({
    redis: queueConfig.redis,
    queue: queueConfig.queue,
    endpoints: data.WEBHOOK_ENDPOINTS ?? [],
    metadataKeys: data.DASHBOARD_METADATA_KEYS,
  });
}
