// The package boundary: what other services import.
export { TransferProducer, InvalidPayloadError, WaitTimeoutError } from './producer.ts';
export type { ProducerOptions, SubmitPayloadInput, PayloadIssue, TransferEvent } from './producer.ts';
export { submitPayloadSchema, parseSubmitPayload } from './jobs/submit-transaction/payload.ts';
export { EVENT_TYPES, TERMINAL_EVENTS, parseStreamEntry } from './events/events.ts';
export type { EventType } from './events/events.ts';
export { startSimulator } from './simulator/index.ts';
