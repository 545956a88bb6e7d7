import { describe, expect, it } from 'vitest';
import { VerifiedSecrets } from '../../src/lib/secret-hash.ts';

/** A cache on a clock the test moves, and a count of the verifications it asked for. */
function cache(maxEntries = 3, ttlMs = 60_000) {
  let now = 1_000;
  const verifications: string[] = [];
  const secrets = new VerifiedSecrets<string>({ maxEntries, ttlMs, now: () => now });
  const check = (secret: string, right = true) =>
    secrets.get([secret], async () => {
      verifications.push(secret);
      return right ? `name-of-${secret}` : undefined;
    });
  return { secrets, check, verifications, advance: (ms: number) => (now += ms) };
}

describe('VerifiedSecrets', () => {
  it('remembers a success: the second check of one secret runs no verification', async () => {
    const { check, verifications } = cache();
    expect(await check('k1')).toBe('name-of-k1');
    expect(await check('k1')).toBe('name-of-k1');
    expect(verifications).toEqual(['k1']);
  });

  it('never remembers a wrong secret', async () => {
    const { secrets, check, verifications } = cache();
    expect(await check('wrong', false)).toBeUndefined();
    expect(await check('wrong', false)).toBeUndefined();
    expect(verifications).toEqual(['wrong', 'wrong']);
    expect(secrets.size).toBe(0);
  });

  it('forgets a success after its time: the check past it verifies again', async () => {
    const { check, verifications, advance } = cache(3, 60_000);
    await check('k1');
    advance(59_999);
    await check('k1');
    expect(verifications).toEqual(['k1']);
    advance(1);
    await check('k1');
    expect(verifications).toEqual(['k1', 'k1']);
  });

  it('holds at most maxEntries, pushing out the oldest', async () => {
    const { secrets, check, verifications } = cache(3);
    for (const secret of ['k1', 'k2', 'k3', 'k4']) await check(secret);
    expect(secrets.size).toBe(3);
    verifications.length = 0;
    await check('k4');
    await check('k2');
    expect(verifications).toEqual([]);
    await check('k1');
    expect(verifications).toEqual(['k1']);
  });

  it('tells the parts apart: a name and a password are not their concatenation', async () => {
    let verified = 0;
    const secrets = new VerifiedSecrets<string>({ maxEntries: 8, ttlMs: 60_000 });
    const verify = async () => String(++verified);
    expect(await secrets.get(['ab', 'c'], verify)).toBe('1');
    expect(await secrets.get(['a', 'bc'], verify)).toBe('2');
    expect(await secrets.get(['ab', 'c'], verify)).toBe('1');
  });
});
