/**
 * The CLI's custody commands with CUSTODY_PROVIDER=bitgo, against the BitGo simulator over HTTP: the
 * same commands, BitGo's wallet ids, the access token never printed; `travel-rule` says the provider
 * does not gate.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BitgoClient } from '../../src/custody/bitgo/client.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { killAllClis, runCli } from '../helpers/cli-process.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const WALLET = { walletId: '5f1c0a7e9b3d4c2a8e6f1b0d9c7a5e3f', coin: 'tbtc' };
let sim: BitgoSimulator;
let env: Record<string, string>;

beforeAll(async () => {
  sim = await startBitgoSimulator({ port: 0, settings: { approvalAfterMs: 0, txidAfterMs: 0 } });
  env = workerBitgoEnv(sim);
});
afterAll(async () => {
  await killAllClis();
  await sim?.close();
});

describe('custody commands with CUSTODY_PROVIDER=bitgo', { timeout: processesTimeout(1) }, () => {
  it('get-transfer finds a transfer by sequenceId, with a 32-hex --wallet; the token is never printed', async () => {
    const sequenceId = newSequenceId();
    const client = new BitgoClient({
      baseUrl: sim.url,
      accessToken: sim.accessToken,
      timeoutMs: 5_000,
      connectTimeoutMs: 2_000,
      connections: 1,
      maxPauseMs: 1_000,
    });
    await client.sendTransaction(WALLET, sampleSend(sequenceId));
    await client.close();
    const result = await runCli(
      ['get-transfer', '--wallet', WALLET.walletId, '--coin', WALLET.coin, '--sequence-id', sequenceId, '--json'],
      { env },
    );
    expect(result.code, result.stderr).toBe(0);
    const listed = JSON.parse(result.stdout) as Array<{ sequenceId: string; txid: string }>;
    expect(listed).toMatchObject([{ sequenceId, txid: sim.transfer(sequenceId)!.txid }]);
    expect(result.stdout + result.stderr).not.toContain(sim.accessToken);
  });

  it('travel-rule: exit 4 NO_GATE, this provider does not gate', async () => {
    const result = await runCli(['travel-rule', '--json'], { env });
    expect(result.code).toBe(4);
    expect(JSON.parse(result.stderr)).toMatchObject({ error: { code: 'NO_GATE' } });
  });
});
