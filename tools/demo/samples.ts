/**
 * The demo's sample transfers and what each must end in. The simulator's travel rule applies for the
 * whole run (outgoingTxn 1, mandatory), so every sample that should go through carries a
 * `travelRule.reference` and the one that should be blocked carries none.
 *
 * With BitGo (--provider bitgo) wallet ids are 32 lowercase hex and coins BitGo's testnet tickers. BitGo
 * does not gate on the travel rule, so no sample can be blocked: in the blocked one's place is a transfer
 * whose wallet id is an integer (the other provider's form), which the producer accepts and a bitgo worker
 * rejects before sending anything. No BitGo sample carries a travel-rule reference: none is needed.
 */
import { randomBytes } from 'node:crypto';
import type { EventType } from '../../packages/producer/src/events.ts';
import { jobIdFor, type SubmitPayloadInput } from '../../packages/producer/src/producer.ts';
import type { CustodyProviderName } from '../../src/config/config.ts';

export type SampleKind = 'normal' | 'duplicate' | 'blocked' | 'integer-wallet' | 'invalid';

/** `producer`: through the typed producer (validated); `queue`: added raw, as a careless producer would. */
export type SampleJob = { jobId: string; data: SubmitPayloadInput; via: 'producer' } | { jobId: string; data: unknown; via: 'queue' };

export interface Sample {
  kind: SampleKind;
  sequenceId: string;
  /** The one terminal event the transfer must get. */
  expected: EventType;
  /** How many `transfer.submitted` events (and accepted sends upstream) it must get: 0 or 1. */
  sends: 0 | 1;
  /** Every job enqueued for it (two for the duplicate). */
  jobs: SampleJob[];
}

export const SAMPLE_LABELS: Record<SampleKind, string> = {
  normal: 'normal',
  duplicate: 'duplicate (2 jobs)',
  blocked: 'no travel-rule ref',
  'integer-wallet': 'integer wallet id',
  invalid: 'invalid payload',
};

const COINS = ['eth', 'btc', 'sol', 'usdc', 'trx'] as const;
const BITGO_COINS = ['tbtc', 'teth', 'tltc', 'tsol', 'hteth'] as const;
/** The wallet-service sample's integer wallet id, sent to a bitgo worker. */
const INTEGER_WALLET_ID = 310;

/** A random half-signed transaction: hex and the same bytes in base64, as docs/contract.md section 3 wants. */
function halfSignedTx(): { txHex: string; txBase64: string } {
  const bytes = Buffer.concat([Buffer.from([2, 0xf8]), randomBytes(94)]);
  return { txHex: bytes.toString('hex'), txBase64: bytes.toString('base64') };
}

/** Where a valid payload goes: the provider's wallet ids (three, used in turn) and coins. */
interface Target {
  walletIds: ReadonlyArray<number | string>;
  coins: readonly string[];
}

const WALLET_SERVICE_TARGET: Target = { walletIds: [310, 311, 312], coins: COINS };

function validPayload(
  sequenceId: string,
  index: number,
  reference: string | undefined,
  target = WALLET_SERVICE_TARGET,
): SubmitPayloadInput {
  const tx = halfSignedTx();
  return {
    walletId: target.walletIds[index % target.walletIds.length]!,
    coin: target.coins[index % target.coins.length]!,
    txHex: tx.txHex,
    halfSigned: { txBase64: tx.txBase64, txHex: tx.txHex, sequenceId },
    ...(reference ? { travelRule: { reference } } : {}),
    metadata: { orderId: `DEMO-${1000 + index}` },
  };
}

/**
 * `normal` ordinary transfers, then one enqueued twice under two job ids, one without a travel-rule
 * reference (with BitGo: one with an integer wallet id) and one whose payload breaks the contract (but
 * names a sequenceId, so its rejection is keyed by it). sequenceIds are `<runId>-<kind>[-n]`, readable
 * in the output and the dashboard.
 */
export function buildSamples(runId: string, normal: number, provider: CustodyProviderName = 'wallet-service'): Sample[] {
  const samples: Sample[] = [];
  const add = (kind: SampleKind, sequenceId: string, expected: EventType, sends: 0 | 1, jobs: SampleJob[]) =>
    samples.push({ kind, sequenceId, expected, sends, jobs });
  const bitgo = provider === 'bitgo';
  const target: Target = bitgo
    ? { walletIds: Array.from({ length: 3 }, () => randomBytes(16).toString('hex')), coins: BITGO_COINS }
    : WALLET_SERVICE_TARGET;
  const reference = (suffix: string) => (bitgo ? undefined : `tr-${runId}-${suffix}`);

  for (let i = 1; i <= normal; i++) {
    const sequenceId = `${runId}-normal-${i}`;
    add('normal', sequenceId, 'transfer.broadcast', 1, [
      { jobId: jobIdFor(sequenceId), data: validPayload(sequenceId, i, reference(String(i)), target), via: 'producer' },
    ]);
  }

  const duplicate = `${runId}-duplicate`;
  const duplicatePayload = validPayload(duplicate, 0, reference('dup'), target);
  add('duplicate', duplicate, 'transfer.broadcast', 1, [
    { jobId: jobIdFor(duplicate), data: duplicatePayload, via: 'producer' },
    // Same transfer, another job id: the worker must treat it as the same transfer (docs/contract.md section 3).
    { jobId: `${duplicate}-again`, data: duplicatePayload, via: 'queue' },
  ]);

  if (bitgo) {
    // A payload the producer accepts (an integer is the wallet-service form) that a bitgo worker rejects: nothing sent.
    const integerWallet = `${runId}-integer-wallet`;
    add('integer-wallet', integerWallet, 'transfer.rejected', 0, [
      {
        jobId: jobIdFor(integerWallet),
        data: validPayload(integerWallet, 1, undefined, { walletIds: [INTEGER_WALLET_ID], coins: BITGO_COINS }),
        via: 'producer',
      },
    ]);
  } else {
    const blocked = `${runId}-blocked`;
    add('blocked', blocked, 'transfer.blocked', 0, [
      { jobId: jobIdFor(blocked), data: validPayload(blocked, 1, undefined), via: 'producer' },
    ]);
  }

  const invalid = `${runId}-invalid`;
  const tx = halfSignedTx();
  add('invalid', invalid, 'transfer.rejected', 0, [
    {
      jobId: invalid,
      data: {
        walletId: 'wallet-310',
        coin: 'ETH',
        txHex: 'not hex',
        halfSigned: { txBase64: tx.txBase64, txHex: tx.txHex, sequenceId: invalid },
        metadata: { orderId: 'DEMO-INVALID' },
      },
      via: 'queue',
    },
  ]);
  return samples;
}

/**
 * The order jobs are enqueued in: first jobs interleaved so that outcomes of every kind arrive
 * early, the duplicate's second job last.
 */
export function enqueueOrder(samples: readonly Sample[]): Array<{ sample: Sample; job: SampleJob }> {
  const special = samples.filter((sample) => sample.kind !== 'normal');
  const normal = samples.filter((sample) => sample.kind === 'normal');
  const first: Sample[] = [];
  while (normal.length > 0 || special.length > 0) {
    const next = normal.shift();
    if (next) first.push(next);
    const other = special.shift();
    if (other) first.push(other);
  }
  const order = first.map((sample) => ({ sample, job: sample.jobs[0]! }));
  for (const sample of samples) for (const job of sample.jobs.slice(1)) order.push({ sample, job });
  return order;
}

/** A fresh run id: the queue prefix and the sequenceIds' stem (`demo-<hex>`). */
export function newRunId(): string {
  return `demo-${randomBytes(4).toString('hex')}`;
}
