// The typed producer lives in its own package (packages/producer); the worker's tests use it from source.
export * from '../packages/producer/src/producer.ts';
