/**
 * `custody-worker hash-secret` as a child process fed by a pipe: what it prints verifies against the
 * secret (and nothing else), is taken by CONSOLE_USERS, is new each run, and never contains the secret.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { parseSecretHash, verifySecret } from '../../src/lib/secret-hash.ts';
import { killAllClis, runCli } from '../helpers/cli-process.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

afterAll(killAllClis);

const SECRET = 'correct horse battery staple';

describe('hash-secret', { timeout: processesTimeout(4) }, () => {
  it('prints a scrypt hash that verifies the secret read from a pipe, and a new one each run', async () => {
    const [text, json] = await Promise.all([
      runCli(['hash-secret'], { env: {}, input: `${SECRET}\n` }),
      runCli(['hash-secret', '--json'], { env: {}, input: SECRET }),
    ]);
    expect([text.code, text.stderr, json.code, json.stderr]).toEqual([0, '', 0, '']);
    const printed = [text.stdout.trim(), (JSON.parse(json.stdout) as { hash: string }).hash];
    expect(printed[0]).not.toBe(printed[1]);
    for (const hash of printed) {
      expect(hash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      expect(hash).not.toContain(SECRET);
      const parsed = parseSecretHash(hash)!;
      // The line break that ended the piped line is not part of the secret.
      expect(await verifySecret(SECRET, parsed)).toBe(true);
      expect(await verifySecret(`${SECRET}\n`, parsed)).toBe(false);
      expect(await verifySecret('correct horse battery stapler', parsed)).toBe(false);
    }
    const config = loadConfig({
      CUSTODY_SDK_URL: 'http://127.0.0.1:4000/sdk',
      CUSTODY_BASE_URL: 'http://127.0.0.1:4000',
      CUSTODY_CLIENT_ID: 'client-1',
      CUSTODY_CLIENT_SECRET: 'client-secret-value',
      CUSTODY_ACCESS_TOKEN: 'fixed-token-value',
      CONSOLE_USERS: `alice:operator:${printed[0]}`,
    });
    expect(config.http.console.users).toEqual([{ name: 'alice', role: 'operator', hash: printed[0] }]);
  });

  it('refuses an empty secret (exit 1), printing nothing on stdout', async () => {
    const result = await runCli(['hash-secret', '--json'], { env: {}, input: '\n' });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(JSON.parse(result.stderr)).toMatchObject({ error: { code: 'EMPTY_SECRET' } });
  });
});
