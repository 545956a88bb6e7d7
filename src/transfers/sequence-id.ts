export { SEQUENCE_ID, sequenceIdSchema } from '../../packages/producer/src/sequence-id.ts';
