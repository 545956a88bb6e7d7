import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { killAllChildren, spawnNodeScript, type NodeScript } from '../../tools/child-process.ts';
import { postJson } from './sim-client.ts';

const MAIN = fileURLToPath(new URL('../../src/simulator/main.ts', import.meta.url));

/** `npm run simulator` through the project's one child-process helper (it strips SIM_*, CUSTODY_* …). */
function run(env: Record<string, string>): NodeScript {
  return spawnNodeScript(MAIN, { name: 'simulator', env });
}

afterEach(killAllChildren);

describe('npm run simulator (main.ts)', () => {
  it('prints its URL, serves the token endpoint with the env credentials, and exits 0 on SIGTERM', async () => {
    const secret = 'very-secret-value-123';
    const child = run({
      SIMULATOR_PORT: '0',
      CUSTODY_CLIENT_ID: 'staging-app',
      CUSTODY_CLIENT_SECRET: secret,
      SIM_TRAVEL_RULE_OUTGOING: '1',
      SIM_TRAVEL_RULE_MANDATORY: 'true',
    });
    try {
      const line = JSON.parse(await child.waitForLog('"url"')) as { url: string; port: number };
      expect(line.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(line.port).toBeGreaterThan(0);

      const ok = await postJson(`${line.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: 'staging-app',
        client_secret: secret,
      });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { token_type: string }).token_type).toBe('Bearer');
      const wrong = await postJson(`${line.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: 'sim-client',
        client_secret: 'sim-secret',
      });
      expect(wrong.status).toBe(401);
      const settings = (await (await fetch(`${line.url}/_sim/settings`)).json()) as {
        travelRule: { outgoingTxn: number; mandatory: boolean };
      };
      expect(settings.travelRule).toMatchObject({ outgoingTxn: 1, mandatory: true });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(child.output()).not.toContain(secret);
  });

  it('exits 78 naming each bad variable', async () => {
    const child = run({ SIMULATOR_PORT: '70000', SIM_NARROW_RESULTS: 'perhaps', CUSTODY_CLIENT_SECRET: 'hush-hush' });
    expect((await child.exited).code).toBe(78);
    const lines = child.output().trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^SIMULATOR_PORT: /);
    expect(lines[1]).toMatch(/^SIM_NARROW_RESULTS: /);
    expect(child.output()).not.toContain('hush-hush');
  });
});
