// What the worker package exports besides the producer package: the simulator, for users' staging.
export * from '../packages/producer/src/index.ts';
export { startSimulator } from './simulator/index.ts';
