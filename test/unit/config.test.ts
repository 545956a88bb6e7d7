import { beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, EX_CONFIG, loadConfig, loadConfigOrExit, loadLedgerConfig, loadQueueConfig } from '../../src/config/config.ts';
import { parseDuration } from '../../src/config/duration.ts';
import { DEFAULT_MAX_PAUSE_MS } from '../../src/timing.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';

const SECRET = 'sup3r-s3cret-value';
const TOKEN = 'fixed-bearer-token-value';

const valid = {
  CUSTODY_SDK_URL: 'https://sdk.example.com/v1',
  CUSTODY_BASE_URL: 'https://api.example.com',
  CUSTODY_CLIENT_ID: 'client-1',
  CUSTODY_CLIENT_SECRET: SECRET,
  CUSTODY_ACCESS_TOKEN: TOKEN,
};

function problems(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a configuration error');
}

describe('configuration', () => {
  it('applies the contract defaults', () => {
    const config = loadConfig(valid);
    expect(config.redis.url).toBe('redis://127.0.0.1:6379');
    expect(config.queue.prefix).toBe('bull');
    expect(config.queue.eventsStream).toBe('bull:transfer-events');
    expect(config.http).toMatchObject({ host: '127.0.0.1', port: 3000 });
    expect(config.submit).toMatchObject({ concurrency: 16, attempts: 8, travelRuleCacheTtlMs: 30_000 });
    expect(config.track).toMatchObject({ concurrency: 64, pollMinMs: 2_000, pollMaxMs: 60_000, deadlineMs: 86_400_000 });
    expect(config.custody).toMatchObject({ timeoutMs: 15_000, maxRps: 0, maxPauseMs: 600_000 });
    // One default: clients built without the config (the transport's fallback) pause as long.
    expect(config.custody.maxPauseMs).toBe(DEFAULT_MAX_PAUSE_MS);
    expect(config.reconcile.everyMs).toBe(300_000);
    expect(config.retention.transfersMs).toBe(30 * 86_400_000);
    expect(config.log.level).toBe('info');
    expect(Object.isFrozen(config.custody)).toBe(true);
  });

  it('derives the events stream from the queue prefix unless set', () => {
    expect(loadConfig({ ...valid, QUEUE_PREFIX: '{wtx}' }).queue.eventsStream).toBe('{wtx}:transfer-events');
    expect(loadConfig({ ...valid, EVENTS_STREAM: 'events' }).queue.eventsStream).toBe('events');
  });

  it('names every missing required variable, one line each', () => {
    const lines = problems({});
    for (const name of ['CUSTODY_SDK_URL', 'CUSTODY_BASE_URL', 'CUSTODY_CLIENT_ID', 'CUSTODY_CLIENT_SECRET', 'CUSTODY_TOKEN_URL']) {
      expect(lines.filter((line) => line.startsWith(`${name}:`))).toHaveLength(1);
    }
    expect(lines).toHaveLength(5);
  });

  it('treats an empty value as missing', () => {
    expect(problems({ ...valid, CUSTODY_CLIENT_SECRET: '' })).toEqual(['CUSTODY_CLIENT_SECRET: required']);
  });

  it('requires a token URL or a fixed token', () => {
    const { CUSTODY_ACCESS_TOKEN: _, ...rest } = valid;
    expect(problems(rest)).toEqual(['CUSTODY_TOKEN_URL: one of CUSTODY_TOKEN_URL or CUSTODY_ACCESS_TOKEN is required']);
    expect(loadConfig({ ...rest, CUSTODY_TOKEN_URL: 'http://127.0.0.1:4000/oauth/token' }).custody.settings).toMatchObject({
      tokenUrl: 'http://127.0.0.1:4000/oauth/token',
    });
  });

  it.each([
    ['CUSTODY_SDK_URL', 'not a url'],
    ['CUSTODY_BASE_URL', 'ftp://example.com'],
    ['CUSTODY_TOKEN_URL', 'example.com/token'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['REDIS_CLUSTER_NODES', '127.0.0.1'],
  ])('refuses a malformed URL in %s', (name, value) => {
    const lines = problems({ ...valid, QUEUE_PREFIX: '{wtx}', [name]: value });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^${name}: must be`));
    expect(lines[0]).not.toContain(value);
  });

  it.each([
    ['SUBMIT_CONCURRENCY', 'ten'],
    ['SUBMIT_CONCURRENCY', '0'],
    ['TRACK_CONCURRENCY', '-1'],
    ['HTTP_PORT', '70000'],
    ['SUBMIT_ATTEMPTS', '1.5'],
    ['CUSTODY_MAX_RPS', 'lots'],
    ['CUSTODY_TIMEOUT', '15 parsecs'],
    ['CUSTODY_MAX_PAUSE', '10 minutes'],
    ['CUSTODY_MAX_PAUSE', '500ms'],
    ['TRACK_DEADLINE', '1.5'],
    ['RETENTION', 'forever'],
    ['LOG_LEVEL', 'loud'],
  ])('refuses a malformed number or duration in %s=%s', (name, value) => {
    const lines = problems({ ...valid, [name]: value });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.startsWith(`${name}: `)).toBe(true);
  });

  it('keeps the audit stream AUDIT_RETENTION, 365 days unless set, at least a second', () => {
    expect(loadConfig(valid).audit.retentionMs).toBe(365 * 86_400_000);
    expect(loadConfig({ ...valid, AUDIT_RETENTION: '90d' }).audit.retentionMs).toBe(90 * 86_400_000);
    expect(loadLedgerConfig({ AUDIT_RETENTION: '2h' }).audit.retentionMs).toBe(7_200_000);
    expect(problems({ ...valid, AUDIT_RETENTION: '500ms' })).toEqual(['AUDIT_RETENTION: must be at least 1000 ms']);
    expect(problems({ ...valid, AUDIT_RETENTION: 'a year' })).toHaveLength(1);
  });

  it('reads durations with units', () => {
    const config = loadConfig({
      ...valid,
      CUSTODY_TIMEOUT: '1500',
      CUSTODY_MAX_PAUSE: '2s',
      TRACK_POLL_MIN: '250ms',
      TRACK_DEADLINE: '2h',
      RETENTION: '7d',
    });
    expect(config.custody.timeoutMs).toBe(1500);
    expect(config.custody.maxPauseMs).toBe(2_000);
    expect(config.track.pollMinMs).toBe(250);
    expect(config.track.deadlineMs).toBe(7_200_000);
    expect(config.retention.transfersMs).toBe(7 * 86_400_000);
  });

  it('refuses Redis Cluster without a hash tag in the prefix', () => {
    const env = { ...valid, REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001' };
    const noTag =
      'QUEUE_PREFIX: must carry a Redis hash tag such as {wtx} (a non-empty text between its first "{" and the next "}") when REDIS_CLUSTER_NODES is set';
    expect(problems(env)).toEqual([noTag]);
    // Redis's rule, not a pattern: the first "{" counts, and "{}" is no tag.
    expect(problems({ ...env, QUEUE_PREFIX: '{}{wtx}' })).toEqual([noTag]);
    expect(problems({ ...env, QUEUE_PREFIX: 'wtx}{' })).toEqual([noTag]);
    const otherSlot =
      'EVENTS_STREAM: must hash to the same Redis Cluster slot as QUEUE_PREFIX (carry the same hash tag first) when REDIS_CLUSTER_NODES is set';
    expect(problems({ ...env, QUEUE_PREFIX: '{wtx}', EVENTS_STREAM: '{a}{wtx}:events' })).toEqual([otherSlot]);
    expect(problems({ ...env, QUEUE_PREFIX: '{wtx}', EVENTS_STREAM: 'events' })).toEqual([otherSlot]);
    expect(() => loadConfig({ ...env, QUEUE_PREFIX: '{wtx}', EVENTS_STREAM: 'transfer-events:{wtx}' })).not.toThrow();
    expect(() => loadConfig({ ...env, QUEUE_PREFIX: 'x{wtx}' })).not.toThrow();
    expect(() => loadConfig({ ...env, QUEUE_PREFIX: '{wtx}:{other}' })).not.toThrow();
    expect(() => loadQueueConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', QUEUE_PREFIX: '{}{wtx}' })).toThrow(/hash tag/);
    expect(() => loadQueueConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', QUEUE_PREFIX: '{wtx}', EVENTS_STREAM: '{a}{wtx}:e' })).toThrow(
      /EVENTS_STREAM/,
    );
    expect(loadConfig({ ...env, QUEUE_PREFIX: '{wtx}' }).redis.clusterNodes).toEqual([
      { host: '127.0.0.1', port: 7000 },
      { host: '127.0.0.1', port: 7001 },
    ]);
  });

  it('reaches Redis through Sentinel, and reads the replica acknowledgement settings', () => {
    const config = loadConfig({
      ...valid,
      REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2:26379',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
      REDIS_PASSWORD: 'data-secret',
      REDIS_MIN_REPLICAS: '1',
      REDIS_REPLICA_TIMEOUT: '250ms',
    });
    expect(config.redis.sentinel).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
      ],
      master: 'mymaster',
      sentinelPassword: 'sentinel-secret',
      password: 'data-secret',
    });
    expect(config.redis).toMatchObject({ minReplicas: 1, replicaTimeoutMs: 250 });
    expect(loadConfig(valid).redis).toMatchObject({ sentinel: undefined, minReplicas: 0, replicaTimeoutMs: 1_000 });
    expect(problems({ ...valid, REDIS_SENTINELS: 'nope' })).toEqual(['REDIS_SENTINELS: must be a comma-separated list of host:port']);
    expect(problems({ ...valid, REDIS_MIN_REPLICAS: '-1' })[0]).toMatch(/^REDIS_MIN_REPLICAS: /);
    expect(problems({ ...valid, REDIS_SENTINELS: '10.0.0.1:26379', REDIS_CLUSTER_NODES: '127.0.0.1:7000', QUEUE_PREFIX: '{wtx}' })).toEqual(
      ['REDIS_SENTINELS: cannot be combined with REDIS_CLUSTER_NODES (a Cluster fails over on its own)'],
    );
    const secretLines = problems({
      ...valid,
      REDIS_SENTINELS: 'x',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
      REDIS_PASSWORD: 'data-secret',
    }).join('\n');
    expect(secretLines).not.toMatch(/sentinel-secret|data-secret/);
  });

  it('requires dashboard credentials off loopback', () => {
    const lines = problems({ ...valid, HTTP_HOST: '0.0.0.0' });
    expect(lines).toEqual([
      'DASHBOARD_USER: required when HTTP_HOST is not a loopback address',
      'DASHBOARD_PASSWORD: required when HTTP_HOST is not a loopback address',
    ]);
    expect(() => loadConfig({ ...valid, HTTP_HOST: '::1' })).not.toThrow();
    expect(() => loadConfig({ ...valid, HTTP_HOST: '0.0.0.0', DASHBOARD_USER: 'ops', DASHBOARD_PASSWORD: 'pw' })).not.toThrow();
  });

  it('reads DASHBOARD_METADATA_KEYS as a list of names, none by default', () => {
    expect(loadConfig(valid).http.dashboardMetadataKeys).toEqual([]);
    expect(loadConfig({ ...valid, DASHBOARD_METADATA_KEYS: '' }).http.dashboardMetadataKeys).toEqual([]);
    expect(loadConfig({ ...valid, DASHBOARD_METADATA_KEYS: 'orderId' }).http.dashboardMetadataKeys).toEqual(['orderId']);
    expect(loadConfig({ ...valid, DASHBOARD_METADATA_KEYS: ' orderId , channel,orderId' }).http.dashboardMetadataKeys).toEqual([
      'orderId',
      'channel',
    ]);
    for (const value of [' ', ',', 'orderId,', 'orderId, ,channel']) {
      expect(problems({ ...valid, DASHBOARD_METADATA_KEYS: value }), JSON.stringify(value)).toEqual([
        'DASHBOARD_METADATA_KEYS: must be a comma-separated list of names, none of them empty',
      ]);
    }
  });

  describe('CUSTODY_PROVIDER', () => {
    const BITGO_TOKEN = 'v2x-bitgo-access-token-value';
    const bitgo = { CUSTODY_PROVIDER: 'bitgo', BITGO_BASE_URL: 'https://app.bitgo-test.com', BITGO_ACCESS_TOKEN: BITGO_TOKEN };

    it('defaults to wallet-service, with its variables required as before', () => {
      const config = loadConfig(valid);
      expect(config.custody).toMatchObject({
        provider: 'wallet-service',
        settings: {
          sdkUrl: 'https://sdk.example.com/v1',
          baseUrl: 'https://api.example.com',
          clientId: 'client-1',
          clientSecret: SECRET,
          accessToken: TOKEN,
        },
      });
      expect(loadConfig({ ...valid, CUSTODY_PROVIDER: 'wallet-service' }).custody).toEqual(config.custody);
      expect(loadConfig({ ...valid, CUSTODY_PROVIDER: '' }).custody.provider).toBe('wallet-service');
      // The BitGo variables are not read for wallet-service, not even when malformed.
      expect(loadConfig({ ...valid, BITGO_BASE_URL: 'not a url', BITGO_ACCESS_TOKEN: 'x' }).custody).toEqual(config.custody);
      const lines = problems({ CUSTODY_PROVIDER: 'wallet-service' });
      expect(lines.map((line) => line.slice(0, line.indexOf(':')))).toEqual([
        'CUSTODY_SDK_URL',
        'CUSTODY_BASE_URL',
        'CUSTODY_CLIENT_ID',
        'CUSTODY_CLIENT_SECRET',
        'CUSTODY_TOKEN_URL',
      ]);
    });

    it('with bitgo, needs BITGO_BASE_URL and BITGO_ACCESS_TOKEN and none of the wallet-service variables', () => {
      const config = loadConfig({ ...bitgo, CUSTODY_TIMEOUT: '2s', CUSTODY_MAX_RPS: '20', CUSTODY_CONNECTIONS: '8' });
      expect(config.custody).toMatchObject({
        provider: 'bitgo',
        settings: { baseUrl: 'https://app.bitgo-test.com', accessToken: BITGO_TOKEN },
        // The shared tuning applies to either provider.
        timeoutMs: 2_000,
        connectTimeoutMs: 5_000,
        maxRps: 20,
        maxPauseMs: 600_000,
        connections: 8,
      });
      // Only the chosen provider's settings: none of wallet-service's.
      expect(Object.keys(config.custody.settings).sort()).toEqual(['accessToken', 'baseUrl']);
      expect(Object.isFrozen(config.custody.settings)).toBe(true);
      // The wallet-service variables are ignored, even malformed; a trailing slash of the origin is dropped.
      const ignoring = loadConfig({ ...valid, ...bitgo, CUSTODY_SDK_URL: 'not a url', BITGO_BASE_URL: 'http://127.0.0.1:4100/' });
      expect(ignoring.custody).toMatchObject({
        provider: 'bitgo',
        settings: { baseUrl: 'http://127.0.0.1:4100', accessToken: BITGO_TOKEN },
      });
      expect(Object.keys(ignoring.custody.settings).sort()).toEqual(['accessToken', 'baseUrl']);
    });

    it('with bitgo, names each missing or malformed BitGo variable', () => {
      const { BITGO_ACCESS_TOKEN: _, ...noToken } = bitgo;
      expect(problems(noToken)).toEqual(['BITGO_ACCESS_TOKEN: required']);
      expect(problems({ ...bitgo, BITGO_ACCESS_TOKEN: '' })).toEqual(['BITGO_ACCESS_TOKEN: required']);
      expect(problems({ CUSTODY_PROVIDER: 'bitgo' })).toEqual(['BITGO_BASE_URL: required', 'BITGO_ACCESS_TOKEN: required']);
      for (const url of ['app.bitgo.com', 'ftp://app.bitgo.com', 'https://app.bitgo.com/?x=1']) {
        const lines = problems({ ...bitgo, BITGO_BASE_URL: url });
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^BITGO_BASE_URL: must /);
      }
      const secretLines = problems({ ...bitgo, BITGO_BASE_URL: BITGO_TOKEN }).join('\n');
      expect(secretLines).not.toContain(BITGO_TOKEN);
    });

    it('refuses any other provider, naming CUSTODY_PROVIDER', () => {
      for (const value of ['other', 'BitGo', 'wallet_service', ' bitgo']) {
        expect(problems({ ...valid, CUSTODY_PROVIDER: value })).toEqual(['CUSTODY_PROVIDER: must be one of wallet-service, bitgo']);
      }
      // Alone, not buried under the problems of either provider's variables.
      expect(problems({ CUSTODY_PROVIDER: 'other' })).toEqual(['CUSTODY_PROVIDER: must be one of wallet-service, bitgo']);
    });
  });

  it('refuses a TOMBSTONE_RETENTION under 365 days, naming the variable and what a shorter one lets happen', () => {
    for (const value of ['30d', '364d', '8759h', '1000']) {
      const lines = problems({ ...valid, TOMBSTONE_RETENTION: value });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^TOMBSTONE_RETENTION: must be at least 365d: /);
      expect(lines[0]).toContain('RETENTION + TOMBSTONE_RETENTION');
      expect(lines[0]).toContain('sent again');
    }
    expect(loadConfig({ ...valid, TOMBSTONE_RETENTION: '365d' }).retention.tombstonesMs).toBe(365 * 86_400_000);
    expect(loadConfig(valid).retention.tombstonesMs).toBe(3650 * 86_400_000);
  });

  it('the CLI refuses it too (a cancel writes the tombstone), and the worker exits 78 on it', () => {
    expect(() => loadLedgerConfig({ TOMBSTONE_RETENTION: '90d' })).toThrow(/TOMBSTONE_RETENTION: must be at least 365d/);
    const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${String(code)}`);
    });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(() => loadConfigOrExit({ ...valid, TOMBSTONE_RETENTION: '90d' })).toThrow(`exit ${EX_CONFIG}`);
      expect(String(stderr.mock.calls[0]?.[0])).toMatch(/TOMBSTONE_RETENTION: must be at least 365d/);
    } finally {
      exit.mockRestore();
      stderr.mockRestore();
    }
  });

  it('never prints a secret value, whatever is wrong', () => {
    const lines = problems({
      ...valid,
      CUSTODY_SDK_URL: SECRET,
      CUSTODY_TOKEN_URL: `${TOKEN}-url`,
      REDIS_URL: `redis://user:${SECRET}@`,
      DASHBOARD_PASSWORD: SECRET,
      HTTP_HOST: '10.0.0.1',
      LOG_LEVEL: SECRET,
    });
    expect(lines.length).toBeGreaterThanOrEqual(4);
    const text = lines.join('\n');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(TOKEN);
  });
});

describe('console access settings', () => {
  let hash: string;
  beforeAll(async () => {
    hash = await hashSecret('a-console-password');
  });

  it('reads CONSOLE_USERS as name, role and hash, none by default, and the proxy settings when complete', () => {
    expect(loadConfig(valid).http.console).toEqual({ users: [], proxy: undefined, approvalWaitMs: 3_600_000 });
    expect(loadConfig({ ...valid, CONSOLE_APPROVAL_WAIT: '15m' }).http.console.approvalWaitMs).toBe(900_000);
    const config = loadConfig({
      ...valid,
      CONSOLE_USERS: ` vera:viewer:${hash} ,otto:operator:${hash}`,
      CONSOLE_PROXY_USER_HEADER: 'X-Auth-User',
      CONSOLE_PROXY_ROLE_HEADER: 'X-Auth-Role',
      CONSOLE_TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1,fd00::/8,::1',
    });
    expect(config.http.console).toEqual({
      users: [
        { name: 'vera', role: 'viewer', hash },
        { name: 'otto', role: 'operator', hash },
      ],
      proxy: {
        userHeader: 'x-auth-user',
        roleHeader: 'x-auth-role',
        trusted: [
          { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
          { address: '127.0.0.1', prefix: 32, family: 'ipv4' },
          { address: 'fd00::', prefix: 8, family: 'ipv6' },
          { address: '::1', prefix: 128, family: 'ipv6' },
        ],
      },
      approvalWaitMs: 3_600_000,
    });
  });

  it.each([
    ['vera', 'CONSOLE_USERS: entry 1 must be name:role:hash'],
    ['vera:viewer', 'CONSOLE_USERS: entry 1 must be name:role:hash'],
    ['vera:admin:HASH', 'CONSOLE_USERS: entry 1: the role must be viewer or operator'],
    ['ve ra:viewer:HASH', 'CONSOLE_USERS: entry 1: the name must be 1-64 of letters, digits and ._@+-'],
    [
      'vera:viewer:HASH,otto:operator:not-a-hash',
      'CONSOLE_USERS: entry 2: the hash must be scrypt$N$r$p$salt$hash as `hash-secret` prints it',
    ],
    [
      'vera:viewer:scrypt$3$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA',
      'CONSOLE_USERS: entry 1: the hash must be scrypt$N$r$p$salt$hash as `hash-secret` prints it',
    ],
    ['vera:viewer:HASH,vera:operator:HASH', 'CONSOLE_USERS: entry 2: the name of an earlier entry (names must be unique)'],
    ['vera:viewer:HASH,', 'CONSOLE_USERS: entry 2 must be name:role:hash'],
  ])('refuses CONSOLE_USERS %j, naming the entry and never quoting it', (value, line) => {
    const lines = problems({ ...valid, CONSOLE_USERS: value.replaceAll('HASH', hash) });
    expect(lines).toEqual([line]);
    expect(lines.join('\n')).not.toContain(hash);
  });

  it('refuses a console user named like the dashboard user, who is a viewer of its own', () => {
    expect(problems({ ...valid, CONSOLE_USERS: `ops:operator:${hash}`, DASHBOARD_USER: 'ops', DASHBOARD_PASSWORD: 'pw' })).toEqual([
      'CONSOLE_USERS: a name equals DASHBOARD_USER (the dashboard user is a viewer of its own); use another name',
    ]);
  });

  it('requires both proxy headers and CONSOLE_TRUSTED_PROXIES together', () => {
    expect(problems({ ...valid, CONSOLE_PROXY_USER_HEADER: 'X-Auth-User' })).toEqual([
      'CONSOLE_PROXY_ROLE_HEADER: required with CONSOLE_PROXY_USER_HEADER',
      'CONSOLE_TRUSTED_PROXIES: required with CONSOLE_PROXY_USER_HEADER',
    ]);
    expect(problems({ ...valid, CONSOLE_PROXY_USER_HEADER: 'X-Auth-User', CONSOLE_PROXY_ROLE_HEADER: 'X-Auth-Role' })).toEqual([
      'CONSOLE_TRUSTED_PROXIES: required with CONSOLE_PROXY_USER_HEADER and CONSOLE_PROXY_ROLE_HEADER',
    ]);
  });

  it.each([
    [
      'CONSOLE_TRUSTED_PROXIES',
      '10.0.0.0/33',
      'CONSOLE_TRUSTED_PROXIES: entry 1 must be an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8)',
    ],
    [
      'CONSOLE_TRUSTED_PROXIES',
      '127.0.0.1,proxy.local',
      'CONSOLE_TRUSTED_PROXIES: entry 2 must be an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8)',
    ],
    [
      'CONSOLE_TRUSTED_PROXIES',
      'fd00::/129',
      'CONSOLE_TRUSTED_PROXIES: entry 1 must be an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8)',
    ],
    [
      'CONSOLE_TRUSTED_PROXIES',
      '10.0.0.1/8/1',
      'CONSOLE_TRUSTED_PROXIES: entry 1 must be an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8)',
    ],
    ['CONSOLE_PROXY_USER_HEADER', 'X Auth', 'CONSOLE_PROXY_USER_HEADER: must be an HTTP header name'],
    ['CONSOLE_PROXY_ROLE_HEADER', 'Authorization', 'CONSOLE_PROXY_ROLE_HEADER: must not be Authorization (Basic auth reads it)'],
  ])('refuses %s=%j', (name, value, line) => {
    const proxy = {
      CONSOLE_PROXY_USER_HEADER: 'X-Auth-User',
      CONSOLE_PROXY_ROLE_HEADER: 'X-Auth-Role',
      CONSOLE_TRUSTED_PROXIES: '127.0.0.1',
    };
    expect(problems({ ...valid, ...proxy, [name]: value })).toEqual([line]);
  });

  it('exits 78 naming CONSOLE_USERS, and never prints a hash or a secret pasted in its place', () => {
    const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${String(code)}`);
    });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(() => loadConfigOrExit({ ...valid, CONSOLE_USERS: `vera:admin:${hash},${SECRET}` })).toThrow(`exit ${EX_CONFIG}`);
      const printed = stderr.mock.calls.map(([text]) => String(text)).join('');
      expect(printed).toMatch(/CONSOLE_USERS: entry 1: the role/);
      expect(printed).toMatch(/CONSOLE_USERS: entry 2 must be name:role:hash/);
      expect(printed).not.toContain(hash);
      expect(printed).not.toContain(SECRET);
    } finally {
      exit.mockRestore();
      stderr.mockRestore();
    }
  });
});

describe('SUBMIT_API_KEYS', () => {
  let hash: string;
  beforeAll(async () => {
    hash = await hashSecret('a-submit-api-key');
  });

  it('reads name:hash entries, none by default (the submit route off)', () => {
    expect(loadConfig(valid).submit.apiKeys).toEqual([]);
    expect(loadConfig({ ...valid, SUBMIT_API_KEYS: ` billing:${hash} ,ops:${hash}` }).submit.apiKeys).toEqual([
      { name: 'billing', hash },
      { name: 'ops', hash },
    ]);
  });

  it.each([
    ['billing', 'SUBMIT_API_KEYS: entry 1 must be name:hash'],
    ['billing:viewer:HASH', 'SUBMIT_API_KEYS: entry 1 must be name:hash'],
    ['bil ling:HASH', 'SUBMIT_API_KEYS: entry 1: the name must be 1-64 of letters, digits and ._@+-'],
    ['billing:HASH,ops:not-a-hash', 'SUBMIT_API_KEYS: entry 2: the hash must be scrypt$N$r$p$salt$hash as `hash-secret` prints it'],
    ['billing:HASH,billing:HASH', 'SUBMIT_API_KEYS: entry 2: the name of an earlier entry (names must be unique)'],
  ])('refuses SUBMIT_API_KEYS %j, naming the entry and never quoting it', (value, line) => {
    const lines = problems({ ...valid, SUBMIT_API_KEYS: value.replaceAll('HASH', hash) });
    expect(lines).toEqual([line]);
    expect(lines.join('\n')).not.toContain(hash);
  });

  it('exits 78 naming SUBMIT_API_KEYS, and never prints a hash or a key pasted in its place', () => {
    const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${String(code)}`);
    });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(() => loadConfigOrExit({ ...valid, SUBMIT_API_KEYS: `billing:${hash},ops:${SECRET}` })).toThrow(`exit ${EX_CONFIG}`);
      const printed = stderr.mock.calls.map(([text]) => String(text)).join('');
      expect(printed).toMatch(/SUBMIT_API_KEYS: entry 2: the hash/);
      expect(printed).not.toContain(hash);
      expect(printed).not.toContain(SECRET);
    } finally {
      exit.mockRestore();
      stderr.mockRestore();
    }
  });
});

describe('durations', () => {
  it.each([
    ['1500', 1500],
    ['0', 0],
    ['30s', 30_000],
    ['1.5s', 1500],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['30d', 2_592_000_000],
    ['250ms', 250],
  ])('%s is %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 's', '1.5', '-1s', '10y', '1e3', 'abc'])('%j is not a duration', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});
