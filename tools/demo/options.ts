/**
 * The demo's command line and environment, read once. The demo builds the worker's own environment
 * itself (tools/demo/stack.ts); of the worker's variables it only takes the ones a person running the
 * demo would want to choose: where Redis is, where the dashboard listens and its credentials, the log level.
 */
import { CUSTODY_PROVIDERS, type CustodyProviderName } from '../../src/config/config.ts';
import { parseDuration } from '../../src/config/duration.ts';

export interface DemoOptions {
  /** Stay up after the summary (dashboard browsable) until Ctrl-C. */
  keep: boolean;
  /** stdout: one JSON document per line (events, summary) instead of text. */
  json: boolean;
  help: boolean;
  /**
   * Which custody provider the worker talks to, and so which simulator the demo starts: `wallet-service`
   * (the default) or `bitgo` (--provider, else CUSTODY_PROVIDER).
   */
  provider: CustodyProviderName;
  /** NO_COLOR is set (https://no-color.org): plain text even on a terminal. */
  noColor: boolean;
  /** Normal sample transfers (besides the duplicate, the blocked and the invalid one). */
  normal: number;
  /** Roughly how long the simulator takes from an accepted send to a txid. */
  paceMs: number;
  /** How long to wait for every sample's outcome before giving up. */
  timeoutMs: number;
  /** Skip the testcontainers attempt when no REDIS_URL is given. */
  noContainers: boolean;
  /** On REDIS_URL: leave the run's keys (queues, ledger, events) behind instead of deleting them. */
  keepData: boolean;
  redisUrl: string | undefined;
  /**
   * Sentinel instead of a URL (REDIS_SENTINELS host:port,…; REDIS_SENTINEL_MASTER, REDIS_SENTINEL_PASSWORD,
   * REDIS_PASSWORD): handed to the worker as they are; the demo then starts no Redis of its own.
   */
  sentinel: Record<string, string> | undefined;
  httpHost: string;
  /** undefined: 3000 when free, else any free port. */
  httpPort: number | undefined;
  dashboardUser: string | undefined;
  dashboardPassword: string | undefined;
  logLevel: string;
}

export type ReadOptions = { ok: true; options: DemoOptions } | { ok: false; usage: boolean; problems: string[] };

export const USAGE = `npm run demo [-- --keep] [-- --json] [-- --provider bitgo]

Starts a Redis (REDIS_URL when set, else testcontainers, else a private redis-server), the custody
simulator, the worker and its dashboard; enqueues sample transfers (normal ones, one duplicate, one
without a travel-rule reference, one invalid payload); prints every event, a summary and the dashboard
URL; then stops everything it started.

With --provider bitgo: the BitGo simulator instead, each send waiting in pendingApproval before it is
signed and gets its txid; BitGo has no travel-rule gate, so instead of the transfer without a reference
one carries an integer wallet id, which the worker rejects.

Options:
  --keep        stay up after the summary so the dashboard can be browsed; Ctrl-C stops (DEMO_KEEP=1)
  --json        stdout carries JSON lines (start, event, summary) instead of text (DEMO_JSON=1)
  --provider P  the custody provider: wallet-service (default) or bitgo (CUSTODY_PROVIDER=P)
  --help        this text

Environment:
  REDIS_URL             use this Redis; the run keeps to a fresh key prefix and deletes it at the end
  REDIS_SENTINELS       use the master these Sentinels name (with REDIS_SENTINEL_MASTER, REDIS_SENTINEL_PASSWORD,
                        REDIS_PASSWORD), as the worker does; the same fresh prefix, deleted at the end
  CUSTODY_PROVIDER      wallet-service (default) or bitgo, as --provider (which wins when both are given)
  DEMO_KEEP_DATA=1      on REDIS_URL, leave the run's keys in place
  DEMO_NO_CONTAINERS=1  do not try testcontainers before redis-server
  DEMO_TRANSFERS        normal sample transfers (default 5)
  DEMO_PACE             how long the simulator takes to give a transfer its txid (default 1500ms; with bitgo
                        60% of it waiting in pendingApproval, then 30% to the txid)
  DEMO_TIMEOUT          how long to wait for every outcome (default 60s)
  HTTP_HOST, HTTP_PORT  the worker's HTTP server (default 127.0.0.1, port 3000 when free)
  DASHBOARD_USER, DASHBOARD_PASSWORD   dashboard credentials (generated when HTTP_HOST is not loopback)
  LOG_LEVEL             worker log level, logs go to stderr (default warn)

Exit codes: 0 every sample reached its expected outcome, 1 one did not (or the demo failed),
2 usage error, 78 bad environment, 130 interrupted.`;

const TRUE = new Set(['1', 'true', 'yes']);
const FALSE = new Set(['', '0', 'false', 'no']);
const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

export function readDemoOptions(argv: readonly string[], env: NodeJS.ProcessEnv): ReadOptions {
  const flags = new Set<string>();
  const unknown: string[] = [];
  const usageProblems: string[] = [];
  let providerArg: CustodyProviderName | undefined;
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === '--keep' || arg === '--json' || arg === '--help' || arg === '-h') flags.add(arg === '-h' ? '--help' : arg);
    else if (arg === '--provider' || arg.startsWith('--provider=')) {
      const given = arg === '--provider' ? argv[++index] : arg.slice('--provider='.length);
      if (given === undefined || given === '') usageProblems.push('--provider: needs a value (wallet-service or bitgo)');
      else if (!isProvider(given)) usageProblems.push(`--provider: unknown provider ${JSON.stringify(given)} (wallet-service or bitgo)`);
      else providerArg = given;
    } else unknown.push(arg);
  }
  if (unknown.length > 0 || usageProblems.length > 0) {
    return { ok: false, usage: true, problems: [...unknown.map((arg) => `unknown argument ${JSON.stringify(arg)}`), ...usageProblems] };
  }

  const problems: string[] = [];
  const value = (name: string): string | undefined => {
    const text = env[name]?.trim();
    return text === undefined || text === '' ? undefined : text;
  };
  const bool = (name: string): boolean => {
    const text = (value(name) ?? '').toLowerCase();
    if (TRUE.has(text)) return true;
    if (!FALSE.has(text)) problems.push(`${name}: must be 1 or 0`);
    return false;
  };
  const duration = (name: string, fallback: number, min: number, max: number): number => {
    const text = value(name);
    if (text === undefined) return fallback;
    const ms = parseDuration(text);
    if (ms === undefined || ms < min || ms > max) {
      problems.push(`${name}: must be a duration from ${min} ms to ${max} ms, such as 1500, 2s or 1m`);
      return fallback;
    }
    return ms;
  };
  const integer = (name: string, fallback: number | undefined, min: number, max: number): number | undefined => {
    const text = value(name);
    if (text === undefined) return fallback;
    if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
      problems.push(`${name}: must be a whole number from ${min} to ${max}`);
      return fallback;
    }
    return Number(text);
  };

  const providerEnv = value('CUSTODY_PROVIDER');
  if (providerArg === undefined && providerEnv !== undefined && !isProvider(providerEnv)) {
    problems.push(`CUSTODY_PROVIDER: must be one of ${CUSTODY_PROVIDERS.join(', ')}`);
  }
  const provider: CustodyProviderName =
    providerArg ?? (providerEnv !== undefined && isProvider(providerEnv) ? providerEnv : CUSTODY_PROVIDERS[0]!);

  const logLevel = value('LOG_LEVEL') ?? 'warn';
  if (!LOG_LEVELS.has(logLevel)) problems.push(`LOG_LEVEL: must be one of ${[...LOG_LEVELS].join(', ')}`);

  const options: DemoOptions = {
    keep: flags.has('--keep') || bool('DEMO_KEEP'),
    json: flags.has('--json') || bool('DEMO_JSON'),
    help: flags.has('--help'),
    provider,
    noColor: env.NO_COLOR !== undefined,
    normal: integer('DEMO_TRANSFERS', 5, 1, 1_000) ?? 5,
    paceMs: duration('DEMO_PACE', 1_500, 0, 600_000),
    timeoutMs: duration('DEMO_TIMEOUT', 60_000, 1_000, 3_600_000),
    noContainers: bool('DEMO_NO_CONTAINERS'),
    keepData: bool('DEMO_KEEP_DATA'),
    redisUrl: value('REDIS_URL'),
    sentinel: value('REDIS_SENTINELS')
      ? Object.fromEntries(
          ['REDIS_SENTINELS', 'REDIS_SENTINEL_MASTER', 'REDIS_SENTINEL_PASSWORD', 'REDIS_PASSWORD'].flatMap((name) => {
            const given = value(name);
            return given === undefined ? [] : [[name, given]];
          }),
        )
      : undefined,
    httpHost: value('HTTP_HOST') ?? '127.0.0.1',
    httpPort: integer('HTTP_PORT', undefined, 0, 65_535),
    dashboardUser: value('DASHBOARD_USER'),
    dashboardPassword: value('DASHBOARD_PASSWORD'),
    logLevel,
  };
  if ((options.dashboardUser === undefined) !== (options.dashboardPassword === undefined)) {
    problems.push('DASHBOARD_USER: DASHBOARD_USER and DASHBOARD_PASSWORD go together');
  }
  if (options.redisUrl !== undefined && !(URL.canParse(options.redisUrl) && /^rediss?:$/.test(new URL(options.redisUrl).protocol))) {
    problems.push('REDIS_URL: must be a redis:// or rediss:// URL');
  }
  return problems.length > 0 ? { ok: false, usage: false, problems } : { ok: true, options };
}

function isProvider(text: string): text is CustodyProviderName {
  return (CUSTODY_PROVIDERS as readonly string[]).includes(text);
}
