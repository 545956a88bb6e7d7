/**
 * The dashboard loads nothing from another host: an internal console must work offline and call out to
 * no third party. Every page Bull Board serves (its entry routes, read at run time from @bull-board/api)
 * and every stylesheet those pages link name no URL whose host is not the server's own.
 */
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_PATH, createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const require = createRequire(import.meta.url);
const { appRoutes } = require('@bull-board/api/dist/routes.js') as { appRoutes: { entryPoint: { route: string[] } } };

/** Absolute (`https://…`, `http://…`) and protocol-relative (`//host/…`) URLs in attributes, `url()` and `@import`. */
function urlsIn(text: string): string[] {
  const absolute = text.match(/\bhttps?:\/\/[^\s"'<>)]+/gi) ?? [];
  const protocolRelative = [...text.matchAll(/(?:(?:href|src|action)\s*=\s*["']?|url\(\s*["']?|@import\s+["'])(\/\/[^\s"'<>)]+)/gi)].map(
    (match) => match[1]!,
  );
  return [...absolute, ...protocolRelative];
}

/** The stylesheets a page links, resolved against its `<base href>`. */
function linkedStylesheets(html: string, pageUrl: string): string[] {
  const base = new URL(/<base\s+href="([^"]*)"/i.exec(html)?.[1] ?? pageUrl, pageUrl);
  return [...html.matchAll(/<link\b[^>]*>/gi)]
    .map((match) => match[0])
    .filter((tag) => /rel=["']?stylesheet/i.test(tag))
    .map((tag) => /href=["']([^"']+)["']/i.exec(tag)?.[1])
    .filter((href): href is string => href !== undefined)
    .map((href) => new URL(href, base).href);
}

describe('dashboard without third-party hosts', () => {
  let h: Harness;
  let server: FastifyInstance;
  let origin: string;
  beforeAll(async () => {
    h = await startHarness({ name: 'dashboard-offline', worker: false });
    await h.startWorker();
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    origin = new URL(await server.listen({ host: '127.0.0.1', port: 0 })).origin;
  });
  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  it('every dashboard page and the stylesheets it links name no host but the server (no Google Fonts)', async () => {
    const pages = appRoutes.entryPoint.route.map(
      (route) => `${origin}${DASHBOARD_PATH}${route.replace(':queueName', QueueName.SUBMIT).replace(':jobId', 'no-such-job')}`,
    );
    expect(pages.length).toBeGreaterThan(1);
    const foreign: string[] = [];
    let stylesheets = 0;
    for (const page of pages) {
      const response = await fetch(page);
      expect(response.status, page).toBe(200);
      expect(response.headers.get('content-type'), page).toMatch(/^text\/html/);
      const html = await response.text();
      expect(html, page).toContain('<div id="root">');
      for (const url of urlsIn(html)) if (new URL(url, origin).origin !== origin) foreign.push(`${page}: ${url}`);
      for (const sheet of linkedStylesheets(html, page)) {
        if (new URL(sheet).origin !== origin) {
          foreign.push(`${page}: stylesheet ${sheet}`);
          continue;
        }
        const css = await fetch(sheet);
        expect(css.status, sheet).toBe(200);
        stylesheets += 1;
        for (const url of urlsIn(await css.text())) if (new URL(url, origin).origin !== origin) foreign.push(`${sheet}: ${url}`);
      }
    }
    expect(foreign).toEqual([]);
    expect(stylesheets).toBeGreaterThanOrEqual(pages.length);
  });
});
