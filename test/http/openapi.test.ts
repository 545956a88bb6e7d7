/**
 * `GET /openapi.json` (src/http/openapi.ts) from a real server on 127.0.0.1 with Redis and the
 * simulator: an OpenAPI 3.1 document of every route of src/http/, each answer's schema compiling under
 * draft 2020-12, a viewer's like every route but the open ones. The answers themselves are checked
 * against it where the routes are tested (api-v1.test.ts, submit.test.ts).
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';
import { createLogger } from '../../src/logger.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { HTTP_METHODS, OpenApiDocument } from '../helpers/openapi.ts';

const PASSWORD = 'viewer-password-1';
const viewer = { authorization: `Basic ${Buffer.from(`vera:${PASSWORD}`).toString('base64')}` };

let h: Harness;
let server: FastifyInstance;
let base: string;

beforeAll(async () => {
  const env = {
    CONSOLE_USERS: `vera:viewer:${await hashSecret(PASSWORD)}`,
    SUBMIT_API_KEYS: `billing:${await hashSecret('sk_test_key_0123456789')}`,
  };
  h = await startHarness({ name: 'openapi', env });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const ROUTES = [
  'get /healthz',
  'get /readyz',
  'get /transfers/{sequenceId}',
  'post /transfers/{sequenceId}/cancel',
  'get /api/v1/transfers',
  'post /api/v1/transfers',
  'get /api/v1/transfers/{sequenceId}',
  'get /api/v1/summary',
  'get /api/v1/audit',
  'post /api/v1/transfers/{sequenceId}/cancel',
  'post /api/v1/transfers/{sequenceId}/resolve',
  'post /api/v1/transfers/{sequenceId}/recheck',
  'post /api/v1/ledger/accept-epoch',
];

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3.1 document of the routes of src/http/, every answer schema compiling', async () => {
    const document = await OpenApiDocument.fetch(base, viewer);
    const doc = document.doc;
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toEqual(expect.objectContaining({ title: expect.any(String), version: expect.any(String) }));
    // OpenAPI 3.1's top level: these fields and extensions only.
    for (const key of Object.keys(doc)) {
      expect([
        'openapi',
        'info',
        'jsonSchemaDialect',
        'servers',
        'paths',
        'webhooks',
        'components',
        'security',
        'tags',
        'externalDocs',
      ]).toContain(key);
    }
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      HTTP_METHODS.filter((method) => item[method] !== undefined).map((method) => `${method} ${path}`),
    );
    expect(operations.sort()).toEqual([...ROUTES].sort());
    for (const operation of operations) {
      const [method, path] = operation.split(' ') as [string, string];
      const { responses, parameters = [] } = doc.paths[path][method];
      expect(Object.keys(responses).length, operation).toBeGreaterThan(0);
      for (const [status, response] of Object.entries<{ description?: unknown }>(responses)) {
        expect(status, operation).toMatch(/^[1-5]\d\d$/);
        expect(typeof response.description, `${operation} ${status}`).toBe('string');
      }
      // Every path template's parameter is declared, in: path and required.
      for (const name of path.match(/(?<=\{)[^}]+(?=\})/g) ?? []) {
        expect(parameters, operation).toContainEqual(expect.objectContaining({ name, in: 'path', required: true }));
      }
    }
    expect(doc.paths['/api/v1/transfers'].post.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['walletId', 'coin', 'halfSigned']),
    );
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/api/v1/transfers'].post.security).toEqual([{ submitKey: [] }]);
    expect(document.compileAll()).toBeGreaterThan(ROUTES.length);
  });

  it("is a viewer's, like the route map it describes: 401 without an identity", async () => {
    const response = await fetch(`${base}/openapi.json`);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Basic /);
  });

  it('documents without validating: a route still answers its own refusals', async () => {
    const bad = await fetch(`${base}/api/v1/transfers?limit=201`, { headers: viewer });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'INVALID_QUERY', issues: [expect.objectContaining({ path: 'limit' })] });
    const badId = await fetch(`${base}/transfers/${'x'.repeat(129)}`, { headers: viewer });
    expect(badId.status).toBe(400);
    expect(await badId.json()).toMatchObject({ error: 'INVALID_SEQUENCE_ID' });
  });
});
