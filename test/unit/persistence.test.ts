/**
 * The judgement behind the start-up persistence check (src/startup.ts): what a node's `INFO persistence`
 * and `CONFIG GET save` say about a restart, and REDIS_ALLOW_VOLATILE's parsing.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { judgePersistence, parseAofEnabled } from '../../src/startup.ts';

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

  it('any RDB save point is persistent, even with AOF off or unknown', () => {
    expect(judgePersistence({ aofEnabled: false, saveConfig: '3600 1 300 100 60 10000' })).toBe('persistent');
    expect(judgePersistence({ aofEnabled: undefined, saveConfig: '900 1' })).toBe('persistent');
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

describe('REDIS_ALLOW_VOLATILE', () => {
  it('is off by default and when empty, on with 1 (as the other boolean variables are read)', () => {
    expect(loadConfig(valid).redis.allowVolatile).toBe(false);
    expect(loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: '' }).redis.allowVolatile).toBe(false);
    expect(loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: '0' }).redis.allowVolatile).toBe(false);
    expect(loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: '1' }).redis.allowVolatile).toBe(true);
    expect(loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: 'true' }).redis.allowVolatile).toBe(true);
  });

  it('anything else is a configuration error naming the variable', () => {
    expect(() => loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: 'maybe' })).toThrow(ConfigError);
    try {
      loadConfig({ ...valid, REDIS_ALLOW_VOLATILE: 'maybe' });
    } catch (error) {
      expect((error as ConfigError).problems).toEqual(['REDIS_ALLOW_VOLATILE: must be true or false']);
    }
  });
});
