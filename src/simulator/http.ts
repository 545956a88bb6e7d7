/** HTTP plumbing of the simulator's server: reading a bounded body, writing JSON answers. */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** txHex may be 1 MiB and txBase64 1.4 MiB (docs/contract.md section 3), both in one body. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface Answer {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

export function json(status: number, value: unknown, headers?: Record<string, string>): Answer {
  return headers ? { status, body: JSON.stringify(value), headers } : { status, body: JSON.stringify(value) };
}

export function failure(status: number, message: string): Answer {
  return json(status, { success: false, message });
}

export function write(res: ServerResponse, answer: Answer): void {
  if (res.destroyed) return;
  res.writeHead(answer.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(answer.body),
    ...answer.headers,
  });
  res.end(answer.body);
}

export function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

export type Parsed = { ok: true; value: unknown } | { ok: false };

export function parseJson(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function nonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

/** tooLarge false: the client went away before the body was complete; nothing to answer. */
export type BodyResult = { ok: true; text: string } | { ok: false; tooLarge: boolean };

export function readBody(req: IncomingMessage): Promise<BodyResult> {
  return new Promise((resolve) => {
    let text = '';
    let size = 0;
    let settled = false;
    const settle = (result: BodyResult): void => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      if (settled) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) settle({ ok: false, tooLarge: true });
      else text += chunk;
    });
    req.on('end', () => settle({ ok: true, text }));
    req.on('error', () => settle({ ok: false, tooLarge: false }));
    req.on('close', () => settle({ ok: false, tooLarge: false }));
  });
}
