import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { eventPhrase } from '../events/format.ts';

/** `label  value` lines with the values aligned; undefined/null/'' show as `-`. */
export function table(rows: Array<[string, unknown]>): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${show(value)}`).join('\n');
}

export function show(value: unknown): string {
  if (value === undefined || value === null || value === '') return '-';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** One readable line per event: stream id, time, type, transfer, then the event's phrase (events/format.ts). */
export function eventLine(event: TransferEvent): string {
  const who =
    event.event === 'reconcile.completed'
      ? ''
      : ` ${event.sequenceId || '(no sequenceId)'} wallet=${show(event.walletId)} coin=${show(event.coin)} v${event.version}`;
  const phrase = eventPhrase(event);
  return `${event.id} ${event.at} ${event.event}${who}${phrase ? ` ${phrase}` : ''}`;
}
