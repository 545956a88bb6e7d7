/**
 * What each fault kind of ../faults.ts answers when the BitGo simulator plays it: the same kinds and
 * meanings (a processed request whose answer is lost for 'timeout' and the 'accept-…' kinds; an
 * unprocessed one otherwise), in BitGo's error envelope.
 */
import { json } from '../http.ts';
import type { Answer } from '../http.ts';
import type { FaultKind } from '../settings.ts';
import { bitgoError } from './records.ts';
import type { BitgoEndpoint } from './settings.ts';

/** 200 bodies that parse but break docs/bitgo-api.md section 4: wrong types, missing fields. */
const SCHEMA_BREAKING: Record<BitgoEndpoint, unknown> = {
  sendTransaction: { transfer: { id: 12345, state: 7, sequenceId: null }, txid: 42, status: true },
  transferBySequenceId: { id: null, coin: 7, state: ['signed'], txid: 12345, sequenceId: 1 },
  getTransfer: { id: null, coin: 7, state: ['signed'], txid: 12345, sequenceId: 1 },
};

/** Truncated JSON: what a proxy cutting a body short would deliver. */
const MALFORMED: Record<BitgoEndpoint, string> = {
  sendTransaction: '{"transfer":{"id":"5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b","coin":"hteth","state":"sig',
  transferBySequenceId: '{"id":"5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b","coin":"hteth","txid":"0x4f3a',
  getTransfer: '{"id":"5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b","coin":"hteth","txid":"0x4f3a',
};

/** 401 as the simulator answers it; `x-auth-required: true` is what sdk-api reads as an invalid token. */
export function unauthorized(requestId: string): Answer {
  const answer = bitgoError(401, 'Unauthorized', 'unauthorized', requestId);
  return { ...answer, headers: { ...answer.headers, 'x-auth-required': 'true' } };
}

export function tooManyRequests(requestId: string, retryAfterSec: number): Answer {
  const answer = bitgoError(429, 'TooManyRequests', 'too many requests', requestId);
  if (retryAfterSec <= 0) return answer;
  return { ...answer, headers: { ...answer.headers, 'retry-after': String(Math.ceil(retryAfterSec)) } };
}

/** The answer of every kind but 'timeout', 'reset' and 'accept-reset', which send none. */
export function bitgoFaultAnswer(endpoint: BitgoEndpoint, kind: FaultKind, retryAfterSec: number, requestId: string): Answer {
  switch (kind) {
    case '5xx':
      return bitgoError(503, 'ServiceUnavailable', 'service temporarily unavailable (simulated)', requestId);
    case '429':
      return tooManyRequests(requestId, retryAfterSec);
    case '401':
      return unauthorized(requestId);
    case '400':
      return bitgoError(400, 'InvalidRequest', 'bad request (simulated)', requestId);
    case '404':
      return bitgoError(404, 'NotFound', 'not found (simulated)', requestId);
    case 'accept-504':
      return bitgoError(504, 'GatewayTimeout', 'gateway time-out (simulated)', requestId);
    case 'accept-500':
    case 'accept-408':
    case 'accept-520':
    case 'accept-522':
    case 'accept-524':
      // A proxy's error page is rarely JSON: the worker must not need a body to read the status.
      return { status: Number(kind.slice('accept-'.length)), body: '<html><body>origin error (simulated)</body></html>' };
    case 'malformed':
    case 'accept-malformed':
      return { status: 200, body: MALFORMED[endpoint] };
    case 'schema':
      return json(200, SCHEMA_BREAKING[endpoint]);
    case 'success-false':
    case 'timeout':
    case 'reset':
    case 'accept-reset':
      throw new Error(`fault ${kind} has no BitGo answer`);
  }
}
