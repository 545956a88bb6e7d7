import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.ts';
import { testRedisUrl } from '../helpers/redis.ts';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger({ level: 'debug' }, stream), text: () => lines.join('') };
}

const SECRET = 'client-secret-do-not-log';
const TOKEN = 'eyJhbGciOi.bearer.token';
const user = { id: 7, displayName: 'Jane Doe', email: 'jane.doe@example.com', phoneNumber: '+15551234567' };

describe('log redaction', () => {
  it('hides authorization headers, the client secret and tokens in a request log line', () => {
    const { logger, text } = capture();
    logger.info(
      {
        req: { method: 'POST', url: '/oauth/token', headers: { authorization: `Bearer ${TOKEN}` } },
        headers: { Authorization: `Basic ${Buffer.from(`id:${SECRET}`).toString('base64')}` },
        body: { client_id: 'id', client_secret: SECRET },
        custody: { clientSecret: SECRET, accessToken: TOKEN },
        access_token: TOKEN,
      },
      'upstream request',
    );
    const out = text();
    expect(out).toContain('upstream request');
    expect(out).toContain('[redacted]');
    expect(out).not.toContain(SECRET);
    expect(out).not.toContain(TOKEN);
    expect(out).not.toContain(Buffer.from(`id:${SECRET}`).toString('base64'));
  });

  it("hides BITGO_ACCESS_TOKEN where the config and an adapter's options hold it", () => {
    const { logger, text } = capture();
    logger.info({ custody: { provider: 'bitgo', bitgo: { baseUrl: 'https://bitgo.example.com', accessToken: TOKEN } } }, 'config');
    logger.info({ bitgo: { accessToken: TOKEN } }, 'options');
    logger.info({ options: { bitgo: { accessToken: TOKEN } } }, 'nested');
    const out = text();
    expect(out).toContain('https://bitgo.example.com');
    expect(out).not.toContain(TOKEN);
  });

  it("hides every value of the chosen provider's settings in the config, whatever the provider names them", () => {
    const { logger, text } = capture();
    logger.info(
      { custody: { provider: 'stub', timeoutMs: 15_000, settings: { stubKey: TOKEN, baseUrl: 'https://stub.example.com' } } },
      'config',
    );
    const out = text();
    expect(out).toContain('15000');
    expect(out).toContain('stubKey');
    expect(out).not.toContain(TOKEN);
  });

  it('hides the person inside a submitted record, as JSON text or parsed', () => {
    const { logger, text } = capture();
    const raw = JSON.stringify({ txHex: '02f8', halfSigned: {}, user, sequenceId: 's-1' });
    logger.info({ record: { id: 1, sequenceId: 's-1', raw } }, 'submitted');
    logger.info({ transfer: { id: 1, raw: { user, sequenceId: 's-1' } } }, 'submitted');
    logger.info({ data: { transfer: { raw } } }, 'event');
    logger.info({ raw: { user } }, 'raw');
    const out = text();
    expect(out.match(/submitted/g)).toHaveLength(2);
    for (const value of [user.email, user.phoneNumber, user.displayName]) expect(out).not.toContain(value);
  });

  it('writes JSON lines with a text level', () => {
    const { logger, text } = capture();
    logger.warn({ sequenceId: 'abc' }, 'fixed phrase');
    const line = JSON.parse(text().trim());
    expect(line).toMatchObject({ level: 'warn', msg: 'fixed phrase', sequenceId: 'abc' });
    expect(typeof line.time).toBe('string');
  });
});

describe('error serialization', () => {
  it("keeps a failed Redis command's name but not its arguments (scripts, payloads)", async () => {
    const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    try {
      const error = await redis.eval('return redis.call("NO_SUCH_COMMAND")', 0, 'payload-argument-7f3a').catch((e: Error) => e);
      expect(error).toBeInstanceOf(Error);
      // ioredis attaches the command with every argument to the error.
      expect(JSON.stringify((error as { command?: unknown }).command)).toContain('payload-argument-7f3a');
      const { logger, text } = capture();
      logger.error({ err: error }, 'redis call failed');
      const line = JSON.parse(text()) as { err: { message: string; command: unknown } };
      expect(line.err.message).toContain('Unknown Redis command');
      expect(line.err.command).toEqual({ name: 'eval' });
      expect(text()).not.toContain('payload-argument-7f3a');
    } finally {
      await redis.quit();
    }
  });
});
