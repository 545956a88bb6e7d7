import { parseSubmitPayload, type SubmitPayload } from '../../packages/producer/src/payload.ts';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import type { Ledger, TransitionRequest } from '../../src/ledger/ledger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';

/** A valid job payload (the sample's) under `sequenceId`, as the handlers get it after parsing. */
export function payloadOf(sequenceId: string): SubmitPayload {
  const parsed = parseSubmitPayload(samplePayload({ sequenceId }));
  if (!parsed.ok) throw new Error('sample payload invalid');
  return parsed.payload;
}

/** A transition that must be taken: throws, naming the refusal, when the ledger refuses it. */
export async function mustTransition(ledger: Ledger, sequenceId: string, request: TransitionRequest): Promise<void> {
  const result = await ledger.transition(sequenceId, request);
  if (!result.ok) throw new Error(`${request.from.join('|')} -> ${request.to} refused: ${result.reason} (state ${result.state})`);
}

/** A ledger's keys under `prefix`, its events stream among them rather than one stream the tests share. */
export function prefixedKeys(prefix: string): Keys {
  const keys = createKeys(prefix, 'events');
  keys.events = `${keys.terminal}:events`;
  return keys;
}
