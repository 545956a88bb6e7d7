/**
 * `/api/v1` (src/http/api-v1/) on a real server on 127.0.0.1, a real worker, Redis and simulator:
 * listings with filters and cursors, one transfer's timeline, the summary, the audit stream, and the
 * actions with their role check, Idempotency-Key, browser check and rate limit.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';
import { createLogger } from '../../src/logger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { OpenApiDocument } from '../helpers/openapi.ts';

const PASSWORDS = { vera: 'viewer-password-1', otto: 'operator-password-2' };
const basic = (user: keyof typeof PASSWORDS) => `Basic ${Buffer.from(`${user}:${PASSWORDS[user]}`).toString('base64')}`;
const REASON = 'customer asked to stop it';

let h: Harness;
let server: FastifyInstance;
let base: string;
let auditKey: string;
/** Every answer below is checked against the server's own /openapi.json. */
let document: OpenApiDocument;
// The answers' shapes are what the assertions check.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

beforeAll(async () => {
  const users = `vera:viewer:${await hashSecret(PASSWORDS.vera)},otto:operator:${await hashSecret(PASSWORDS.otto)}`;
  h = await startHarness({ name: 'api-v1', env: { CONSOLE_USERS: users } });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
  auditKey = createKeys(h.prefix, h.config.queue.eventsStream).audit;
  document = await OpenApiDocument.fetch(base, { authorization: basic('vera') });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function get(path: string, user: keyof typeof PASSWORDS = 'vera'): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${base}${path}`, { headers: { authorization: basic(user) } });
  const answer = { status: response.status, body: (await response.json()) as Json };
  document.expectAnswer('GET', path, answer);
  return answer;
}

async function post(path: string, body: unknown, user: keyof typeof PASSWORDS = 'otto', headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: basic(user), 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const answer = { status: response.status, body: (await response.json()) as Json, headers: response.headers };
  document.expectAnswer('POST', path, answer);
  return answer;
}

const auditLength = () => h.redis.xlen(auditKey);

/** Three transfers, broadcast. */
async function broadcastThree(): Promise<string[]> {
  const payloads = [samplePayload(), samplePayload(), samplePayload()];
  for (const payload of payloads) await h.producer.submit(payload);
  for (const payload of payloads) await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);
  return payloads.map((payload) => payload.halfSigned.sequenceId);
}

describe('GET /api/v1 reads', () => {
  let ids: string[];
  beforeAll(async () => {
    ids = await broadcastThree();
  });

  it('lists by state in pages, each transfer once, redacted and without internal fields', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await get(`/api/v1/transfers?state=broadcast&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      for (const item of page.body.items) {
        expect(item.state).toBe('broadcast');
        expect(item).not.toHaveProperty('leaseOwner');
        expect(item).not.toHaveProperty('payload');
        expect(item).not.toHaveProperty('match');
        seen.push(item.sequenceId);
      }
      cursor = page.body.next;
      pages++;
    } while (cursor !== null);
    expect(pages).toBeGreaterThanOrEqual(2);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(ids));
    const all = await get('/api/v1/transfers?state=broadcast&limit=200');
    expect(JSON.stringify(all.body)).not.toMatch(/@example\.com|phoneNumber/);
  });

  it('filters by q, state and coin, and refuses a limit above 200 or a bad cursor', async () => {
    const one = await get(`/api/v1/transfers?q=${ids[0]}`);
    expect(one.body.items.map((item: { sequenceId: string }) => item.sequenceId)).toEqual([ids[0]]);
    // The beginning of a txid or of a job id finds the transfer too.
    const listed = one.body.items[0] as { txid: string; jobId: string };
    for (const q of [listed.txid.slice(0, listed.txid.length - 2), listed.jobId.slice(0, listed.jobId.length - 2)]) {
      const found = await get(`/api/v1/transfers?q=${encodeURIComponent(q)}&limit=200`);
      expect(found.body.items.map((item: { sequenceId: string }) => item.sequenceId)).toContain(ids[0]);
    }
    expect((await get(`/api/v1/transfers?q=${ids[0]}&state=submitted`)).body.items).toEqual([]);
    expect((await get(`/api/v1/transfers?q=${ids[0]}&coin=no-such-coin`)).body.items).toEqual([]);
    expect((await get('/api/v1/transfers?limit=201')).status).toBe(400);
    expect((await get('/api/v1/transfers?state=nonsense')).status).toBe(400);
    expect((await get('/api/v1/transfers?cursor=not-a-cursor')).status).toBe(400);
  });

  it("shows one transfer as GET /transfers/:sequenceId does, with a timeline of its events and an operator's cancel", async () => {
    const sequenceId = ids[1]!;
    expect((await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON })).status).toBe(409);
    const detail = await get(`/api/v1/transfers/${sequenceId}`);
    expect(detail.status).toBe(200);
    const legacy = await fetch(`${base}/transfers/${sequenceId}`, { headers: { authorization: basic('vera') } });
    expect(detail.body).toMatchObject((await legacy.json()) as object);
    const kinds = detail.body.timeline.map((item: { kind: string; source: string }) => `${item.source} ${item.kind}`);
    expect(kinds).toEqual(expect.arrayContaining(['worker transfer.submitted', 'worker transfer.broadcast', 'worker send.attempt']));
    expect(kinds[kinds.length - 1]).toBe('operator operator.cancel');
    expect(detail.body.timeline[kinds.length - 1]).toMatchObject({ outcome: 'already-ended', user: 'otto', via: 'api', reason: REASON });
    expect(detail.body.timelineComplete).toBe(true);
    expect((await get('/api/v1/transfers/no-such-transfer')).status).toBe(404);
  });

  it('sums up counts per state and attention reason, with the banners', async () => {
    const summary = await get('/api/v1/summary');
    expect(summary.status).toBe(200);
    expect(summary.body.states.broadcast).toBeGreaterThanOrEqual(3);
    expect(Object.keys(summary.body.attention).sort()).toEqual(['approval', 'expired-unknown', 'halted', 'send-unknown', 'unresolved']);
    expect(summary.body.banners).toEqual({
      ledgerRecovery: { active: false, until: null },
      providerPause: { active: false, until: null },
      redisWrites: { refused: false },
    });
  });
});

describe('POST /api/v1 actions', () => {
  it('cancels for an operator (200) and refuses a viewer (403), both audited', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const before = await auditLength();
    const refused = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'vera');
    expect(refused.status).toBe(403);
    const done = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ sequenceId, outcome: 'cancelled', state: 'cancelled' });
    expect(await auditLength()).toBe(before + 2);
    const audit = await get('/api/v1/audit?limit=2');
    expect(audit.body.items).toMatchObject([
      { user: 'otto', role: 'operator', action: 'cancel', sequenceId, outcome: 'cancelled', via: 'api', remote: '127.0.0.1' },
      { user: 'vera', role: 'viewer', action: 'cancel', sequenceId, outcome: 'forbidden' },
    ]);
  });

  it('rechecks a submitted transfer now (200) and refuses one that ended (409), both audited', async () => {
    h.sim.updateSettings({ txidAfterMs: 3_600_000 });
    try {
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);
      await expect.poll(async () => (await h.app!.ledger.get(sequenceId))?.state, { timeout: 15_000 }).toBe('submitted');
      const answer = await post(`/api/v1/transfers/${sequenceId}/recheck`, { reason: REASON });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ sequenceId, outcome: expect.stringMatching(/^(promoted|polling|added)$/) });
      const cancelled = samplePayload().halfSigned.sequenceId;
      expect((await post(`/api/v1/transfers/${cancelled}/cancel`, { reason: REASON })).status).toBe(200);
      const refused = await post(`/api/v1/transfers/${cancelled}/recheck`, { reason: REASON });
      expect(refused.status).toBe(409);
      expect(refused.body).toMatchObject({ error: 'WRONG_STATE' });
      const audit = await get('/api/v1/audit?limit=2');
      expect(audit.body.items).toMatchObject([
        { action: 'recheck', sequenceId: cancelled, outcome: 'wrong-state' },
        { action: 'cancel', sequenceId: cancelled, outcome: 'cancelled' },
      ]);
    } finally {
      h.sim.updateSettings({ txidAfterMs: 0 });
    }
  });

  it('checks the body: 400 when not a JSON object, 422 with issues', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const before = await auditLength();
    expect((await post(`/api/v1/transfers/${sequenceId}/cancel`, ['x'])).status).toBe(400);
    const bad = await post(`/api/v1/transfers/${sequenceId}/resolve`, { reason: REASON, outcome: 'submitted' });
    expect(bad.status).toBe(422);
    expect(bad.body.issues.length).toBeGreaterThan(0);
    expect((await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: 'r'.repeat(501) })).status).toBe(422);
    expect(await auditLength()).toBe(before);
    expect(await h.app!.ledger.ended(sequenceId)).toBeUndefined();
  });

  it('answers a repeat with the same Idempotency-Key as it answered the first, writing nothing new', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const key = { 'idempotency-key': `key-${sequenceId}` };
    const first = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'otto', key);
    expect(first.status).toBe(200);
    const length = await auditLength();
    const repeat = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'otto', key);
    expect(repeat.status).toBe(200);
    expect(repeat.body).toEqual(first.body);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    expect(await auditLength()).toBe(length);
    // Without the key the same cancel runs again: the state no longer allows it.
    expect((await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON })).status).toBe(409);
    // The key for another body is refused.
    expect((await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: 'another reason' }, 'otto', key)).status).toBe(422);
  });

  it("refuses a browser's POST from another origin without a CSRF token, and takes one from its own origin", async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const before = await auditLength();
    const foreign = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'otto', { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    const cookieOnly = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'otto', { cookie: '_csrf=forged' });
    expect(cookieOnly.status).toBe(403);
    expect(await auditLength()).toBe(before);
    expect(await h.app!.ledger.ended(sequenceId)).toBeUndefined();
    const own = await post(`/api/v1/transfers/${sequenceId}/cancel`, { reason: REASON }, 'otto', { origin: base });
    expect(own.status).toBe(200);
    expect((await get('/api/v1/audit?limit=1')).body.items[0]).toMatchObject({ sequenceId, via: 'console', outcome: 'cancelled' });
  });

  it('lists the audit stream newest first, page by page', async () => {
    const first = await get('/api/v1/audit?limit=2');
    expect(first.body.items).toHaveLength(2);
    const second = await get(`/api/v1/audit?limit=2&cursor=${first.body.next}`);
    const ids = [...first.body.items, ...second.body.items].map((item: { id: string }) => item.id);
    const order = (id: string) => id.split('-').map(Number) as [number, number];
    for (let i = 1; i < ids.length; i++) {
      const [a, b] = [order(ids[i - 1]!), order(ids[i]!)];
      expect(a[0] > b[0] || (a[0] === b[0] && a[1] > b[1])).toBe(true);
    }
    expect((await get('/api/v1/audit?cursor=nonsense')).status).toBe(400);
  });
});

describe('rate limit', () => {
  let limited: FastifyInstance;
  let limitedBase: string;
  beforeAll(async () => {
    limited = await createHttpServer({
      app: h.app!,
      config: h.config,
      logger: createLogger({ level: 'silent' }),
      metrics: h.app!.metrics,
      apiRateLimit: { max: 3, timeWindowMs: 600_000 },
    });
    limitedBase = await limited.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => limited?.close());

  it('answers 429 to a user past the limit, and not to another user', async () => {
    const call = (user: keyof typeof PASSWORDS) => fetch(`${limitedBase}/api/v1/summary`, { headers: { authorization: basic(user) } });
    for (let i = 0; i < 3; i++) expect((await call('vera')).status).toBe(200);
    const refused = await call('vera');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBeTruthy();
    expect((await call('otto')).status).toBe(200);
  });
});
