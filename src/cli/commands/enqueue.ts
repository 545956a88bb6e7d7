import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { loadQueueConfig } from '../../config/config.ts';
import { parseSubmitPayload, SUBMIT_TRANSACTION, type SubmitPayloadInput } from '../../../packages/producer/src/payload.ts';
import { EnqueueError, InvalidPayloadError, ProducerUnavailableError, TransferProducer } from '../../../packages/producer/src/producer.ts';
import type { Command } from '../command.ts';
import { CliError, invalidInput } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';
import { withRedis } from '../redis-run.ts';

/** Above every valid job (1 MiB + 1.4 MiB + 1 MiB of transaction text, 4 KiB of metadata) with room for JSON. */
const MAX_INPUT_BYTES = 8 * 1024 * 1024;

export const enqueueCommand: Command = {
  name: 'enqueue',
  synopsis: 'enqueue [file|-]',
  summary: 'validate a submit-transaction job (JSON) and enqueue it; prints its job id',
  help: `Reads one job as JSON from <file>, or from stdin when no file or "-" is given, validates it with the
producer's schema (docs/contract.md section 3) and adds it to the submit-transaction queue with the
producer's job id rule, jobId = "transfer-" + halfSigned.sequenceId (BullMQ refuses integer-like ids,
so the sequenceId alone cannot be the id). Prints the job id. Enqueuing the same sequenceId again is
harmless: it is one transfer.
On invalid JSON or an invalid payload every issue is printed (path: message), nothing is enqueued,
and the exit code is 1.

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX and EVENTS_STREAM as the worker has them.

Examples:
  custody-worker enqueue job.json
  cat job.json | custody-worker enqueue --json`,
  options: {},
  positionals: { min: 0, max: 1, names: '[file|-]' },
  async run({ positionals, out, env, stdin }) {
    const config = loadQueueConfig(env);
    const source = positionals[0];
    const text = await readInput(source === undefined || source === '-' ? stdin : source);
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw invalidInput('INVALID_JSON', `input is not JSON: ${(error as Error).message}`);
    }
    // Checked before connecting: a bad job is refused even when Redis is down, and never reaches it.
    const parsed = parseSubmitPayload(data);
    if (!parsed.ok) throw invalidInput('INVALID_PAYLOAD', 'invalid submit-transaction payload, nothing enqueued', parsed.issues);

    const jobId = await withRedis(config.redis, out, async (redis) => {
      const producer = new TransferProducer({ connection: redis, prefix: config.queue.prefix, eventsStream: config.queue.eventsStream });
      try {
        // `data` is the JSON parseSubmitPayload accepted above; submit() validates it again.
        return await producer.submit(data as SubmitPayloadInput);
      } catch (error) {
        if (error instanceof InvalidPayloadError)
          throw invalidInput('INVALID_PAYLOAD', 'invalid submit-transaction payload, nothing enqueued', error.issues);
        if (error instanceof ProducerUnavailableError) throw new CliError('REDIS_ERROR', `redis: ${error.message}`, ExitCode.FAILURE);
        if (error instanceof EnqueueError) throw new CliError('ENQUEUE_FAILED', error.message, ExitCode.FAILURE);
        throw error;
      } finally {
        await producer.close();
      }
    });
    out.result({ jobId, sequenceId: parsed.payload.halfSigned.sequenceId, queue: SUBMIT_TRANSACTION }, () => jobId);
  },
};

/** The whole input as text, refusing more than MAX_INPUT_BYTES (a mistaken `enqueue /dev/zero` must not eat the memory). */
async function readInput(source: Readable | string): Promise<string> {
  const stream = typeof source === 'string' ? createReadStream(source) : source;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      size += buffer.length;
      if (size > MAX_INPUT_BYTES) throw invalidInput('INPUT_TOO_LARGE', `input is larger than ${MAX_INPUT_BYTES} bytes`);
      chunks.push(buffer);
    }
  } catch (error) {
    if (
      !(error instanceof CliError) &&
      error instanceof Error &&
      'code' in error &&
      typeof error.code === 'string' &&
      typeof source === 'string'
    ) {
      throw invalidInput('INPUT_UNREADABLE', `cannot read ${source}: ${error.code}`);
    }
    throw error;
  } finally {
    if (typeof source === 'string') stream.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}
