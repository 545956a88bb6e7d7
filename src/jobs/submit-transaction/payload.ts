// The job payload's one source of truth is the producer package (CONTRACT section 8): the worker
// validates with exactly the schema producers validate with.
export * from '../../../packages/producer/src/payload.ts';
