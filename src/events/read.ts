export { readTransferEvents } from '../../packages/producer/src/read.ts';
