/**
 * The listing indexes (transition.lua, KEYS[10..]) against a scan of the records: what each index
 * should hold is worked out here from the records alone, independently of the script, and every
 * difference is reported. Tests only: the worker never scans.
 */
import { ATTENTION_REASONS, type AttentionReason } from '../../packages/producer/src/keys.ts';
import { JOB_ID_PREFIX } from '../../packages/producer/src/job-id.ts';
import { canonicalTxid } from '../../src/lib/txid.ts';
import type { Keys } from '../../src/ledger/keys.ts';
import { TERMINAL_STATES, toRecord, TransferState, type TransferRecord } from '../../src/ledger/ledger.ts';
import type { RedisClient } from '../../src/redis.ts';

/** Why a record needs attention and since when, as docs/architecture.md states the rule. */
export function expectedAttention(record: TransferRecord): { reason: AttentionReason; since: number } | undefined {
  if (record.state === TransferState.SUBMITTING) {
    const unresolved = record.unresolvedAt ?? record.inUseSince;
    if (unresolved !== undefined) return { reason: 'unresolved', since: unresolved };
    if (record.unknownSince !== undefined) return { reason: 'send-unknown', since: record.unknownSince };
  }
  if ((record.state === TransferState.SUBMITTED && record.haltedAs !== undefined) || record.state === TransferState.HALTED) {
    return { reason: 'halted', since: record.haltedSince ?? record.updatedAt };
  }
  if (record.state === TransferState.SUBMITTED && record.approvalSince !== undefined) {
    return { reason: 'approval', since: record.approvalSince };
  }
  if (record.state === TransferState.EXPIRED && record.expiredCode === 'SEND_OUTCOME_UNKNOWN') {
    return { reason: 'expired-unknown', since: record.updatedAt };
  }
  return undefined;
}

/** Every ledger record under `prefix` (SCAN), by sequenceId. */
export async function scanRecords(redis: RedisClient, prefix: string): Promise<Map<string, TransferRecord>> {
  const marker = `${prefix}:transfer:`;
  const names: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await (redis as import('ioredis').Redis).scan(cursor, 'MATCH', `${marker}*`, 'COUNT', 1000);
    cursor = next;
    names.push(...batch);
  } while (cursor !== '0');
  const records = new Map<string, TransferRecord>();
  const hashes = await Promise.all(names.map((name) => redis.hgetall(name)));
  names.forEach((name, i) => {
    const hash = hashes[i]!;
    if (hash.state) records.set(name.slice(marker.length), toRecord(name.slice(marker.length), hash));
  });
  return records;
}

async function sortedSet(redis: RedisClient, key: string): Promise<Record<string, number>> {
  const flat = await redis.zrange(key, '0', '-1', 'WITHSCORES');
  const set: Record<string, number> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) set[flat[i]!] = Number(flat[i + 1]);
  return set;
}

function differences(name: string, actual: Record<string, unknown>, expected: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const [member, value] of Object.entries(expected)) {
    if (!(member in actual)) problems.push(`${name}: ${member} missing (expected ${JSON.stringify(value)})`);
    else if (JSON.stringify(actual[member]) !== JSON.stringify(value))
      problems.push(`${name}: ${member} is ${JSON.stringify(actual[member])}, expected ${JSON.stringify(value)}`);
  }
  for (const member of Object.keys(actual)) if (!(member in expected)) problems.push(`${name}: ${member} should not be there`);
  return problems;
}

/**
 * What differs between the indexes and a scan of the records (empty: they agree). Every record's
 * entries must be there, and nothing else: an entry of a record that is gone is a leak.
 */
export async function indexProblems(redis: RedisClient, keys: Keys, prefix: string): Promise<string[]> {
  const records = await scanRecords(redis, prefix);
  const byState: Record<string, Record<string, number>> = Object.fromEntries(Object.values(TransferState).map((state) => [state, {}]));
  const attention: Record<string, Record<string, number>> = Object.fromEntries(ATTENTION_REASONS.map((reason) => [reason, {}]));
  const ids: Record<string, number> = {};
  // The search index (transition.lua, KEYS[17]): each record's txid and job id, exact and by prefix.
  const search: Record<string, number> = {};
  const ended: Record<string, unknown> = {};
  for (const record of records.values()) {
    byState[record.state]![record.sequenceId] = record.updatedAt;
    ids[record.sequenceId] = 0;
    const needs = expectedAttention(record);
    if (needs) attention[needs.reason]![record.sequenceId] = needs.since;
    if (record.txid !== undefined) search[`t:${canonicalTxid(record.txid)}\n${record.sequenceId}`] = 0;
    // A jobIdFor job id has no entry: the index of every sequenceId stands for it (queries.ts).
    const searched = record.jobId !== '' && record.jobId !== JOB_ID_PREFIX + record.sequenceId ? record.jobId : '';
    if (searched !== '') search[`j:${searched}\n${record.sequenceId}`] = 0;
    if (TERMINAL_STATES.has(record.state)) {
      ended[record.sequenceId] = {
        state: record.state,
        // What retention removes: the job id's own search entry, if it has one.
        jobId: searched,
        txid: record.txid === undefined ? '' : canonicalTxid(record.txid),
        attention: needs?.reason ?? '',
      };
    }
  }
  const problems: string[] = [];
  for (const state of Object.values(TransferState)) {
    problems.push(...differences(`state ${state}`, await sortedSet(redis, keys.byState(state)), byState[state]!));
  }
  for (const reason of ATTENTION_REASONS) {
    problems.push(...differences(`attention ${reason}`, await sortedSet(redis, keys.attention(reason)), attention[reason]!));
  }
  problems.push(...differences('ids', await sortedSet(redis, keys.ids), ids));
  problems.push(...differences('search', await sortedSet(redis, keys.search), search));
  const entries = await redis.hgetall(keys.endedEntries);
  const decoded = Object.fromEntries(
    Object.entries(entries).map(([member, text]) => {
      const { state, jobId, txid, attention: reason } = JSON.parse(text) as Record<string, string>;
      return [member, { state, jobId, txid, attention: reason }];
    }),
  );
  problems.push(...differences('ended entries', decoded, ended));
  return problems;
}
