import { EX_CONFIG } from '../config/config.ts';

/**
 * The CLI's exit codes, one meaning each, so scripts can branch on them. 78 is the worker's own
 * configuration exit code (EX_CONFIG), so a bad environment reads the same for both.
 */
export const ExitCode = {
  OK: 0,
  /**
   * Invalid input (enqueue), a custody error, a Redis error, NOT_REPLICATED (a write too few replicas
   * acknowledged: run the command again), anything unexpected.
   */
  FAILURE: 1,
  /** Unknown command or option, missing or malformed argument. */
  USAGE: 2,
  /** Unknown transfer, webhook endpoint or stream entry, or the custody API answered 404. */
  NOT_FOUND: 3,
  /**
   * The state does not allow the operation now (resolve: not in submitting, or a live send lease;
   * ledger accept-epoch: the ledger has no epoch; cancel: too late, a send may have been processed;
   * webhooks replay --id: the endpoint does not receive that event's type).
   * Nothing was changed.
   */
  REFUSED: 4,
  /** The transfer had already ended (cancel: its terminal state is printed). Nothing was changed. */
  ENDED: 5,
  CONFIG: EX_CONFIG,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
