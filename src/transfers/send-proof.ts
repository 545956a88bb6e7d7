/**
 * What one answer to a sendTransaction request proves about that send (docs/contract.md, "What an
 * upstream answer proves"). Status codes are claims: a gateway or a provider may answer 500 after the
 * send was recorded, so only the answers listed as "not taken" prove that nothing happened.
 *
 * | answer                                                                  | proves            |
 * |-------------------------------------------------------------------------|-------------------|
 * | 2xx with a readable record carrying our sequenceId                      | accepted          |
 * | 4xx other than 408, 409, 429; 2xx with `success: false`; 503;           | not-taken         |
 * | a request never written (refused connection, DNS/TLS, bad header)       |                   |
 * | 429 (or our own request budget, which never writes)                     | rate-limited      |
 * | 409                                                                     | conflict          |
 * | every other 5xx (500, 502, 504, 520-527, 598, 599 …), 408, 1xx/3xx,     | maybe-processed   |
 * | a time-out or dropped connection after writing, an unreadable 2xx       |                   |
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
