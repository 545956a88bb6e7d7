/**
 * The judgements behind the start-up check of Redis (src/startup.ts): what a node's `INFO persistence`
 * and `CONFIG GET save` say about a restart, what its `maxmemory-policy` says about eviction, and the
 * parsing of REDIS_ALLOW_VOLATILE and REDIS_ALLOW_EVICTION.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { judgeEviction, judgePersistence, parseAofEnabled, parseMaxmemoryPolicy } from '../../src/startup.ts';

const valid = {
  CUSTODY_SDK_URL: 'https://sdk.example.com/v1',
  CUSTODY_BASE_URL: 'https://api.example.com',
  CUSTODY_CLIENT_ID: 'client-1',
  CUSTODY_CLIENT_SECRET: 'secret',
  CUSTODY_ACCESS_TOKEN: 'token',
};

describe('judgePersistence', () => {
  it('AOF on is persistent, whatever CONFIG says or hides', () => {
    expect(judgePersistence({ aofEnabled: true, saveConfig: '' })).toBe('persistent');
    expect(judgePersistence({ aofEnabled: true, saveConfig: undefined })).toBe('persistent');
    expect(judgePersistence({ aofEnabled: true, saveConfig: '3600 1' })).toBe('persistent');
  });

  it('RDB save points without AOF are snapshot-only: a restart loses the writes since the last snapshot', () => {
    expect(judgePersistence({ aofEnabled: false, saveConfig: '3600 1 300 100 60 10000' })).toBe('snapshot-only');
    expect(judgePersistence({ aofEnabled: false, saveConfig: '60 1' })).toBe('snapshot-only');
  });

  it('AOF off and no save point (both known) is volatile', () => {
    expect(judgePersistence({ aofEnabled: false, saveConfig: '' })).toBe('volatile');
    expect(judgePersistence({ aofEnabled: false, saveConfig: '  ' })).toBe('volatile');
  });

  it('what a managed service hides is unknown, never volatile', () => {
    // CONFIG renamed or disabled: AOF off says nothing about RDB snapshots.
    expect(judgePersistence({ aofEnabled: false, saveConfig: undefined })).toBe('unknown');
    // aof_enabled missing from INFO, no RDB saves configured: AOF might still be on.
    expect(judgePersistence({ aofEnabled: undefined, saveConfig: '' })).toBe('unknown');
    expect(judgePersistence({ aofEnabled: undefined, saveConfig: undefined })).toBe('unknown');
    // aof_enabled missing, RDB saves configured: AOF might be on as well, so not snapshot-only for sure.
    expect(judgePersistence({ aofEnabled: undefined, saveConfig: '900 1' })).toBe('unknown');
  });
});

describe('parseAofEnabled', () => {
  it('reads aof_enabled from INFO persistence (CRLF lines), undefined when absent', () => {
    expect(parseAofEnabled('# Persistence\r\nloading:0\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n')).toBe(true);
    expect(parseAofEnabled('# Persistence\r\nloading:0\r\naof_enabled:0\r\n')).toBe(false);
    expect(parseAofEnabled('aof_enabled:0')).toBe(false);
    expect(parseAofEnabled('# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:0\r\n')).toBeUndefined();
    expect(parseAofEnabled('')).toBeUndefined();
  });
});

describe('judgeEviction', () => {
  it('noeviction alone evicts nothing', () => {
    expect(judgeEviction('noeviction')).toBe('noeviction');
  });

  it('every other policy may evict, the volatile-* ones too (tombstones and ended records carry a TTL)', () => {
    for (const policy of [
      'allkeys-lru',
      'allkeys-lfu',
      'allkeys-random',
      'volatile-lru',
      'volatile-lfu',
      'volatile-random',
      'volatile-ttl',
    ]) {
      expect(judgeEviction(policy), policy).toBe('evicting');
    }
  });

  it('a policy a managed service hides is unknown, never evicting', () => {
    expect(judgeEviction(undefined)).toBe('unknown');
    expect(judgeEviction('')).toBe('unknown');
  });
});

describe('parseMaxmemoryPolicy', () => {
  it('reads maxmemory_policy from INFO memory (CRLF lines), undefined when absent', () => {
    expect(parseMaxmemoryPolicy('# Memory\r\nused_memory:1000\r\nmaxmemory_policy:allkeys-lru\r\nallocator_frag_ratio:1.00\r\n')).toBe(
      'allkeys-lru',
    );
    expect(parseMaxmemoryPolicy('# Memory\r\nmaxmemory_policy:noeviction\r\n')).toBe('noeviction');
    expect(parseMaxmemoryPolicy('# Memory\r\nused_memory:1000\r\nmaxmemory:0\r\n')).toBeUndefined();
    expect(parseMaxmemoryPolicy('')).toBeUndefined();
  });
});

describe.each([
  ['REDIS_ALLOW_VOLATILE', 'allowVolatile'],
  ['REDIS_ALLOW_EVICTION', 'allowEviction'],
] as const)('%s', (variable, key) => {
  it('is off by default and when empty, on with 1 (as the other boolean variables are read)', () => {
    expect(loadConfig(valid).redis[key]).toBe(false);
    expect(loadConfig({ ...valid, [variable]: '' }).redis[key]).toBe(false);
    expect(loadConfig({ ...valid, [variable]: '0' }).redis[key]).toBe(false);
    expect(loadConfig({ ...valid, [variable]: '1' }).redis[key]).toBe(true);
    expect(loadConfig({ ...valid, [variable]: 'true' }).redis[key]).toBe(true);
  });

  it('anything else is a configuration error naming the variable', () => {
    expect(() => loadConfig({ ...valid, [variable]: 'maybe' })).toThrow(ConfigError);
    try {
      loadConfig({ ...valid, [variable]: 'maybe' });
    } catch (error) {
      expect((error as ConfigError).problems).toEqual([`${variable}: must be true or false`]);
    }
  });
});
