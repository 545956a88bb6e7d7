import type { EventData, TransferEvent } from '../../packages/producer/src/events.ts';

/**
 * The one phrase per event type that people read: the CLI (`events`, `status`) and the demo's live view
 * both take their per-type text from here, each with its own layout and colours around it. It switches
 * on the typed event, so every case reads `data` in the shape its schema guarantees (no guessing).
 *
 * Only short facts are printed (codes, ids, amounts, issue paths, counts), never a record as a whole, so
 * nothing personal or secret that a record might carry can reach a terminal through it.
 */
export interface PhraseOptions {
  /**
   * For a live view that fits one line per event (the demo): long ids shortened, and the free text
   * (issue messages, an upstream message, an operator's reason) left out.
   */
  brief?: boolean;
}

export function eventPhrase(event: TransferEvent, options: PhraseOptions = {}): string {
  const brief = options.brief === true;
  const id = (value: string) => (brief ? shorten(value) : value);
  const withText = (phrase: string, text: string) => (brief || text === '' ? phrase : `${phrase}: ${text}`);
  switch (event.event) {
    case 'transfer.submitted':
      return submittedPhrase(event.data, id, withText);
    case 'transfer.broadcast':
      return `txid ${id(event.data.txid)}`;
    case 'transfer.rejected': {
      const { code, issues } = event.data;
      const listed = brief
        ? [...new Set(issues.map((issue) => issue.path))].join(', ')
        : issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
      return `${code} (${listed})`;
    }
    case 'transfer.blocked': {
      const { code, setting } = event.data;
      return `${code} (outgoingTxn ${setting.outgoingTxn}, mandatory ${setting.mandatory}, blockTxn ${setting.blockTxn})`;
    }
    case 'transfer.failed': {
      const { code, httpStatus, attempts, message } = event.data;
      return withText(`${code}, http ${httpStatus ?? '-'}, after ${plural(attempts, 'send')}`, message);
    }
    case 'transfer.expired': {
      const { code, submittedAt, deadline } = event.data;
      return `${code}, submitted ${submittedAt}, deadline ${deadline}`;
    }
    case 'transfer.cancelled': {
      const { reason, by } = event.data;
      return withText(`by ${by}, nothing was sent`, reason);
    }
    case 'transfer.halted': {
      const { state, providerTransferId } = event.data;
      return `${state} by the provider, upstream id ${id(providerTransferId)}: never sent again`;
    }
    case 'transfer.unresolved': {
      const { code, attempts, lastError } = event.data;
      return `${code} after ${plural(attempts, 'send')}, last error ${lastError}: an operator may resolve it`;
    }
    case 'reconcile.completed': {
      const { data } = event;
      // Counts that are zero say nothing; `checked` always shows.
      const counts = RECONCILE_COUNTS.filter((key) => key === 'checked' || data[key] > 0).map((key) => `${key} ${data[key]}`);
      return `${counts.join(', ')} in ${Math.round(data.durationMs)} ms${data.interrupted ? ', interrupted' : ''}`;
    }
  }
}

function submittedPhrase(
  data: EventData['transfer.submitted'],
  id: (value: string) => string,
  withText: (phrase: string, text: string) => string,
): string {
  if (data.transfer !== null) {
    const { id: upstreamId, amount, destinationAddress } = data.transfer;
    // A provider that does not state them (BitGo without one readable recipient): the id alone.
    if (amount === undefined || destinationAddress === undefined) return `upstream id ${upstreamId}`;
    return `upstream id ${upstreamId}, amount ${amount} to ${id(destinationAddress)}`;
  }
  switch (data.recoveredBy) {
    case 'get-transfer':
      return `recovered by lookup, upstream id ${data.transaction.id}`;
    case 'duplicate':
      return 'recovered by a 409 answer: accepted earlier';
    case 'operator':
      return withText('resolved by an operator', data.reason);
  }
}

const RECONCILE_COUNTS = [
  'checked',
  'resubmitted',
  'trackersRestored',
  'unrecoverable',
  'verified',
  'mismatches',
  'verifyErrors',
  'retentionRemoved',
  'staleIndexRemoved',
] as const;

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function shorten(value: string): string {
  return value.length > 24 ? `${value.slice(0, 12)}…${value.slice(-8)}` : value;
}
