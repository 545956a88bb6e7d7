// The events contract's one source of truth is the producer package (CONTRACT sections 4 and 8).
export * from '../../packages/producer/src/events.ts';
