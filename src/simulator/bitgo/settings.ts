/**
 * Settings of the BitGo simulator (docs/bitgo-api.md), and their validating merge: a bad patch is
 * refused whole, naming the field, as the wallet-service simulator's settings are (../settings.ts).
 */
import { FAULT_KINDS, SettingsError } from '../settings.ts';
import type { FaultKind, FaultPlan } from '../settings.ts';

/** The endpoints the worker uses (docs/bitgo-api.md sections 2, 3 and 6), named after the SDK's methods. */
export type BitgoEndpoint = 'sendTransaction' | 'transferBySequenceId' | 'getTransfer';

export const BITGO_ENDPOINTS: readonly BitgoEndpoint[] = ['sendTransaction', 'transferBySequenceId', 'getTransfer'];

/**
 * The fault kinds of ../faults.ts a BitGo simulator serves: all but 'success-false' (BitGo's bodies
 * carry no success flag).
 */
export const BITGO_FAULT_KINDS: readonly FaultKind[] = FAULT_KINDS.filter((kind) => kind !== 'success-false');

export interface BitgoSettings {
  /**
   * A transfer accepted by send waits this long in `pendingApproval` (send answers 202 with a pending
   * approval) before BitGo signs it; 0: no approval needed, send answers 200 with the signed transfer.
   */
  approvalAfterMs: number;
  /** After signing, the transfer shows its `txid` this much later (state stays `signed` until then). */
  txidAfterMs: number;
  /** Wait before answering, every endpoint. */
  latencyMs: number;
  /**
   * A request limit over all endpoints: past it (a token bucket of this rate holding one second's
   * worth) the answer is 429. 0: no limit.
   */
  maxRps: number;
  /** Retry-After (s) of 429s; 0: no Retry-After header (BitGo documents none for these endpoints). */
  retryAfterSec: number;
  /** true: get-transfer-by-sequenceId answers 206 Partial Content (a documented success) instead of 200. */
  partialContent: boolean;
}

export interface BitgoSimulatorOptions {
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** The bearer token every request must carry. */
  accessToken?: string;
  /** The secret `transfer` webhook calls are signed with (webhooks.ts). */
  webhookSecret?: string;
  settings?: Partial<BitgoSettings>;
}

export const DEFAULT_BITGO_ACCESS_TOKEN = 'sim-bitgo-access-token';

export function defaultBitgoSettings(): BitgoSettings {
  return { approvalAfterMs: 0, txidAfterMs: 0, latencyMs: 0, maxRps: 0, retryAfterSec: 0, partialContent: false };
}

/** setTimeout cannot wait longer than this. */
const MAX_MS = 2_147_483_647;

const KINDS: Record<keyof BitgoSettings, 'ms' | 'bool'> = {
  approvalAfterMs: 'ms',
  txidAfterMs: 'ms',
  latencyMs: 'ms',
  maxRps: 'ms',
  retryAfterSec: 'ms',
  partialContent: 'bool',
};

/** A new settings object: `base` with `patch` merged; throws SettingsError naming the first bad field. */
export function mergeBitgoSettings(base: BitgoSettings, patch: unknown): BitgoSettings {
  const next = { ...base };
  if (patch === undefined || patch === null) return next;
  if (typeof patch !== 'object' || Array.isArray(patch)) throw new SettingsError('settings: must be an object');
  for (const [key, value] of Object.entries(patch)) {
    if (!Object.hasOwn(KINDS, key)) throw new SettingsError(`${key}: unknown setting`);
    if (value === undefined) continue;
    const name = key as keyof BitgoSettings;
    if (KINDS[name] === 'bool') {
      if (typeof value !== 'boolean') throw new SettingsError(`${key}: must be a boolean`);
      next.partialContent = value;
    } else {
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_MS) {
        throw new SettingsError(`${key}: must be a number from 0 to ${MAX_MS}`);
      }
      (next as unknown as Record<string, number>)[key] = value;
    }
  }
  return next;
}

/** Refuses a plan naming a kind this simulator does not serve. */
export function checkBitgoFaultPlan(plan: FaultPlan | null): FaultPlan | null {
  const kinds = [...(plan?.kinds ?? []), ...(plan?.sequence ?? [])];
  const unserved = kinds.find((kind) => kind !== 'ok' && !BITGO_FAULT_KINDS.includes(kind));
  if (unserved !== undefined) throw new SettingsError(`fault plan: ${unserved} is not served by the BitGo simulator`);
  return plan;
}
