import { assertNever } from '../lib/assert-never.ts';
/**
 * What one answer to a sendTransaction request proves about that send (docs/contract.md, "What an
 * upstream answer proves"). Status codes are claims: a gateway or a provider may answer 500 after the
 * send was recorded, so only the answers listed as "not taken" prove that nothing happened.
 *
 * The table is SEND_PROOF_TABLE below, row by row in the contract's words with an example answer of
 * each kind; proofOfAnswer decides, and docs/events.md (`npm run docs`) renders each row with what
 * proofOfAnswer says about its examples.
 *
 * `conflict` means "accepted earlier" only when an earlier send of the same transfer may have been
 * processed; otherwise the sequenceId is in use upstream by a transaction we cannot claim
 * (classify-send.ts decides that with the transfer's record).
 */
export type SendProof = 'accepted' | 'not-taken' | 'rate-limited' | 'conflict' | 'maybe-processed';

/** The facts of one answer, as the HTTP client saw them. */
export type SendAnswer =
  /** The request never left: connection refused, DNS or TLS failure, a header refused before writing. */
  | { kind: 'never-written' }
  /** Written, then no complete answer: a time-out or a dropped connection. */
  | { kind: 'no-answer' }
  /** An HTTP status. For a 2xx, `body` says what it held; other statuses are judged by the code alone. */
  | { kind: 'status'; status: number; body?: 'record' | 'success-false' | 'unreadable' };

export function proofOfAnswer(answer: SendAnswer): SendProof {
  switch (answer.kind) {
    case 'never-written':
      return 'not-taken';
    case 'no-answer':
      return 'maybe-processed';
    case 'status':
      return proofOfStatus(answer.status, answer.body);
    default:
      return assertNever(answer, 'send answer');
  }
}

/**
 * The table's rows for an HTTP status. A 2xx without `body` is one whose body was not read (the caller
 * did not say): unreadable as far as this table knows.
 */
export function proofOfStatus(status: number, body?: 'record' | 'success-false' | 'unreadable'): SendProof {
  if (status >= 200 && status < 300) {
    if (body === 'record') return 'accepted';
    if (body === 'success-false') return 'not-taken';
    return 'maybe-processed';
  }
  if (status === 409) return 'conflict';
  if (status === 429) return 'rate-limited';
  if (status === 408) return 'maybe-processed';
  if (status === 503) return 'not-taken';
  if (status >= 400 && status < 500) return 'not-taken';
  return 'maybe-processed';
}

/**
 * The table in the contract's terms: each row says which answers it covers and gives examples of them.
 * What a row proves is not written here: it is what proofOfAnswer says about the row's examples (the
 * docs generator refuses a row whose examples disagree).
 */
export const SEND_PROOF_TABLE: readonly { answer: string; examples: readonly SendAnswer[] }[] = [
  {
    answer: '2xx with a readable record carrying our sequenceId',
    examples: [
      { kind: 'status', status: 200, body: 'record' },
      { kind: 'status', status: 201, body: 'record' },
    ],
  },
  {
    answer:
      '4xx other than 408, 409, 429; 2xx with `success: false`; 503; a request never written (refused connection, DNS/TLS, bad header)',
    examples: [
      { kind: 'status', status: 400 },
      { kind: 'status', status: 422 },
      { kind: 'status', status: 200, body: 'success-false' },
      { kind: 'status', status: 503 },
      { kind: 'never-written' },
    ],
  },
  {
    answer: '429 (or our own request budget, which never writes)',
    examples: [{ kind: 'status', status: 429 }],
  },
  {
    answer: '409',
    examples: [{ kind: 'status', status: 409 }],
  },
  {
    answer:
      'every other 5xx (500, 502, 504, 520-527, 598, 599 …), 408, 1xx/3xx, a time-out or dropped connection after writing, an unreadable 2xx',
    examples: [
      { kind: 'status', status: 500 },
      { kind: 'status', status: 502 },
      { kind: 'status', status: 504 },
      { kind: 'status', status: 524 },
      { kind: 'status', status: 599 },
      { kind: 'status', status: 408 },
      { kind: 'status', status: 102 },
      { kind: 'status', status: 302 },
      { kind: 'no-answer' },
      { kind: 'status', status: 200, body: 'unreadable' },
    ],
  },
];
