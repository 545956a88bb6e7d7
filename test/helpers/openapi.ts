/**
 * The server's `/openapi.json`, fetched from a live server, and live answers checked against its
 * response schemas with ajv (draft 2020-12, the dialect of OpenAPI 3.1's schemas).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { expect } from 'vitest';

// The document's shape is what the checks read.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export class OpenApiDocument {
  readonly doc: Json;
  readonly #ajv: Ajv2020;
  readonly #compiled = new Map<string, ValidateFunction>();

  private constructor(doc: Json) {
    this.doc = doc;
    // Formats are not checked (ajv-formats is not a dependency); zod's date-times carry a pattern too.
    this.#ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    this.#ajv.addSchema({ $id: 'openapi.json', components: doc.components ?? {} });
  }

  static async fetch(base: string, headers: Record<string, string>): Promise<OpenApiDocument> {
    const response = await fetch(`${base}/openapi.json`, { headers });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    return new OpenApiDocument(await response.json());
  }

  /** The JSON schema of `method path`'s answer `status` (path as the document writes it: `/transfers/{sequenceId}`). */
  responseSchema(method: string, path: string, status: number): Json {
    const operation = this.doc.paths?.[path]?.[method.toLowerCase()];
    if (!operation) throw new Error(`${method} ${path} is not in the document`);
    const response = operation.responses?.[String(status)];
    if (!response) throw new Error(`${method} ${path} documents no ${status}`);
    const schema = response.content?.['application/json']?.schema;
    if (!schema) throw new Error(`${method} ${path} ${status} has no application/json schema`);
    return schema;
  }

  /** Compiles every schema of the document (a schema ajv cannot compile throws). */
  compileAll(): number {
    let compiled = 0;
    for (const [path, item] of Object.entries<Json>(this.doc.paths ?? {})) {
      for (const method of HTTP_METHODS) {
        for (const status of Object.keys(item[method]?.responses ?? {})) {
          this.#validator(method, path, Number(status));
          compiled++;
        }
      }
    }
    return compiled;
  }

  /** The document's path of a request's URL (`/api/v1/transfers/t-1?x=1` → `/api/v1/transfers/{sequenceId}`), literal paths first. */
  pathOf(url: string): string | undefined {
    const path = url.split('?')[0]!;
    const paths = Object.keys(this.doc.paths ?? {});
    if (paths.includes(path)) return path;
    return paths.find((template) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
  }

  /**
   * Fails the test, with ajv's errors, unless `body` is what the document says the request (`url`, its
   * query ignored) is answered with `status`.
   */
  expectAnswer(method: string, url: string, answer: { status: number; body: unknown }): void {
    const path = this.pathOf(url);
    if (path === undefined) throw new Error(`${method} ${url} is not in the document`);
    const validate = this.#validator(method.toLowerCase(), path, answer.status);
    const valid = validate(answer.body);
    expect(valid ? [] : validate.errors, `${method} ${path} ${answer.status}: ${JSON.stringify(answer.body).slice(0, 2_000)}`).toEqual([]);
  }

  #validator(method: string, path: string, status: number): ValidateFunction {
    const key = `${method} ${path} ${status}`;
    let validate = this.#compiled.get(key);
    if (!validate) {
      // Component references (#/components/schemas/…) resolve against the document.
      const schema = JSON.parse(
        JSON.stringify(this.responseSchema(method, path, status)).replaceAll('"#/components/', '"openapi.json#/components/'),
      );
      validate = this.#ajv.compile(schema);
      this.#compiled.set(key, validate);
    }
    return validate;
  }
}
