/**
 * Issue 42: the timeline of GET /api/v1/transfers/:sequenceId lists every send attempt with what its
 * answer proved, and every lookup made to settle a send with what it found (the attempts list, written
 * by the transition that records each outcome). A real worker, Redis, simulator and HTTP server.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';
import { createLogger } from '../../src/logger.ts';
import type { FaultKind } from '../../src/simulator/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const PASSWORD = 'viewer-password-1';
const authorization = `Basic ${Buffer.from(`vera:${PASSWORD}`).toString('base64')}`;

let h: Harness;
let server: FastifyInstance;
let base: string;
/** The sequenceId timelineAfter submitted last. */
let lastSequenceId = '';

beforeAll(async () => {
  h = await startHarness({ name: 'attempts-timeline', env: { CONSOLE_USERS: `vera:viewer:${await hashSecret(PASSWORD)}` } });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

interface Item {
  at: string;
  source: string;
  kind: string;
  [detail: string]: unknown;
}

/** Submits one transfer whose first send meets `fault`, waits until it is submitted, and reads its timeline. */
async function timelineAfter(fault: FaultKind): Promise<Item[]> {
  h.sim.setFault('sendTransaction', { sequence: [fault] });
  const payload = samplePayload();
  const sequenceId = payload.halfSigned.sequenceId;
  lastSequenceId = sequenceId;
  await h.producer.submit(payload);
  const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted', 'transfer.failed']));
  expect(outcome.event).toBe('transfer.submitted');
  expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  const response = await fetch(`${base}/api/v1/transfers/${sequenceId}`, { headers: { authorization } });
  expect(response.status).toBe(200);
  const timeline = ((await response.json()) as { timeline: Item[] }).timeline;
  // Oldest first.
  expect(timeline.map((item) => item.at)).toEqual(timeline.map((item) => item.at).sort());
  return timeline;
}

const sendsAndLookups = (timeline: Item[]) => timeline.filter((item) => item.kind === 'send.attempt' || item.kind === 'lookup');

describe('the timeline of GET /api/v1/transfers/:sequenceId', () => {
  it('lists a send answered 503 (not taken), the lookup before the resend, and the accepted resend, in order', async () => {
    const timeline = await timelineAfter('5xx');
    expect(sendsAndLookups(timeline)).toEqual([
      expect.objectContaining({ source: 'worker', kind: 'send.attempt', outcome: 'retry', proof: 'not-taken', httpStatus: 503 }),
      expect.objectContaining({ source: 'provider', kind: 'lookup', finding: 'absent' }),
      expect.objectContaining({ source: 'worker', kind: 'send.attempt', outcome: 'accepted', proof: 'accepted' }),
    ]);
    const kinds = timeline.map((item) => item.kind);
    // The list covers every send: no summary item; the accepted send comes before the event it led to.
    expect(kinds).not.toContain('send.first');
    expect(kinds.lastIndexOf('send.attempt')).toBeLessThan(kinds.indexOf('transfer.submitted'));
    // The console's detail page lists the same, in its sends and lookups table.
    const page = await fetch(`${base}/console/transfers/${lastSequenceId}`, { headers: { authorization } });
    expect(page.status).toBe(200);
    const html = await page.text();
    const table = html.slice(html.indexOf('<table class="attempts">'), html.indexOf('</table>', html.indexOf('<table class="attempts">')));
    const rows = [...table.matchAll(/<tr><td>.*?<\/tr>/g)].map((row) =>
      row[0]
        .replace(/<[^>]+>/g, ' ')
        .split(/\s+/)
        .filter(Boolean)
        .slice(1),
    );
    expect(rows).toEqual([
      ['send', 'retry', 'not-taken', '503', 'CUSTODY_UNAVAILABLE'],
      ['lookup', 'absent'],
      ['send', 'accepted', 'accepted'],
    ]);
  });

  it('lists a send whose answer proved nothing (500 after processing) and the lookup that found it', async () => {
    const timeline = await timelineAfter('accept-500');
    expect(sendsAndLookups(timeline)).toEqual([
      expect.objectContaining({ source: 'worker', kind: 'send.attempt', outcome: 'unknown', proof: 'maybe-processed', httpStatus: 500 }),
      expect.objectContaining({ source: 'provider', kind: 'lookup', finding: 'found' }),
    ]);
    expect(timeline.map((item) => item.kind)).toContain('send.outcome-unknown');
  });
});
