/**
 * The dashboard as an operator sees it: Bull Board rendered by a real headless Chromium against the
 * worker's HTTP server (in-process worker, real Redis, real simulator), behind Basic auth. Leaves a
 * full-page screenshot in test-artifacts/dashboard.png. A job's personal data (metadata values not in
 * DASHBOARD_METADATA_KEYS, everything under travelRule) does not reach the page. Also: the real worker
 * process refuses to listen beyond loopback without dashboard credentials.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import { EX_CONFIG } from '../../src/config/config.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { startHarness, workerEnv, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { launchChromium } from '../helpers/browser.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { PROJECT_ROOT, killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';
import { QueueName } from '../../src/queues/names.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const USER = 'ops';
const PASSWORD = 'browser-dashboard-pass-456';
const QUEUES = ['submit-transaction', 'track-transfer', 'reconcile'];
const SCREENSHOT = join(PROJECT_ROOT, 'test-artifacts', 'dashboard.png');
/** Personal data in the third transfer's job: none of it may reach the page. */
const PLANTED = [
  'planted-email@example.test',
  'Planted Customer Name',
  'Planted Originator Name',
  'planted-originator-account',
  'planted-travel-rule-reference',
];

/** The page's visible text once `ready` holds for it (polled: the board renders after its API calls). */
async function waitForText(page: Page, ready: (text: string) => boolean, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await page.locator('body').innerText();
    if (ready(text)) return text;
    if (Date.now() > deadline) throw new Error(`the dashboard did not render within ${timeoutMs} ms; page text:\n${text}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('dashboard in headless Chromium', () => {
  let h: Harness | undefined;
  let server: FastifyInstance | undefined;
  let browser: Browser | undefined;
  let base: string;
  const personal = samplePayload({
    metadata: { orderId: 'A-1003', email: PLANTED[0], customerName: PLANTED[1] },
    travelRule: { reference: PLANTED[4], originator: { name: PLANTED[2], account: { number: PLANTED[3], verified: true } } },
  });

  beforeAll(async () => {
    // Never skipped: a system Chromium when there is one, else the one inside @sparticuz/chromium.
    h = await startHarness({
      name: 'dashboard-browser',
      env: { DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD, DASHBOARD_METADATA_KEYS: 'orderId' },
    });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });

    // Three transfers through to broadcast, so submit-transaction and track-transfer both hold jobs.
    const payloads = [samplePayload({ metadata: { orderId: 'A-1001' } }), samplePayload({ metadata: { orderId: 'A-1002' } })];
    for (const payload of payloads) await h.producer.submit(payload);
    // The third carries personal data. Added to the queue as given, the way a producer in another
    // language could: TransferProducer would drop the travelRule fields the schema does not name.
    await h.app!.queues[QueueName.SUBMIT].add(QueueName.SUBMIT, personal, { jobId: jobIdFor(personal.halfSigned.sequenceId) });
    for (const payload of [...payloads, personal]) await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);

    ({ browser } = await launchChromium());
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await h?.close();
  });

  it('renders every queue of the worker for an operator with the credentials', async () => {
    const context = await browser!.newContext({
      httpCredentials: { username: USER, password: PASSWORD },
      viewport: { width: 1280, height: 800 },
    });
    try {
      const page = await context.newPage();
      const response = await page.goto(`${base}/dashboard`, { waitUntil: 'domcontentloaded' });
      expect(response?.status()).toBe(200);
      // Bull Board is a React app: the names arrive after its API call, not in the HTML; then the
      // overview replaces its "Loading..." with one card per queue and its job count.
      const text = await waitForText(
        page,
        (body) => QUEUES.every((name) => body.includes(name)) && /\bJobs?\b/.test(body) && !body.includes('Loading'),
      );
      expect(text).toContain('custody worker');
      for (const name of QUEUES) expect(text).toContain(name);
      // Exactly the three transfers enqueued above, each with its one tracking job (fresh queue prefix).
      expect(text).toMatch(/submit-transaction\s+3 Jobs/);
      expect(text).toMatch(/track-transfer\s+3 Jobs/);
      expect(text).toMatch(/reconcile\s+\d+ Jobs?/);

      mkdirSync(join(PROJECT_ROOT, 'test-artifacts'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(statSync(SCREENSHOT).size).toBeGreaterThan(10_000);
    } finally {
      await context.close();
    }
  });

  it("shows a job's allow-listed metadata and nothing of its personal data", async () => {
    const context = await browser!.newContext({
      httpCredentials: { username: USER, password: PASSWORD },
      viewport: { width: 1280, height: 800 },
    });
    try {
      const jobId = jobIdFor(personal.halfSigned.sequenceId);
      // What Bull Board's own API hands the page, collapsed parts included: the job list and the job.
      for (const path of [
        `api/queues?activeQueue=${QueueName.SUBMIT}&status=completed&page=1`,
        `api/queues/${QueueName.SUBMIT}/${jobId}`,
      ]) {
        const answer = await context.request.get(`${base}/dashboard/${path}`);
        expect(answer.status(), path).toBe(200);
        const body = await answer.text();
        expect(body, path).toContain('A-1003');
        expect(body, path).toContain('[redacted]');
        for (const planted of PLANTED) expect(body, path).not.toContain(planted);
      }

      // The job's page, its Data tab, every collapsed level of the JSON expanded.
      const page = await context.newPage();
      const response = await page.goto(`${base}/dashboard/queue/${QueueName.SUBMIT}/${jobId}`, { waitUntil: 'domcontentloaded' });
      expect(response?.status()).toBe(200);
      await waitForText(page, (body) => body.includes(jobId) && body.includes('Data'));
      const dataTab = page.getByRole('tab', { name: 'Data' });
      await dataTab.click();
      expect(await dataTab.getAttribute('aria-selected')).toBe('true');
      await waitForText(page, (body) => body.includes('jobData'));
      const collapsed = page.locator('[aria-label="expand JSON"][aria-expanded="false"]');
      for (let clicks = 0; (await collapsed.count()) > 0; clicks++) {
        expect(clicks, 'collapsed JSON levels left to expand').toBeLessThan(50);
        await collapsed.first().click();
      }
      const text = await page.locator('body').innerText();
      expect(text).toContain('A-1003');
      expect(text).toContain('[redacted]');
      // The keys are there, so the levels holding the planted values were rendered: only the values went.
      for (const key of ['email:', 'customerName:', 'originator:', 'name:', 'number:', 'verified:']) expect(text).toContain(key);
      expect(text).toMatch(/email:\s*"\[redacted\]"/);
      expect(text).toMatch(/number:\s*"\[redacted\]"/);
      for (const planted of PLANTED) expect(text).not.toContain(planted);
      expect(await page.content()).not.toMatch(/[Pp]lanted/);
    } finally {
      await context.close();
    }
  });

  /**
   * Opens /dashboard in a fresh context and returns every answer the browser got for it. Chromium
   * (under Playwright) gives up on a Basic challenge it cannot answer with ERR_INVALID_AUTH_CREDENTIALS
   * instead of showing the 401 body, so the answers are read from the network, not from the page.
   */
  async function dashboardAnswers(httpCredentials?: { username: string; password: string }) {
    const context = await browser!.newContext(httpCredentials ? { httpCredentials } : {});
    try {
      const page = await context.newPage();
      const answers: Array<{ status: number; challenge: string | undefined }> = [];
      page.on('response', (response) => {
        if (new URL(response.url()).pathname === '/dashboard')
          answers.push({ status: response.status(), challenge: response.headers()['www-authenticate'] });
      });
      const navigation = await page.goto(`${base}/dashboard`).then(
        () => 'loaded',
        (error: Error) => error.message,
      );
      const text = await page
        .locator('body')
        .innerText()
        .catch(() => '');
      return { answers, navigation, text };
    } finally {
      await context.close();
    }
  }

  it('answers 401 with a Basic challenge to a browser without credentials', async () => {
    const { answers, navigation, text } = await dashboardAnswers();
    expect(answers.length).toBeGreaterThan(0);
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      expect(answer.challenge).toMatch(/^Basic realm=/);
    }
    // Either the navigation failed on the challenge or it shows the bare 401: never the board.
    if (navigation !== 'loaded') expect(navigation).toContain('ERR_INVALID_AUTH_CREDENTIALS');
    for (const name of QUEUES) expect(text).not.toContain(name);
  });

  it('answers 401 to a browser with a wrong password', async () => {
    const { answers, text } = await dashboardAnswers({ username: USER, password: `${PASSWORD}-wrong` });
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.map((answer) => answer.status).every((status) => status === 401)).toBe(true);
    for (const name of QUEUES) expect(text).not.toContain(name);
  });
});

describe('real worker process listening beyond loopback', { timeout: processesTimeout(1) }, () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ port: 0 });
  });
  afterEach(async () => {
    await killAllWorkers();
  });
  afterAll(async () => {
    await sim.close();
  });

  it('exits 78 naming DASHBOARD_USER and DASHBOARD_PASSWORD when HTTP_HOST=0.0.0.0 has no credentials', async () => {
    // Empty values count as unset, and override any the test process may carry.
    const worker = spawnWorker(
      workerEnv(sim, uniquePrefix('no-dashboard-auth'), { HTTP_HOST: '0.0.0.0', DASHBOARD_USER: '', DASHBOARD_PASSWORD: '' }),
    );
    const exit = await worker.waitForExit(PROCESS_MS);
    expect(exit).toEqual({ code: EX_CONFIG, signal: null });
    const lines = worker.output().split('\n');
    expect(lines.some((line) => /^\s*DASHBOARD_USER: required when HTTP_HOST is not a loopback address/.test(line))).toBe(true);
    expect(lines.some((line) => /^\s*DASHBOARD_PASSWORD: required when HTTP_HOST is not a loopback address/.test(line))).toBe(true);
    expect(worker.output()).not.toContain('worker started');
    expect(worker.output()).not.toContain(sim.clientSecret);
  });
});
