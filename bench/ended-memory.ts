/**
 * What an ended transfer keeps in Redis for `RETENTION + TOMBSTONE_RETENTION` (ten years and more by
 * default): ENDED transfers (default 5,000) through the real path to `transfer.broadcast`, with
 * `RETENTION=1s` so their records and index entries go; then, for what is left as long as the
 * tombstone lives (the tombstone, a key with a TTL; the claims of the record id and the txid, fields
 * of one hash), the `used_memory` freed by deleting them all, per key or field. The keyspace's and the
 * expiry index's table slots (8 to 16 bytes each) come on top of a key's: Redis shrinks those tables
 * later. Prints JSON; writes no result file.
 */
import { samplePayload, type ValidSamplePayload } from '../tools/sample-payloads.ts';
import { forEachLimited, sleep } from './load.ts';
import { keysMatching, startMemoryRig, usedMemory } from './memory.ts';

const ended = Number(process.env.ENDED ?? '5000');
if (!Number.isInteger(ended) || ended <= 0) throw new Error(`ENDED: "${process.env.ENDED}" is not a positive whole number`);

/** The claims' kinds (src/ledger/keys.ts, Keys.claimField): fields of `<prefix>:claims`. */
const CLAIM_KINDS = ['record', 'txid'] as const;

const { redis, target, stop } = await startMemoryRig(
  'ended',
  { SIM_TXID_AFTER: '0s' },
  {
    SUBMIT_CONCURRENCY: '64',
    TRACK_POLL_MIN: '200ms',
    TRACK_POLL_MAX: '1s',
    RETENTION: '1s',
    RECONCILE_EVERY: '2s',
    CUSTODY_MAX_RPS: '2000',
  },
);

try {
  const started = performance.now();
  function* generate(): Generator<ValidSamplePayload> {
    for (let i = 0; i < ended; i++) yield samplePayload();
  }
  await forEachLimited(generate(), 64, (payload) => target.enqueue(payload));
  const deadline = Date.now() + 120_000 + ended * 50;
  // Every transfer ended and its record gone (RETENTION 1 s).
  while (
    (await keysMatching(redis, `${target.prefix}:ended:*`)).length < ended ||
    (await keysMatching(redis, `${target.prefix}:transfer:*`)).length > 0
  ) {
    if (Date.now() > deadline) throw new Error(`ended-memory: ${ended} transfers not ended and removed in time`);
    await sleep(1_000);
  }
  const tombstones = await keysMatching(redis, `${target.prefix}:ended:*`);
  const ttlDays = Math.round(tombstones.length === 0 ? 0 : (await redis.pttl(tombstones[0]!)) / 86_400_000);
  /** The used_memory freed by removing `items` (500 at a time), per item. */
  const freed = async (key: string, items: string[], remove: (batch: string[]) => Promise<unknown>) => {
    const before = await usedMemory(redis);
    for (let i = 0; i < items.length; i += 500) await remove(items.slice(i, i + 500));
    const bytesFreedPerKey = Math.round((before - (await usedMemory(redis))) / Math.max(items.length, 1));
    return { key, perTransfer: items.length / ended, bytesFreedPerKey, ttlDays };
  };
  const parts = [await freed('ended:…', tombstones, (batch) => redis.del(...batch))];
  const claims = `${target.prefix}:claims`;
  const fields = Object.keys(await redis.hgetall(claims));
  for (const kind of CLAIM_KINDS) {
    const ofKind = fields.filter((field) => field.startsWith(`${kind}:`));
    parts.push(await freed(`claims ${kind}:… (a field)`, ofKind, (batch) => redis.hdel(claims, ...batch)));
  }
  const perTransfer = parts.reduce((sum, part) => sum + part.bytesFreedPerKey * part.perTransfer, 0);
  console.log(
    JSON.stringify(
      { ended, seconds: (performance.now() - started) / 1000, parts, bytesPerEndedTransfer: Math.round(perTransfer) },
      null,
      2,
    ),
  );
} finally {
  await stop();
}
