import { createHash } from 'node:crypto';
import type { RequestContext } from './transition.ts';

/**
 * What a cancel writes with besides its request: the transition script it runs and the settings it
 * passes to it (the events stream, EVENTS_MAXLEN, RETENTION, RETENTION + TOMBSTONE_RETENTION). The
 * worker records its own in Redis at start-up (`ledgerKeys(prefix).workerSettings`, a hash of these
 * fields as text, plus `recordedAt`); a process that cancels with its own copy and its own
 * configuration (this package's `cancel()`, the CLI's `cancel`) compares them with its own first and
 * refuses on any difference (VersionMismatchError), so that a cancel never writes what the worker
 * would not.
 */
export const WORKER_SETTING_FIELDS = ['script', 'eventsStream', 'eventsMaxLen', 'retentionMs', 'tombstoneTtlMs'] as const;

export type WorkerSettingField = (typeof WORKER_SETTING_FIELDS)[number];

/** The recorded fields, as text (`script`: the SHA1 of the assembled script, as Redis's SCRIPT LOAD names it). */
export type WorkerSettings = Record<WorkerSettingField, string>;

/** One field that differs; `worker` undefined when no worker recorded its settings. */
export interface SettingDifference {
  field: WorkerSettingField;
  worker: string | undefined;
  mine: string;
}

/** The SHA1 of a script (hex), the name Redis gives it (EVALSHA, SCRIPT EXISTS). */
export function scriptSha(script: string): string {
  return createHash('sha1').update(script).digest('hex');
}

/** What a process that runs `script` with `context` on `eventsStream` writes with. */
export function workerSettings(script: string, eventsStream: string, context: RequestContext): WorkerSettings {
  return {
    script: scriptSha(script),
    eventsStream,
    eventsMaxLen: String(context.eventsMaxLen),
    retentionMs: String(context.retentionMs),
    tombstoneTtlMs: String(context.tombstoneTtlMs),
  };
}

/** The hash's fields as HSET takes them. */
export function settingsFields(settings: WorkerSettings): string[] {
  return WORKER_SETTING_FIELDS.flatMap((field) => [field, settings[field]]);
}

/** Whether a worker recorded its settings: `recorded` is the hash as read (HGETALL; `{}` when absent). */
export function settingsRecorded(recorded: Readonly<Record<string, string>>): boolean {
  return recorded.script !== undefined;
}

/**
 * Why a cancel with `mine` must not run, given the hash as read and whether the ledger has an epoch:
 * every field that differs (empty: it may run).
 *
 * With nothing recorded: when the ledger has no epoch either (no worker ever ran, or Redis lost its
 * data), the cancel may run: the script then refuses it (too-late, the ledger cannot vouch) and writes
 * nothing, so nothing is written with unchecked settings. When the ledger has an epoch, a worker ran
 * but did not record (one older than the record, or a record lost on its own): nothing can be
 * compared, so every field counts as differing.
 */
export function settingDifferences(
  recorded: Readonly<Record<string, string>>,
  mine: WorkerSettings,
  ledgerHasEpoch: boolean,
): SettingDifference[] {
  if (!settingsRecorded(recorded) && !ledgerHasEpoch) return [];
  return WORKER_SETTING_FIELDS.filter((field) => recorded[field] !== mine[field]).map((field) => ({
    field,
    worker: recorded[field],
    mine: mine[field],
  }));
}
