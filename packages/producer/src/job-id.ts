import { InvalidPayloadError } from './errors.ts';
import { SEQUENCE_ID } from './sequence-id.ts';

/**
 * The job id rule (docs/contract.md section 3 leaves the job id to the producer):
 *
 *     jobId = "transfer-" + sequenceId
 *
 * BullMQ refuses job ids that read as integers (`"1234567"`, `"-5"`: "Custom Id cannot be integers")
 * and ids with a `:`. A sequenceId is 1–128 of `[A-Za-z0-9_-]`, so with the prefix the id never reads
 * as an integer and never holds a `:`, for every valid sequenceId. The worker does not depend on it
 * (one sequenceId is one transfer under any job ids); the rule only makes adding the same transfer
 * twice from any producer (Node or the Python example) a BullMQ no-op.
 */
export const JOB_ID_PREFIX = 'transfer-';

/** The job id the producer uses for a sequenceId; throws InvalidPayloadError for an invalid sequenceId. */
export function jobIdFor(sequenceId: string): string {
  if (typeof sequenceId !== 'string' || !SEQUENCE_ID.test(sequenceId)) {
    throw new InvalidPayloadError([{ path: 'halfSigned.sequenceId', message: 'must be 1-128 of A-Z a-z 0-9 _ -' }]);
  }
  return JOB_ID_PREFIX + sequenceId;
}

/** The sequenceId a job id made by jobIdFor stands for, or undefined for any other job id. */
export function sequenceIdOfJobId(jobId: string): string | undefined {
  if (!jobId.startsWith(JOB_ID_PREFIX)) return undefined;
  const sequenceId = jobId.slice(JOB_ID_PREFIX.length);
  return SEQUENCE_ID.test(sequenceId) ? sequenceId : undefined;
}
