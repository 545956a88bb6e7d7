import { loadQueueConfig } from '../../config/config.ts';
import { parseStreamEntry, type TransferEvent } from '../../../packages/producer/src/events.ts';
import type { RedisClient } from '../../redis.ts';
import { stringOption, type Command } from '../command.ts';
import { usageError } from '../errors.ts';
import { eventLine } from '../format.ts';
import type { Output } from '../output.ts';
import { withRedis } from '../redis-run.ts';

/** Entries per XRANGE/XREAD: a long stream is paged, never loaded whole. */
const PAGE = 500;
/** Longest single XREAD BLOCK; a signal ends the wait at once anyway (the connection is dropped). */
const BLOCK_MS = 5_000;
const STREAM_ID = /^\d+(-\d+)?$/;

type Entry = [string, string[]];

export const eventsCommand: Command = {
  name: 'events',
  synopsis: 'events [--follow] [--from ID] [--count N]',
  summary: 'the events stream; --follow waits for new events until stopped',
  help: `Reads the events stream (EVENTS_STREAM), oldest first, one line per event (--json: one JSON object
per line, the fields of docs/contract.md section 4 with data and metadata parsed, plus the stream id).

Options:
  --follow      keep waiting for new events (XREAD BLOCK) until SIGINT/SIGTERM, then exit 0
  --from ID     only events after stream id ID (exclusive, like XREAD: pass the last id you saw to
                resume); default: the beginning, or only new events ("$") with --follow
  --count N     stop after N events (default: all; with --follow: until stopped)

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX and EVENTS_STREAM as the worker has them.

Examples:
  custody-worker events --count 20
  custody-worker events --follow --json | jq -c 'select(.event == "transfer.failed")'
  custody-worker events --from 1718000000000-0`,
  options: {
    follow: { type: 'boolean' },
    from: { type: 'string' },
    count: { type: 'string' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, out, env }) {
    const follow = values.follow === true;
    const from = stringOption(values, 'from');
    const countText = stringOption(values, 'count');
    if (from !== undefined && !STREAM_ID.test(from) && !(follow && from === '$')) {
      throw usageError(
        follow
          ? '--from must be a stream id such as 1718000000000-0, 0 or $'
          : '--from must be a stream id such as 1718000000000-0 or 0 ($ needs --follow)',
      );
    }
    if (countText !== undefined && !/^[1-9]\d{0,8}$/.test(countText)) throw usageError('--count must be a whole number from 1');
    const limit = countText === undefined ? Infinity : Number(countText);
    const config = loadQueueConfig(env);
    const stream = config.queue.eventsStream;

    await withRedis(config.redis, out, async (redis) => {
      if (follow) await followStream(redis, stream, from ?? '$', limit, out);
      else await readStream(redis, stream, from, limit, out);
    });
  },
};

async function readStream(redis: RedisClient, stream: string, from: string | undefined, limit: number, out: Output): Promise<void> {
  let start = from === undefined ? '-' : `(${from}`;
  let printed = 0;
  while (printed < limit && !out.closed) {
    const want = Math.min(PAGE, limit - printed);
    const entries = (await redis.xrange(stream, start, '+', 'COUNT', want)) as Entry[];
    for (const entry of entries) printEntry(entry, out);
    printed += entries.length;
    if (entries.length < want) return;
    start = `(${entries[entries.length - 1]![0]}`;
  }
}

/**
 * XREAD BLOCK from the cursor until a signal. `$` is turned into the stream's last id once, at the
 * start: passed to every XREAD it would skip what arrives between two calls.
 */
async function followStream(redis: RedisClient, stream: string, from: string, limit: number, out: Output): Promise<void> {
  let stopping = false;
  const stop = () => {
    stopping = true;
    // Ends a pending XREAD BLOCK now instead of after up to BLOCK_MS.
    redis.disconnect();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    let cursor = from;
    if (cursor === '$') {
      const last = (await redis.xrevrange(stream, '+', '-', 'COUNT', 1)) as Entry[];
      cursor = last[0]?.[0] ?? '0-0';
    }
    out.notice(`following ${stream} after ${cursor} (Ctrl-C to stop)`);
    let printed = 0;
    while (!stopping && !out.closed && printed < limit) {
      const reply = (await redis.xread('COUNT', Math.min(PAGE, limit - printed), 'BLOCK', BLOCK_MS, 'STREAMS', stream, cursor)) as Array<
        [string, Entry[]]
      > | null;
      for (const [, entries] of reply ?? []) {
        for (const entry of entries) {
          cursor = entry[0];
          printEntry(entry, out);
          printed += 1;
        }
      }
    }
  } catch (error) {
    // The dropped connection's "Connection is closed" after a signal is the normal way out.
    if (!stopping) throw error;
  } finally {
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
  }
}

function printEntry(entry: Entry, out: Output): void {
  let event: TransferEvent;
  try {
    event = parseStreamEntry(entry);
  } catch {
    // Not one of ours (someone else wrote to the stream): say so and go on, the rest is still worth reading.
    out.notice(`skipped stream entry ${entry[0]}: not a transfer event`);
    return;
  }
  out.result(event, eventLine);
}
