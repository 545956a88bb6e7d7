/** Queue and job names (CONTRACT section 3): each queue's jobs carry the queue's name. */
export const QueueName = {
  SUBMIT: 'submit-transaction',
  TRACK: 'track-transfer',
  RECONCILE: 'reconcile',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/** The one tracking job of a transfer. BullMQ job ids may not contain ':'; sequenceIds never do. */
export function trackJobId(sequenceId: string): string {
  return `track-${sequenceId}`;
}
