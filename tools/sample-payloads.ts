import { randomBytes, randomUUID } from 'node:crypto';
import type { SubmitPayloadInput } from '../packages/producer/src/payload.ts';
import type { SendTransactionBody } from '../src/custody/wallet-service/client.ts';

/** UUID-like, as the spec shows sequenceIds. */
export function newSequenceId(): string {
  return randomUUID();
}

function halfSignedTx(): { txHex: string; txBase64: string } {
  const bytes = randomBytes(96);
  return { txHex: `02f8${bytes.toString('hex')}`, txBase64: Buffer.concat([Buffer.from([2, 0xf8]), bytes]).toString('base64') };
}

export function sampleSend(sequenceId: string): SendTransactionBody {
  const tx = halfSignedTx();
  return { txHex: tx.txHex, halfSigned: { ...tx, sequenceId } };
}

/** A valid `submit-transaction` payload (docs/contract.md section 3), with a fresh sequenceId unless given. */
export interface SamplePayload {
  walletId: unknown;
  coin: unknown;
  txHex: unknown;
  halfSigned: { txBase64: string; txHex: string; sequenceId: string };
  metadata?: unknown;
  travelRule?: unknown;
  [extra: string]: unknown;
}

/** A sample whose overrides are typed as the schema's input: what `TransferProducer.submit()` takes. */
export type ValidSamplePayload = SubmitPayloadInput & { halfSigned: { txBase64: string; txHex: string; sequenceId: string } };

/**
 * Overrides typed as the schema's input give a `ValidSamplePayload` (submit() takes it as is); any other
 * override value (a test of rejection) gives the loose `SamplePayload`, which must be cast to be submitted.
 */
export function samplePayload(overrides?: Partial<Omit<SubmitPayloadInput, 'halfSigned'>> & { sequenceId?: string }): ValidSamplePayload;
export function samplePayload(
  overrides: Partial<Record<Exclude<keyof SubmitPayloadInput, 'halfSigned'>, unknown>> & { sequenceId?: string },
): SamplePayload;
export function samplePayload(
  overrides: Partial<Record<Exclude<keyof SubmitPayloadInput, 'halfSigned'>, unknown>> & { sequenceId?: string } = {},
): SamplePayload {
  const { sequenceId = newSequenceId(), ...rest } = overrides;
  const tx = halfSignedTx();
  return {
    walletId: 310,
    coin: 'eth',
    txHex: tx.txHex,
    halfSigned: { txBase64: tx.txBase64, txHex: tx.txHex, sequenceId },
    metadata: { orderId: `A-${sequenceId.slice(0, 8)}` },
    ...rest,
  };
}
