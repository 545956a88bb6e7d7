// The package boundary: what other services import. Nothing here loads the worker, the simulator,
// fastify or OpenTelemetry: only bullmq, ioredis (peer dependencies) and zod.
export { TransferProducer, DEFAULT_SUBMIT_TIMEOUT_MS } from './producer.ts';
export type { ProducerOptions, EventsOptions, SubmitPayloadInput, PayloadIssue, TransferEvent } from './producer.ts';
export {
  ProducerError,
  InvalidPayloadError,
  ProducerUnavailableError,
  EnqueueError,
  WaitTimeoutError,
  ProducerClosedError,
} from './errors.ts';
export type { ProducerErrorCode, ProducerOperation } from './errors.ts';
export { jobIdFor, sequenceIdOfJobId, JOB_ID_PREFIX } from './job-id.ts';
export { submitPayloadSchema, parseSubmitPayload, SUBMIT_TRANSACTION } from './payload.ts';
export type { SubmitPayload } from './payload.ts';
export { SEQUENCE_ID, sequenceIdSchema } from './sequence-id.ts';
export * from './events.ts';
