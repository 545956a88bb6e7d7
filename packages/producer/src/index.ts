// The package boundary: what other services import. Nothing here loads the worker, the simulator,
// fastify or OpenTelemetry: only bullmq, ioredis (peer dependencies) and zod.
// producer.ts re-exports its errors, the job id rule and the types it takes and gives.
export * from './producer.ts';
export { submitPayloadSchema, parseSubmitPayload, SUBMIT_TRANSACTION } from './payload.ts';
export type { SubmitPayload } from './payload.ts';
export { SEQUENCE_ID, sequenceIdSchema } from './sequence-id.ts';
export * from './events.ts';
export * from './consumer.ts';
export * from './webhook.ts';
