/**
 * The transition request travels to transition.lua as one JSON text (src/ledger/request.ts). Job data
 * is not trusted: a lone UTF-16 surrogate in a field JSON.stringify writes as a `\ud800` escape, which
 * Redis's cjson refuses ("invalid unicode escape"), so the job's `transfer.rejected` never happened
 * and the job retried for ever (found by the payload fuzzer through the real worker). Such a value is
 * stored as U+FFFD, as the positional arguments before did (UTF-8 on the wire).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

afterAll(closeAllRedis);

describe('transition request encoding', () => {
  it('takes values with lone surrogates, stored as U+FFFD, and every other character as given', async () => {
    const redis = newRedis();
    const prefix = uniquePrefix('request-encoding');
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const ledger = new Ledger(redis, keys, { eventsMaxLen: 1_000, retentionMs: 60_000 });
    const odd = { walletId: 'w\ud800x', coin: 'c\udfffy\u0000z', metadata: '{"emoji":"😀","quote":"\\"","nl":"\\n"}' };
    const result = await ledger.transition(
      'seq-odd-1',
      op.reject('job-1', odd, { code: 'INVALID_PAYLOAD', issues: [{ path: 'walletId', message: 'x\ud800' }] }),
    );
    expect(result.ok).toBe(true);
    const record = await ledger.get('seq-odd-1');
    expect(record).toMatchObject({ state: 'rejected', walletId: 'w\ufffdx', coin: 'c\ufffdy\u0000z', metadata: odd.metadata });
    const [event] = await ledger.events('seq-odd-1');
    expect(event?.event).toBe('transfer.rejected');
  });
});
