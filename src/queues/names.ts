import { hash } from 'node:crypto';
import type { JobsOptions } from 'bullmq';

/** Queue and job names (docs/contract.md section 3): each queue's jobs carry the queue's name. */
export const QueueName = {
  SUBMIT: 'submit-transaction',
  TRACK: 'track-transfer',
  RECONCILE: 'reconcile',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/**
 * The one tracking job of a transfer: its id is derived from the sequenceId, so adding it again is a
 * no-op. It is short (28 characters, whatever the sequenceId's length) because BullMQ keeps the job id
 * inside the job hash's `opts` value, and one value over 64 bytes turns the hash into Redis's
 * hashtable encoding, several times the memory of a listpack, which `track-<sequenceId>` did
 * (bench/README.md, memory). 132 bits of SHA-256 in base64url (no ':', never integer-like): distinct
 * sequenceIds do not collide in practice. The job's data carries the sequenceId itself.
 */
export function trackJobId(sequenceId: string): string {
  return `track-${hash('sha256', sequenceId, 'base64url').slice(0, 22)}`;
}

/** The id a tracking job had before trackJobId was shortened; reconciliation still recognises those. */
export function legacyTrackJobId(sequenceId: string): string {
  return `track-${sequenceId}`;
}

/**
 * Options of a transfer's tracking job, wherever it is added. `attempts` is left out of the stored
 * options (BullMQ stores undefined options as absent; a job read back defaults to 0, as it was): the
 * processor never lets BullMQ retry a tracker, and `"attempts":0` is what pushed `opts` past 64 bytes
 * with an hour's delay.
 */
export function trackJobOptions(sequenceId: string, delayMs: number): JobsOptions {
  return { jobId: trackJobId(sequenceId), delay: delayMs, attempts: undefined };
}
