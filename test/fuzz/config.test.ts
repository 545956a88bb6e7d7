/**
 * Random environments through loadConfig: it returns a config or throws ConfigError, nothing else, and
 * no problem line or message ever carries the client secret or the access token, even when one was
 * pasted into another variable.
 */
import fc from 'fast-check';
import './fc-seed.ts';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, ConfigError, loadConfig, loadQueueConfig } from '../../src/config/config.ts';

const RUNS = 2_000;

const SECRET_VARIABLES = ['CUSTODY_CLIENT_SECRET', 'CUSTODY_ACCESS_TOKEN', 'BITGO_ACCESS_TOKEN'] as const;

/** Secrets with a marker in front, so a leak cannot be a coincidence with the text of a message. */
const secretArb = fc
  .tuple(fc.constantFrom('sk-', 'tok_', 'Secret/'), fc.string({ unit: 'binary', minLength: 6, maxLength: 40 }))
  .map(([marker, tail]) => `${marker}${tail}`);

/** Values that are almost right for some variable, and plain noise. */
const valueArb = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '0',
    '1',
    '-1',
    '1.5',
    '1e3',
    '65536',
    '99999999999999999999',
    '1500',
    '30s',
    '5m',
    '24h',
    '30d',
    '-1s',
    '1.5h',
    '10 s',
    'true',
    'false',
    'yes',
    'TRUE',
    'info',
    'debug',
    'verbose',
    'http://127.0.0.1:4000',
    'https://api.example.com/v1',
    'https://api.example.com/v1?x=1',
    'ftp://example.com',
    'redis://127.0.0.1:6379',
    'rediss://user:pw@redis.example.com:6380',
    'redis://',
    '127.0.0.1:7000,127.0.0.1:7001',
    '[::1]:7000',
    'host:99999',
    '{wtx}',
    '{wtx}:events',
    'wtx',
    '{}',
    '0.0.0.0',
    '::1',
    'localhost',
    'bitgo',
    'wallet-service',
  ),
  fc.integer().map(String),
  fc.double().map(String),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.webUrl().map(String),
);

const envArb = fc
  .record({
    secret: secretArb,
    token: secretArb,
    tokenMode: fc.constantFrom('token-url', 'access-token', 'both', 'neither'),
    // CUSTODY_PROVIDER=bitgo with its token (the same secret text as CUSTODY_ACCESS_TOKEN's), or unset.
    bitgo: fc.boolean(),
    // On a cluster the rules across variables (hash tags of QUEUE_PREFIX and EVENTS_STREAM) apply too.
    cluster: fc.boolean(),
    overrides: fc.dictionary(fc.constantFrom(...CONFIG_VARIABLES), valueArb, { maxKeys: 6 }),
    // A secret pasted into other variables: whole, or inside a URL where a parser might quote it.
    pasted: fc.array(
      fc.record({
        variable: fc.constantFrom(...CONFIG_VARIABLES.filter((name) => !(SECRET_VARIABLES as readonly string[]).includes(name))),
        which: fc.constantFrom('secret' as const, 'token' as const),
        shape: fc.constantFrom('as-is', 'url-query', 'url-userinfo', 'redis-password', 'host-port', 'hash-tag'),
      }),
      { maxLength: 3 },
    ),
    extra: fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'toString', 'PATH', 'UNRELATED'), fc.string({ maxLength: 10 }), {
      maxKeys: 2,
    }),
  })
  .map(({ secret, token, tokenMode, bitgo, cluster, overrides, pasted, extra }) => {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(extra))
      Object.defineProperty(env, key, { value, enumerable: true, writable: true, configurable: true });
    Object.assign(env, {
      CUSTODY_SDK_URL: 'https://sdk.example.com',
      CUSTODY_BASE_URL: 'https://api.example.com',
      CUSTODY_CLIENT_ID: 'client-1',
      CUSTODY_CLIENT_SECRET: secret,
    });
    if (tokenMode === 'token-url' || tokenMode === 'both') env.CUSTODY_TOKEN_URL = 'https://auth.example.com/oauth/token';
    if (tokenMode === 'access-token' || tokenMode === 'both') env.CUSTODY_ACCESS_TOKEN = token;
    if (bitgo) Object.assign(env, { CUSTODY_PROVIDER: 'bitgo', BITGO_BASE_URL: 'https://app.bitgo-test.com', BITGO_ACCESS_TOKEN: token });
    if (cluster)
      Object.assign(env, { REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001', QUEUE_PREFIX: '{wtx}', EVENTS_STREAM: '{wtx}:events' });
    for (const [key, value] of Object.entries(overrides)) if (!(SECRET_VARIABLES as readonly string[]).includes(key)) env[key] = value;
    for (const { variable, which, shape } of pasted) {
      const value = which === 'secret' ? secret : token;
      env[variable] = {
        'as-is': value,
        'url-query': `https://api.example.com/?key=${value}`,
        'url-userinfo': `https://user:${value}@api.example.com`,
        'redis-password': `redis://:${value}@127.0.0.1:6379`,
        'host-port': `${value}:6379`,
        'hash-tag': `{${value}}`,
      }[shape];
    }
    return {
      env,
      secrets: [secret, ...(env.CUSTODY_ACCESS_TOKEN === token || env.BITGO_ACCESS_TOKEN === token ? [token] : [])],
      pastedToken: pasted.some((p) => p.which === 'token') ? token : undefined,
    };
  });

function outcome(load: () => unknown): { ok: true; value: unknown } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: load() };
  } catch (error) {
    return { ok: false, error };
  }
}

describe('loadConfig on random environments', () => {
  it(`returns a config or throws ConfigError naming variables, never a secret (${RUNS} runs)`, () => {
    const tally = { ok: 0, error: 0 };
    const names = new Set([...CONFIG_VARIABLES, 'environment']);
    fc.assert(
      fc.property(envArb, ({ env, secrets, pastedToken }) => {
        const leaks = [...secrets, ...(pastedToken ? [pastedToken] : [])];
        for (const load of [() => loadConfig(env), () => loadQueueConfig(env)]) {
          const result = outcome(load);
          if (result.ok) {
            tally.ok++;
            expect(Object.isFrozen(result.value)).toBe(true);
            continue;
          }
          tally.error++;
          expect(result.error, String(result.error)).toBeInstanceOf(ConfigError);
          const error = result.error as ConfigError;
          expect(error.problems.length).toBeGreaterThan(0);
          for (const problem of error.problems) {
            // One line per problem, and it starts by naming the variable.
            expect(problem).not.toContain('\n');
            expect(names.has(problem.slice(0, problem.indexOf(':'))), problem).toBe(true);
          }
          for (const leak of leaks) {
            expect(error.message).not.toContain(leak);
            for (const problem of error.problems) expect(problem).not.toContain(leak);
            expect(JSON.stringify(error)).not.toContain(JSON.stringify(leak).slice(1, -1));
          }
        }
      }),
      { numRuns: RUNS },
    );
    expect(tally.ok).toBeGreaterThan(0);
    expect(tally.error).toBeGreaterThan(0);
  });

  it('does not quote a secret pasted as the hash tag of QUEUE_PREFIX in the EVENTS_STREAM problem', () => {
    const secret = 'sk-pasted-into-the-prefix';
    const env = {
      CUSTODY_SDK_URL: 'https://sdk.example.com',
      CUSTODY_BASE_URL: 'https://api.example.com',
      CUSTODY_CLIENT_ID: 'client-1',
      CUSTODY_CLIENT_SECRET: secret,
      CUSTODY_ACCESS_TOKEN: 'tok_fixed-token',
      REDIS_CLUSTER_NODES: '127.0.0.1:7000',
      QUEUE_PREFIX: `{${secret}}`,
      EVENTS_STREAM: 'events',
    };
    const result = outcome(() => loadConfig(env));
    expect(result.ok).toBe(false);
    const error = (result as { error: ConfigError }).error;
    expect(error).toBeInstanceOf(ConfigError);
    expect(
      error.problems.some((problem) => problem.startsWith('EVENTS_STREAM: must hash to the same Redis Cluster slot as QUEUE_PREFIX')),
    ).toBe(true);
    expect(error.message).not.toContain(secret);
  });
});
