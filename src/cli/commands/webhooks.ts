import { parseStreamEntry, type TransferEvent } from '../../../packages/producer/src/events.ts';
import { loadWebhookConfig } from '../../config/config.ts';
import type { RedisClient } from '../../redis.ts';
import type { WebhookEndpoint } from '../../webhooks/endpoints.ts';
import { queuedEvent } from '../../webhooks/message.ts';
import { EndpointStore } from '../../webhooks/store.ts';
import { stringOption, type Command } from '../command.ts';
import { notFound, refused, usageError } from '../errors.ts';
import { table } from '../format.ts';
import type { Output } from '../output.ts';
import { withRedis } from '../redis-run.ts';

const SUBCOMMANDS = ['list', 'replay', 'enable'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];

/** Entries per XRANGE: a long stream is replayed a page at a time, never loaded whole. */
const PAGE = 500;
const STREAM_ID = /^\d+(-\d+)?$/;

export interface EndpointView {
  endpoint: string;
  state: 'enabled' | 'disabled';
  /** When it answered 410 (ISO 8601) and the delivery that got that answer; null while enabled. */
  disabledAt: string | null;
  disabledBy: string | null;
  /** Events queued for it and neither delivered nor dead-lettered. */
  backlog: number;
  /** The time of the oldest of them (ISO 8601) and its age in whole seconds; null when there is none. */
  oldestPendingAt: string | null;
  oldestPendingAgeSeconds: number | null;
  /** Deliveries in its dead-letter stream (their tries ran out). */
  deadLettered: number;
}

export interface WebhooksListResult {
  endpoints: EndpointView[];
}

export interface WebhooksReplayResult {
  endpoint: string;
  /** The first entry replayed (--from, inclusive, or --id), and the last id looked at (the stream's end when the command started). */
  from: string;
  to: string | null;
  /** Events of the endpoint's types read from the stream in that range. */
  read: number;
  /** Queued again: each is sent once more under its own webhook-id. */
  queued: number;
  /** Already queued and not yet delivered: left as they were (each is sent once). */
  alreadyQueued: number;
  /** Entries of types the endpoint does not receive, or not transfer events at all. */
  skipped: number;
}

export interface WebhooksEnableResult {
  endpoint: string;
  /** false: it was not disabled (nothing changed). */
  wasDisabled: boolean;
  disabledAt: string | null;
  disabledBy: string | null;
}

export const webhooksCommand: Command = {
  name: 'webhooks',
  synopsis: 'webhooks list|replay|enable [endpoint]',
  summary: 'outbound webhook endpoints: their state and backlog, send events again, enable after a 410',
  help: `Operates the endpoints of WEBHOOK_ENDPOINTS (docs/contract.md, "Outbound webhooks"; runbook
"Webhooks" in docs/operations.md). What it changes, the running workers act on within a second.

  list                        every endpoint: enabled or disabled (since when, by which delivery's
                              410), its backlog (events queued, not yet delivered nor dead-lettered),
                              the age of the oldest of them, and its dead-lettered deliveries
  replay <endpoint> --from X  queues again every event of the events stream from X on (inclusive) up
                              to the stream's end when the command starts, of the types the endpoint
                              receives: X is a stream id (1718000000000-0) or an ISO 8601 time
                              (2026-05-01T12:00:00Z: events from that moment)
  replay <endpoint> --id ID   queues one event again: ID is its webhook-id (its stream entry id).
                              Exit 3 when the stream no longer holds it (trimmed by EVENTS_MAXLEN),
                              exit 4 (NOT_SUBSCRIBED) when the endpoint does not receive its type
  enable <endpoint>           ends the disable a 410 answer set: its waiting events are sent again,
                              oldest first; exit 0 also when it was not disabled

A replayed event is the same delivery as the first: the same webhook-id and body, signed again with
the endpoint's present secrets, subject to WEBHOOK_RETRY_SCHEDULE. It takes its place in its
transfer's queue in stream order, so one transfer's events still reach the endpoint in version order;
one already queued and not yet delivered is left as it is (sent once). A disabled endpoint gets
nothing, replayed or not, until enabled.

An unknown endpoint exits 3. Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX, EVENTS_STREAM,
WEBHOOK_ENDPOINTS and DASHBOARD_METADATA_KEYS as the worker has them (each must be valid when set).

Examples:
  custody-worker webhooks list
  custody-worker webhooks enable erp
  custody-worker webhooks replay erp --from 2026-05-01T12:00:00Z
  custody-worker webhooks replay erp --id 1718000000000-0 --json`,
  options: {
    from: { type: 'string' },
    id: { type: 'string' },
  },
  positionals: { min: 1, max: 2, names: '<subcommand>' },
  async run({ positionals, values, out, env }) {
    const subcommand = parseSubcommand(positionals[0]!);
    const name = positionals[1];
    const from = stringOption(values, 'from');
    const id = stringOption(values, 'id');
    if (subcommand !== 'replay' && (from !== undefined || id !== undefined))
      throw usageError('--from and --id go with `webhooks replay` only');
    if (subcommand === 'list' && name !== undefined) throw usageError('`webhooks list` takes no endpoint: it lists them all');
    if (subcommand !== 'list' && name === undefined)
      throw usageError(`missing <endpoint> (usage: custody-worker webhooks ${subcommand} <endpoint>)`);
    const start = subcommand === 'replay' ? replayStart(from, id) : undefined;
    const config = loadWebhookConfig(env);
    // Never printed; scrubbed all the same should an error quote one.
    out.addSecrets(...config.endpoints.flatMap((endpoint) => endpoint.secrets));
    const endpoint = name === undefined ? undefined : endpointNamed(config.endpoints, name);
    await withRedis(config.redis, out, async (redis) => {
      const store = (named: string) => new EndpointStore(redis, config.queue.prefix, named);
      if (subcommand === 'list') {
        const now = Date.now();
        const endpoints = await Promise.all(config.endpoints.map(async (e) => view(e.name, await store(e.name).summary(), now)));
        out.result<WebhooksListResult>({ endpoints }, formatList);
        return;
      }
      if (subcommand === 'enable') {
        const record = await store(endpoint!.name).enable();
        out.result<WebhooksEnableResult>(
          {
            endpoint: endpoint!.name,
            wasDisabled: record !== undefined,
            disabledAt: record?.at ?? null,
            disabledBy: record?.entryId ?? null,
          },
          formatEnable,
        );
        return;
      }
      const replay = {
        redis,
        stream: config.queue.eventsStream,
        store: store(endpoint!.name),
        endpoint: endpoint!,
        metadataKeys: config.metadataKeys,
      };
      out.result<WebhooksReplayResult>(
        start!.one ? await replayOne(replay, start!.id) : await replayFrom(replay, start!.id, out),
        formatReplay,
      );
    });
  },
};

function parseSubcommand(value: string): Subcommand {
  if ((SUBCOMMANDS as readonly string[]).includes(value)) return value as Subcommand;
  throw usageError(`unknown webhooks subcommand "${value.slice(0, 40)}": list, replay or enable (see: custody-worker webhooks --help)`);
}

function endpointNamed(endpoints: readonly WebhookEndpoint[], name: string): WebhookEndpoint {
  const found = endpoints.find((endpoint) => endpoint.name === name);
  if (found) return found;
  const known = endpoints.length === 0 ? 'WEBHOOK_ENDPOINTS names none' : `known: ${endpoints.map((e) => e.name).join(', ')}`;
  throw notFound(`no webhook endpoint named "${name.slice(0, 64)}" (${known})`);
}

/** The stream id replay starts at: `--id` (that entry only) or `--from` (a stream id, or an ISO time as its first id). */
function replayStart(from: string | undefined, id: string | undefined): { id: string; one: boolean } {
  if ((from === undefined) === (id === undefined)) throw usageError('`webhooks replay` takes either --from or --id');
  if (id !== undefined) {
    if (!/^\d+-\d+$/.test(id)) throw usageError('--id must be a webhook-id, a stream entry id such as 1718000000000-0');
    return { id, one: true };
  }
  if (STREAM_ID.test(from!)) return { id: from!.includes('-') ? from! : `${from!}-0`, one: false };
  // Only a full date and time: `Date.parse('5')` would read a year.
  const ms = /^\d{4}-\d{2}-\d{2}T/.test(from!) ? Date.parse(from!) : NaN;
  if (!Number.isFinite(ms) || ms < 0) {
    throw usageError('--from must be a stream id such as 1718000000000-0 or an ISO 8601 time such as 2026-05-01T12:00:00Z');
  }
  return { id: `${ms}-0`, one: false };
}

interface Replay {
  redis: RedisClient;
  stream: string;
  store: EndpointStore;
  endpoint: WebhookEndpoint;
  metadataKeys: readonly string[];
}

type Entry = [string, string[]];

/** The entry as an event of the endpoint's types, or why it is not one. */
function eventFor(entry: Entry, endpoint: WebhookEndpoint): TransferEvent | 'not-an-event' | 'not-subscribed' {
  let event: TransferEvent;
  try {
    event = parseStreamEntry(entry);
  } catch {
    return 'not-an-event';
  }
  return (endpoint.events as readonly string[]).includes(event.event) ? event : 'not-subscribed';
}

async function replayOne(replay: Replay, id: string): Promise<WebhooksReplayResult> {
  const [entry] = (await replay.redis.xrange(replay.stream, id, id)) as Entry[];
  if (entry === undefined) throw notFound(`the events stream holds no entry ${id} (an older one may have been trimmed by EVENTS_MAXLEN)`);
  const event = eventFor(entry, replay.endpoint);
  if (event === 'not-an-event') throw notFound(`stream entry ${id} is not a transfer event`);
  if (event === 'not-subscribed') {
    throw refused('NOT_SUBSCRIBED', `endpoint ${replay.endpoint.name} does not receive the type of entry ${id}; nothing was queued`);
  }
  const queued = await replay.store.enqueue(queuedEvent(event, id, replay.metadataKeys, Date.now()));
  return { endpoint: replay.endpoint.name, from: id, to: id, read: 1, queued: queued ? 1 : 0, alreadyQueued: queued ? 0 : 1, skipped: 0 };
}

/**
 * Every entry from `from` up to the stream's last id when it starts (what comes later the workers
 * queue themselves), oldest first, so each transfer's events take their places in order. Safe to run
 * again: an entry still queued is left as it is, one delivered since is sent once more.
 */
async function replayFrom(replay: Replay, from: string, out: Output): Promise<WebhooksReplayResult> {
  const [last] = (await replay.redis.xrevrange(replay.stream, '+', '-', 'COUNT', 1)) as Entry[];
  const result: WebhooksReplayResult = {
    endpoint: replay.endpoint.name,
    from,
    to: last?.[0] ?? null,
    read: 0,
    queued: 0,
    alreadyQueued: 0,
    skipped: 0,
  };
  if (last === undefined) return result;
  let start = from;
  for (let page = 1; ; page++) {
    const entries = (await replay.redis.xrange(replay.stream, start, last[0], 'COUNT', PAGE)) as Entry[];
    for (const entry of entries) {
      const event = eventFor(entry, replay.endpoint);
      if (typeof event === 'string') {
        result.skipped += 1;
        continue;
      }
      result.read += 1;
      if (await replay.store.enqueue(queuedEvent(event, entry[0], replay.metadataKeys, Date.now()))) result.queued += 1;
      else result.alreadyQueued += 1;
    }
    if (entries.length < PAGE) break;
    start = `(${entries[entries.length - 1]![0]}`;
    if (page % 20 === 0) out.notice(`queued ${result.queued} events again so far, at ${entries[entries.length - 1]![0]}`);
  }
  return result;
}

function view(endpoint: string, summary: Awaited<ReturnType<EndpointStore['summary']>>, now: number): EndpointView {
  return {
    endpoint,
    state: summary.disabled === undefined ? 'enabled' : 'disabled',
    disabledAt: summary.disabled?.at ?? null,
    disabledBy: summary.disabled?.entryId ?? null,
    backlog: summary.backlog,
    oldestPendingAt: summary.oldestAt === undefined ? null : new Date(summary.oldestAt).toISOString(),
    oldestPendingAgeSeconds: summary.oldestAt === undefined ? null : Math.max(0, Math.floor((now - summary.oldestAt) / 1000)),
    deadLettered: summary.deadLettered,
  };
}

function formatList(result: WebhooksListResult): string {
  if (result.endpoints.length === 0) return 'no webhook endpoints (WEBHOOK_ENDPOINTS is unset)';
  return result.endpoints
    .map((e) =>
      table([
        ['endpoint', e.endpoint],
        [
          'state',
          e.state === 'enabled'
            ? 'enabled'
            : `disabled since ${e.disabledAt ?? '-'} (410 to ${e.disabledBy ?? '-'}): run \`webhooks enable ${e.endpoint}\``,
        ],
        ['backlog', `${e.backlog} event(s) not yet delivered`],
        ['oldest pending', e.oldestPendingAt === null ? 'none' : `${e.oldestPendingAt} (${e.oldestPendingAgeSeconds ?? 0} s ago)`],
        ['dead-lettered', e.deadLettered],
      ]),
    )
    .join('\n\n');
}

function formatEnable(result: WebhooksEnableResult): string {
  return result.wasDisabled
    ? `enabled ${result.endpoint} (disabled since ${result.disabledAt ?? '-'} by a 410 to ${result.disabledBy ?? '-'}): its waiting events are sent again`
    : `${result.endpoint} was not disabled: nothing changed`;
}

function formatReplay(result: WebhooksReplayResult): string {
  return table([
    ['endpoint', result.endpoint],
    ['from', result.from],
    ['to', result.to ?? 'the stream is empty'],
    ['queued again', result.queued],
    ['already queued', `${result.alreadyQueued} (left as they were: each is sent once)`],
    ['skipped', `${result.skipped} (types the endpoint does not receive, or not transfer events)`],
  ]);
}
