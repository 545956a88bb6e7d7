// The package boundary: what other services import. Nothing here loads the worker, the simulator,
// fastify or OpenTelemetry.
export { TransferProducer, InvalidPayloadError, WaitTimeoutError } from './producer.ts';
export type { ProducerOptions, SubmitPayloadInput, PayloadIssue, TransferEvent } from './producer.ts';
export { submitPayloadSchema, parseSubmitPayload, SUBMIT_TRANSACTION } from './payload.ts';
export { SEQUENCE_ID, sequenceIdSchema } from './sequence-id.ts';
export { EVENT_TYPES, TERMINAL_EVENTS, parseStreamEntry } from './events.ts';
export type { EventType } from './events.ts';
