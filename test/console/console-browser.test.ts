/**
 * The operator console (/console) in a real headless Chromium against the worker's HTTP server
 * (in-process worker, real Redis, real simulator), with a console operator and a viewer signing in
 * with Basic auth: a transfer the simulator leaves unresolved appears under "needs attention" without
 * a reload, an operator resolves it from its page (behind the dialog, and without script through the
 * form itself), a viewer sees no action and a POST forged with a viewer's credentials is 403 (audited
 * as forbidden), a POST without the CSRF token is 403, and the browser never asks any address but
 * loopback. With SCREENSHOTS=1 (`npm run screenshots`) it also writes docs/images/console-*.png.
 */
import { mkdirSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLoopback } from '../../src/config/config.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { launchChromium } from '../helpers/browser.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { strandTransfer } from '../helpers/strand.ts';
import { until } from '../helpers/wait.ts';
import { PROJECT_ROOT } from '../helpers/worker-process.ts';

const OPERATOR = { username: 'olivia', password: 'console-operator-pass-1' };
const VIEWER = { username: 'victor', password: 'console-viewer-pass-2' };
const REASON = 'provider console shows it, ticket OPS-9001';
const SCREENSHOTS = process.env.SCREENSHOTS === '1' ? join(PROJECT_ROOT, 'docs', 'images') : join(PROJECT_ROOT, 'test-artifacts');

let h: Harness;
let server: FastifyInstance;
let browser: Browser;
let base: string;
/** Requests the browser made, by where they went: every one is routed through `guard`. */
const requests = { loopback: 0, elsewhere: [] as string[] };
let unresolved: string;

/** A context for `user`, with every request routed: loopback goes on, anything else is aborted and counted. */
async function contextFor(user: { username: string; password: string }, javaScriptEnabled = true): Promise<BrowserContext> {
  const context = await browser.newContext({ httpCredentials: user, javaScriptEnabled, viewport: { width: 1280, height: 900 } });
  await context.route('**/*', (route) => {
    const host = new URL(route.request().url()).hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) !== 0 && isLoopback(host)) {
      requests.loopback++;
      return route.continue();
    }
    requests.elsewhere.push(route.request().url());
    return route.abort('blockedbyclient');
  });
  return context;
}

async function auditOf(sequenceId: string): Promise<Array<Record<string, string>>> {
  const entries = await h.redis.xrange(createKeys(h.prefix, h.config.queue.eventsStream).audit, '-', '+');
  return entries
    .map(
      ([, flat]) => Object.fromEntries(flat.flatMap((_, i) => (i % 2 === 0 ? [[flat[i]!, flat[i + 1]!]] : []))) as Record<string, string>,
    )
    .filter((entry) => entry.sequenceId === sequenceId);
}

beforeAll(async () => {
  const users = [
    `${OPERATOR.username}:operator:${await hashSecret(OPERATOR.password)}`,
    `${VIEWER.username}:viewer:${await hashSecret(VIEWER.password)}`,
  ].join(',');
  // Two sends at most, and an unknown outcome is announced after 300 ms.
  h = await startHarness({ name: 'console-browser', env: { CONSOLE_USERS: users, SUBMIT_ATTEMPTS: '2', UNRESOLVED_AFTER: '300' } });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
  ({ browser } = await launchChromium());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await h?.close();
});

describe('operator console in headless Chromium', { timeout: 60_000 }, () => {
  it('shows a transfer the simulator left unresolved under "needs attention" without a reload', async () => {
    const context = await contextFor(OPERATOR);
    try {
      const page = await context.newPage();
      const response = await page.goto(`${base}/console`);
      expect(response?.status()).toBe(200);
      const csp = response!.headers()['content-security-policy'] ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      await expect.poll(() => page.locator('[data-live="status"]').innerText(), { timeout: 10_000 }).toContain('Updated live');
      // Marks this document: a reload would lose the mark.
      await page.locator('body').evaluate((body) => body.setAttribute('data-test-mark', 'same-document'));

      // Every send is processed upstream and answered by a dropped connection; no lookup shows it.
      h.sim.setFault('sendTransaction', { probability: 1, kinds: ['accept-reset'] });
      h.sim.updateSettings({ visibleAfterMs: 3_600_000 });
      const payload = samplePayload();
      unresolved = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);

      const row = page.locator('[data-live="attention"] tr', { hasText: unresolved });
      await row.waitFor({ timeout: 30_000 });
      expect(await row.innerText()).toContain('unresolved');
      expect(await page.locator('body').getAttribute('data-test-mark')).toBe('same-document');
      expect((await h.eventsOf(unresolved)).map((event) => event.event)).toEqual(['transfer.unresolved']);
      await page.screenshot({ path: join(SCREENSHOTS, 'console-home.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });

  it('lets an operator resolve it from its page behind the dialog: the outcome and the action in the timeline', async () => {
    // Only the operator acts on it from here: no runner holds its lease.
    await h.app!.workers.find((worker) => worker.name === QueueName.SUBMIT)!.pause();
    await until(
      'lease released',
      10_000,
      async () => ((await h.app!.ledger.get(unresolved))?.leaseOwner === undefined ? true : undefined),
      50,
    );
    const context = await contextFor(OPERATOR);
    try {
      const page = await context.newPage();
      await page.goto(`${base}/console`);
      await page.getByRole('link', { name: unresolved }).click();
      await page.waitForURL(`**/console/transfers/${unresolved}`);
      expect(await page.locator('.stage-branch').innerText()).toContain('unresolved');
      await page.screenshot({ path: join(SCREENSHOTS, 'console-detail.png'), fullPage: true });

      // The provider shows the transfer now; the operator has its txid from the provider's console.
      h.sim.updateSettings({ visibleAfterMs: 0 });
      h.sim.setTxid(unresolved);
      const txid = h.sim.transfer(unresolved)!.txid;
      const resolveAs = async (given: string) => {
        await page.getByLabel(/^txid/).fill(given);
        await page.getByRole('button', { name: 'Resolve as submitted' }).click();
        const dialog = page.getByRole('dialog');
        expect(await dialog.innerText()).toContain(unresolved);
        await dialog.getByLabel('Reason').fill(REASON);
        await dialog.getByRole('button', { name: `Confirm resolve as submitted of ${unresolved}` }).click();
      };
      // A txid the provider does not confirm for this transfer: refused, audited, nothing changed.
      await resolveAs(`0x${'ab'.repeat(32)}`);
      await page.waitForURL(/outcome=provider-disagrees/);
      expect(await page.locator('[data-field="state"]').innerText()).toBe('submitting');
      await resolveAs(txid);
      await page.waitForURL(/outcome=resolved/);

      expect(await page.locator('[data-outcome]').innerText()).toBe('resolve: resolved');
      // Submitted, and tracked from there: the provider shows the txid already, so it may be broadcast by now.
      expect(await page.locator('[data-field="state"]').innerText()).toMatch(/^(submitted|broadcast)$/);
      const audit = await page.locator('table.audit tbody').innerText();
      expect(audit).toContain(`${OPERATOR.username} (operator)`);
      expect(audit).toMatch(/console\s+resolve\s+resolved\s+provider console shows it/);
      expect(await page.locator('table.events tbody').innerText()).toContain('transfer.submitted');
      expect(await page.getByRole('button', { name: /Resolve/ }).count()).toBe(0);
      const entry = { user: OPERATOR.username, role: 'operator', via: 'console', action: 'resolve', reason: REASON };
      expect(await auditOf(unresolved)).toEqual([
        expect.objectContaining({ ...entry, outcome: 'provider-disagrees' }),
        expect.objectContaining({ ...entry, outcome: 'resolved' }),
      ]);
    } finally {
      await context.close();
    }
  });

  it('shows a viewer no action, and answers a POST forged with its credentials 403, audited as forbidden', async () => {
    const stranded = await strandTransfer(h.app!.ledger, { unresolved: true });
    const operator = await contextFor(OPERATOR);
    const viewer = await contextFor(VIEWER);
    try {
      const operatorPage = await operator.newPage();
      await operatorPage.goto(`${base}/console/transfers/${stranded}`);
      expect(await operatorPage.locator('form[method="post"]').count()).toBe(2);

      const page = await viewer.newPage();
      expect((await page.goto(`${base}/console/transfers/${stranded}`))?.status()).toBe(200);
      expect(await page.locator('[data-field="state"]').innerText()).toBe('submitting');
      expect(await page.locator('form[method="post"]').count()).toBe(0);
      expect(await page.getByRole('button').count()).toBe(0);

      // The viewer's own valid CSRF token and cookie: only the role refuses it.
      const token = await page.locator('meta[name="csrf-token"]').getAttribute('content');
      const forged = await viewer.request.post(`${base}/console/transfers/${stranded}/resolve`, {
        form: { _csrf: token!, outcome: 'not-sent', reason: 'forged by a viewer', confirm: stranded },
        maxRedirects: 0,
      });
      expect(forged.status()).toBe(403);
      expect((await h.app!.ledger.get(stranded))?.state).toBe('submitting');
      expect(await auditOf(stranded)).toEqual([
        expect.objectContaining({ user: VIEWER.username, role: 'viewer', via: 'console', action: 'resolve', outcome: 'forbidden' }),
      ]);
    } finally {
      await operator.close();
      await viewer.close();
    }
  });

  it('answers a POST without the CSRF token 403, and one with it acts (the form itself, without script)', async () => {
    const stranded = await strandTransfer(h.app!.ledger, { unresolved: true });
    const context = await contextFor(OPERATOR, false);
    try {
      const page = await context.newPage();
      await page.goto(`${base}/console/transfers/${stranded}`);
      const form = { outcome: 'not-sent', reason: REASON, confirm: stranded };
      for (const extra of [{}, { _csrf: 'not-a-token' }] as Array<Record<string, string>>) {
        const answer = await context.request.post(`${base}/console/transfers/${stranded}/resolve`, {
          form: { ...form, ...extra },
          maxRedirects: 0,
        });
        expect(answer.status()).toBe(403);
      }
      expect((await h.app!.ledger.get(stranded))?.state).toBe('submitting');
      expect(await auditOf(stranded)).toEqual([]);

      // Without script the form asks for the reason and the sequenceId typed again.
      const notSent = page.locator('form', { hasText: 'never sent' });
      await notSent.getByLabel('Reason').fill(REASON);
      await notSent.getByLabel('Type the sequenceId to confirm').fill(stranded);
      await notSent.getByRole('button', { name: 'Resolve as not sent' }).click();
      await page.waitForURL(/outcome=resolved/);
      expect(await page.locator('[data-field="state"]').innerText()).toBe('failed');
      expect(await page.locator('table.events tbody').innerText()).toContain('OPERATOR_RESOLVED');
    } finally {
      await context.close();
    }
  });

  it('made every request of the browser to loopback', () => {
    expect(requests.loopback).toBeGreaterThan(10);
    expect(requests.elsewhere).toEqual([]);
  });
});

mkdirSync(SCREENSHOTS, { recursive: true });
