import { z } from 'zod';
import { TERMINAL_STATES, TRANSFER_STATES } from './catalog.ts';

/**
 * What `TransferProducer.cancel()` resolves with (and the worker's CLI and HTTP cancel answer with), as
 * a schema: `schemas/cancel-result.schema.json` is generated from it for other languages. The type the
 * package's TypeScript uses is CancelResult (transition.ts); a test checks the two agree.
 */
export const cancelResultSchema = z
  .discriminatedUnion('outcome', [
    z.looseObject({
      outcome: z.literal('cancelled'),
      state: z.literal('cancelled'),
      version: z.number().int().positive().meta({ description: 'The version of the transfer.cancelled event published' }),
      streamId: z.string().min(1).meta({ description: 'The events stream id of transfer.cancelled' }),
    }),
    z.looseObject({
      outcome: z.literal('too-late'),
      state: z.enum(['-', ...TRANSFER_STATES]).meta({ description: 'The transfer state as it stands ("-": no record)' }),
      ledger: z
        .literal('no-epoch-or-recovering')
        .optional()
        .meta({ description: 'Present when the ledger has no epoch or recovers from a loss, so it cannot vouch that no send was made' }),
    }),
    z.looseObject({
      outcome: z.literal('already-ended'),
      state: z.enum(TERMINAL_STATES).meta({ description: 'The terminal state the transfer had ended in (cancelled for a second cancel)' }),
      version: z.number().int().positive().optional().meta({ description: 'Its last version, when only the tombstone was left' }),
    }),
  ])
  .meta({
    title: 'cancel result',
    description:
      'The answer to a cancel: cancelled (transfer.cancelled was published; nothing was or ever will be sent for this sequenceId), too-late (a send was in flight at least once, or the ledger cannot vouch that none was: nothing changed) or already-ended (nothing changed). Objects are open.',
  });
