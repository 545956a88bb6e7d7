import type { TransferEvent } from '../events/events.ts';

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

/** One readable line per event: stream id, time, type, transfer, then what matters for its type. */
export function eventLine(event: TransferEvent): string {
  const who = event.event === 'reconcile.completed' ? '' : ` ${event.sequenceId || '(no sequenceId)'} wallet=${show(event.walletId)} coin=${show(event.coin)} v${event.version}`;
  const summary = eventSummary(event);
  return `${event.id} ${event.at} ${event.event}${who}${summary ? ` ${summary}` : ''}`;
}

function eventSummary(event: TransferEvent): string {
  const data = (event.data ?? {}) as Record<string, unknown>;
  switch (event.event) {
    case 'transfer.submitted': {
      const transfer = (data.transfer ?? {}) as Record<string, unknown>;
      if (data.transfer === null && data.recoveredBy !== undefined) return `recoveredBy=${show(data.recoveredBy)}`;
      return `upstreamId=${show(transfer.id)} amount=${show(transfer.amount)} to=${show(transfer.destinationAddress)}`;
    }
    case 'transfer.broadcast':
      return `txid=${show(data.txid)}`;
    case 'transfer.rejected': {
      const issues = Array.isArray(data.issues) ? (data.issues as Array<{ path?: unknown; message?: unknown }>) : [];
      return `${show(data.code)} ${issues.map((issue) => `${show(issue.path)}: ${show(issue.message)}`).join('; ')}`.trim();
    }
    case 'transfer.blocked':
      return `${show(data.code)} setting=${show(data.setting)}`;
    case 'transfer.failed':
      return `${show(data.code)} http=${show(data.httpStatus)} attempts=${show(data.attempts)} ${show(data.message)}`;
    case 'transfer.expired':
      return `${show(data.code)} submittedAt=${show(data.submittedAt)} deadline=${show(data.deadline)}`;
    case 'transfer.unresolved':
      return `${show(data.code)} attempts=${show(data.attempts)} lastError=${show(data.lastError)}`;
    case 'reconcile.completed':
      return Object.entries(data)
        .map(([key, value]) => `${key}=${show(value)}`)
        .join(' ');
    default:
      return show(event.data);
  }
}
