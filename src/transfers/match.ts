import { decimalEqualsAtPlaces, LIST_AMOUNT_PLACES } from '../lib/decimal.ts';
import { UNREADABLE, type ListedTransfer as Transaction, type ListedTransfers as TransactionList } from '../custody/port.ts';

/** What we know to recognise our transfer in a get-transfer answer, best first. */
export interface TransferMatch {
  sequenceId: string;
  /** The upstream transaction record id, once seen. */
  transactionId?: string;
  /** From the submitted record (upstream API 2.4). */
  destinationAddress?: string;
  /** Decimal text. */
  amount?: string;
}

export type MatchResult = { kind: 'found'; transaction: Transaction } | { kind: 'none' } | { kind: 'ambiguous'; candidates: number };

/**
 * Picks the transaction that is this transfer from a get-transfer answer, which upstream API 4.1 does not
 * promise to narrow to it. Never guesses: two candidates are "ambiguous", and the caller waits.
 *  1. a record carrying our `sequenceId` (the spec shows none, some providers add it);
 *  2. the record id seen before;
 *  3. a `send` whose outputs hold the destination address (any letter case, upstream API 2.2) with an equal
 *     decimal amount, compared at the lists' precision (LIST_AMOUNT_PLACES: a double's 17-digit
 *     rendering of the send answer's amount equals the list's 8-digit text);
 *  4. knowing neither (the send was recovered from a 409), only an answer of exactly one record, a `send`
 *     (records the client could not read count: UNREADABLE).
 * A record carrying a different sequenceId is never ours.
 */
export function findTransfer(list: readonly Transaction[] | TransactionList, match: TransferMatch): MatchResult {
  const eligible = list.filter((tx) => tx.sequenceId === undefined || tx.sequenceId === match.sequenceId);

  const bySequence = eligible.filter((tx) => tx.sequenceId === match.sequenceId);
  if (bySequence.length > 0) return decide(bySequence);

  if (match.transactionId !== undefined) {
    const byId = eligible.filter((tx) => tx.id === match.transactionId);
    if (byId.length > 0) return decide(byId);
  }

  const sends = eligible.filter((tx) => tx.type.toLowerCase() === 'send');
  if (match.destinationAddress !== undefined && match.amount !== undefined) {
    const address = match.destinationAddress.toLowerCase();
    const amount = match.amount;
    return decide(
      sends.filter((tx) =>
        tx.outputs.some((out) => out.address.toLowerCase() === address && decimalEqualsAtPlaces(out.amount, amount, LIST_AMOUNT_PLACES)),
      ),
    );
  }
  if (match.transactionId !== undefined) return { kind: 'none' };
  // "Exactly one" counts the records the client could not read too: one of them may be ours.
  const answered = list.length + ((list as TransactionList)[UNREADABLE] ?? 0);
  if (answered > 1 && sends.length > 0) return { kind: 'ambiguous', candidates: sends.length };
  return decide(sends);
}

function decide(candidates: Transaction[]): MatchResult {
  const distinct = new Map(candidates.map((tx) => [tx.id, tx]));
  if (distinct.size === 0) return { kind: 'none' };
  if (distinct.size > 1) return { kind: 'ambiguous', candidates: distinct.size };
  return { kind: 'found', transaction: distinct.values().next().value as Transaction };
}

const HEX_TXID = /^(0x)?[0-9a-f]+$/i;

/**
 * Whether two txids name the same transaction: hex txids (with or without `0x`) compare without regard
 * to letter case, as providers and explorers print them either way; any other form compares exactly.
 */
export function txidEquals(a: string, b: string): boolean {
  if (a === b) return true;
  return HEX_TXID.test(a) && HEX_TXID.test(b) && a.toLowerCase() === b.toLowerCase();
}
