/**
 * Which listed transfer is a sequenceId's, for the adapters: the rules by which a provider's list
 * answer identifies (or cannot identify) one transfer, with the provider's own quirks as parameters
 * (the precision its lists write amounts at, whether its lookups are narrowed). Each adapter's
 * `findTransfer` (port.ts) runs its answer through `findInAnswer`; the domain sees only the finding.
 */
import { decimalEqualsAtPlaces } from '../lib/decimal.ts';
import { canonicalTxid } from '../lib/txid.ts';
import { RECORD_DATE_SLACK_MS } from '../timing.ts';
import { UNREADABLE, type KnownTransfer, type ListedTransfer, type ListedTransfers, type TransferFinding } from './port.ts';

/** A provider's quirks that decide a match. */
export interface MatchRules {
  /**
   * Amounts compare at this many fractional digits (a list that writes 8 digits while the send's
   * answer held a double's 17-digit rendering); undefined: as decimals, exactly.
   */
  amountPlaces?: number | undefined;
  /**
   * Whether a lookup by sequenceId answers only with the transfer holding it: asked only when the one
   * record of an answer carries no sequenceId and nothing else identifies it. Absent: never narrowed.
   */
  narrows?: (() => Promise<boolean>) | undefined;
  /** Records that failed the adapter's schema and carried the sequenceId looked for. */
  unreadableOurs?: number | undefined;
  /** The wallet looked in: `sendsListed` counts the sends of this wallet only (records naming another are not its). */
  walletId?: number | string | undefined;
}

const NO_OTHERS: ReadonlyMap<string, ListedTransfer> = new Map();
const NONE_HELD: ReadonlySet<string> = new Set();

/**
 * Picks the transfer that is `known.sequenceId`'s from a list answer. Never guesses: two candidates
 * are `ambiguous`, and so is one that nothing but its being alone points at when the provider is not
 * known to narrow its answers.
 *  1. a record carrying the sequenceId (a record carrying another sequenceId is never ours);
 *  2. the record id seen before;
 *  3. a `send` whose outputs hold the destination address (any letter case) with an equal decimal
 *     amount (at `rules.amountPlaces`), among those that may be ours: never one the ledger holds for
 *     another sequenceId (its record id or txid: `known.heldByOthers`), never one dated before our
 *     first send (`known.firstSentAt`, less RECORD_DATE_SLACK_MS). An earlier transfer to the same
 *     address for the same amount (a twin) is listed, ours not yet: absent, not the twin. A record
 *     without a readable `date` cannot be told from an earlier twin: found alone, it is ours only
 *     from a provider that narrows, else `ambiguous`;
 *  4. knowing neither (the send was recovered from a conflict), only an answer of exactly one record,
 *     a `send` (records the adapter could not read count), and only from a provider that narrows;
 *     never one dated before our first send (absent); one the ledger holds for another sequenceId is
 *     `ambiguous` (the ledger and the provider disagree: no guess).
 * A record carrying our sequenceId that the adapter could not read makes the finding `unreadable`; so
 * does any record it could not read in an answer found `absent` from a provider that narrows (every
 * record of a narrowed answer is the sequenceId's, whether or not it carries it): "absent" would let a
 * resend rest on the provider's duplicate refusal alone.
 */
export async function findInAnswer(answer: ListedTransfers, known: KnownTransfer, rules: MatchRules = {}): Promise<TransferFinding> {
  let weighed = weigh(answer, known, rules, NONE_HELD);
  if (known.heldByOthers && weighed.unproven.length > 0) {
    // Asked only when a record would be picked without proof: a record carrying the sequenceId, or
    // the id seen before, is ours whatever the ledger holds, and costs no question.
    const held = await known.heldByOthers(weighed.unproven);
    if (held.size > 0) weighed = weigh(answer, known, rules, held);
  }
  const finding = weighed.finding;
  if (finding.kind === 'absent' && (answer[UNREADABLE] ?? 0) > 0 && (await narrowed(rules))) {
    return { kind: 'unreadable', others: finding.others, compared: finding.compared };
  }
  if (finding.kind === 'found' && weighed.needsNarrowing && !(await narrowed(rules))) {
    return { kind: 'ambiguous', candidates: 1, others: finding.others, compared: finding.compared };
  }
  return finding;
}

/**
 * The rules of findInAnswer without the questions it asks: `held` are the record ids the ledger holds
 * for other sequenceIds (known.heldByOthers' answer), and a transfer found without proof (by rule 4
 * alone, or an undated record by rule 3) is marked `needsNarrowing`: findInAnswer asks `rules.narrows` then.
 */
export function matchAnswer(
  answer: readonly ListedTransfer[] | ListedTransfers,
  known: KnownTransfer,
  rules: Omit<MatchRules, 'narrows'> & { held?: ReadonlySet<string> } = {},
): TransferFinding | (Extract<TransferFinding, { kind: 'found' }> & { needsNarrowing: true }) {
  const { finding, needsNarrowing } = weigh(answer, known, rules, rules.held ?? NONE_HELD);
  return finding.kind === 'found' && needsNarrowing ? { ...finding, needsNarrowing } : finding;
}

/** A finding, whether it rests on narrowing, and the records it would pick without proof (for heldByOthers). */
interface Weighed {
  finding: TransferFinding;
  needsNarrowing: boolean;
  unproven: readonly ListedTransfer[];
}

function weigh(
  answer: readonly ListedTransfer[] | ListedTransfers,
  known: KnownTransfer,
  rules: Omit<MatchRules, 'narrows'>,
  held: ReadonlySet<string>,
): Weighed {
  const others = othersIn(answer, known.sequenceId);
  const compared = comparedBy(known, rules);
  const proven = (finding: TransferFinding): Weighed => ({ finding, needsNarrowing: false, unproven: [] });
  if ((rules.unreadableOurs ?? 0) > 0) return proven({ kind: 'unreadable', others, compared });
  const eligible = answer.filter((tx) => tx.sequenceId === undefined || tx.sequenceId === known.sequenceId);

  const bySequence = eligible.filter((tx) => tx.sequenceId === known.sequenceId);
  if (bySequence.length > 0) return proven(decide(bySequence, others, compared, true));

  if (known.transactionId !== undefined) {
    const byId = eligible.filter((tx) => tx.id === known.transactionId);
    if (byId.length > 0) return proven(decide(byId, others, compared, false));
  }

  const sends = eligible.filter((tx) => tx.type.toLowerCase() === 'send');
  if (known.destinationAddress !== undefined && known.amount !== undefined) {
    const address = known.destinationAddress.toLowerCase();
    const amount = known.amount;
    const sentAt = known.firstSentAt;
    const candidates = sends.filter(
      (tx) =>
        !held.has(tx.id) &&
        !datedBefore(tx, sentAt) &&
        tx.outputs.some((out) => out.address.toLowerCase() === address && amountEquals(out.amount, amount, rules)),
    );
    const finding = decide(candidates, others, compared, false, sendsOf(sends, rules));
    // Undated, a lone candidate may be an earlier twin: the answer must be narrowed to ours.
    const undated = finding.kind === 'found' && sentAt !== undefined && recordDate(finding.transfer) === undefined;
    return { finding, needsNarrowing: undated, unproven: candidates };
  }
  if (known.transactionId !== undefined) return proven({ kind: 'absent', others, compared, sendsListed: sendsOf(sends, rules) });
  // "Exactly one" counts the records the adapter could not read too: one of them may be ours.
  const answered = answer.length + ((answer as ListedTransfers)[UNREADABLE] ?? 0);
  if (answered > 1 && sends.length > 0) return proven({ kind: 'ambiguous', candidates: sends.length, others, compared });
  // A lone record dated before our first send is another transfer's (an answer believed narrowed
  // that lists the wallet's transfers after all, say because it was probed while the wallet was empty).
  const finding = decide(
    sends.filter((tx) => !datedBefore(tx, known.firstSentAt)),
    others,
    compared,
    false,
  );
  if (finding.kind !== 'found') return proven(finding);
  if (held.has(finding.transfer.id)) return proven({ kind: 'ambiguous', candidates: 1, others, compared });
  return { finding, needsNarrowing: true, unproven: sends };
}

/**
 * A record's `date` (ISO 8601 text, as both providers write it), in ms; undefined when it has none
 * or one that does not read as a date: such a record is undated, and never excluded by its date.
 */
function recordDate(tx: ListedTransfer): number | undefined {
  if (typeof tx.date !== 'string') return undefined;
  const ms = Date.parse(tx.date);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Dated before our first send, beyond the clocks' difference: made before it, so another transfer's. */
function datedBefore(tx: ListedTransfer, firstSentAt: number | undefined): boolean {
  if (firstSentAt === undefined) return false;
  const date = recordDate(tx);
  return date !== undefined && date < firstSentAt - RECORD_DATE_SLACK_MS;
}

function decide(
  candidates: ListedTransfer[],
  others: ReadonlyMap<string, ListedTransfer>,
  compared: readonly string[],
  bySequenceId: boolean,
  sendsListed = 0,
): TransferFinding {
  const distinct = new Map(candidates.map((tx) => [tx.id, tx]));
  if (distinct.size === 0) return { kind: 'absent', others, compared, sendsListed };
  if (distinct.size > 1) return { kind: 'ambiguous', candidates: distinct.size, others, compared, bySequenceId };
  return { kind: 'found', transfer: distinct.values().next().value as ListedTransfer, others, compared, bySequenceId };
}

function sendsOf(sends: ListedTransfer[], rules: Pick<MatchRules, 'walletId'>): number {
  if (rules.walletId === undefined) return sends.length;
  const wallet = String(rules.walletId);
  return sends.filter((tx) => tx.wallet === undefined || String(tx.wallet) === wallet).length;
}

async function narrowed(rules: MatchRules): Promise<boolean> {
  if (!rules.narrows) return false;
  try {
    return await rules.narrows();
  } catch {
    return false;
  }
}

function amountEquals(listed: string, known: string, rules: Pick<MatchRules, 'amountPlaces'>): boolean {
  return decimalEqualsAtPlaces(listed, known, rules.amountPlaces ?? Math.max(fractionDigits(listed), fractionDigits(known)));
}

function fractionDigits(text: string): number {
  const dot = text.indexOf('.');
  return dot < 0 ? 0 : text.length - dot - 1;
}

/**
 * Records of other sequenceIds that the answer identifies (each carried by exactly one record id):
 * an answer that is not narrowed may list other transfers of ours, txid and all.
 */
function othersIn(answer: readonly ListedTransfer[], sequenceId: string): ReadonlyMap<string, ListedTransfer> {
  let groups: Map<string, Map<string, ListedTransfer>> | undefined;
  for (const tx of answer) {
    if (tx.sequenceId === undefined || tx.sequenceId === sequenceId) continue;
    groups ??= new Map();
    const group = groups.get(tx.sequenceId) ?? new Map<string, ListedTransfer>();
    group.set(tx.id, tx);
    groups.set(tx.sequenceId, group);
  }
  if (!groups) return NO_OTHERS;
  const others = new Map<string, ListedTransfer>();
  for (const [other, group] of groups) if (group.size === 1) others.set(other, group.values().next().value as ListedTransfer);
  return others;
}

const COMPARED_BY_ID: readonly string[] = ['sequenceId', 'id'];
/** The fields compared by address and amount, per amount precision and date rule: made once, not on every poll. */
const comparedByOutputs = new Map<string, readonly string[]>();

function comparedBy(known: KnownTransfer, rules: Pick<MatchRules, 'amountPlaces'>): readonly string[] {
  if (known.transactionId !== undefined) return COMPARED_BY_ID;
  const dated = known.firstSentAt !== undefined;
  const key = `${rules.amountPlaces}:${dated}`;
  let compared = comparedByOutputs.get(key);
  if (!compared) {
    const places = rules.amountPlaces === undefined ? 'exactly' : `at ${rules.amountPlaces} fractional digits`;
    compared = ['sequenceId', 'outputs[].address (any letter case)', `outputs[].amount (${places})`];
    if (dated) compared = [...compared, 'date (no earlier than the first send)'];
    comparedByOutputs.set(key, compared);
  }
  return compared;
}

/**
 * Whether two txids name the same transaction: hex txids (with or without `0x`) compare without regard
 * to letter case, as providers and explorers print them either way; any other form compares exactly.
 */
export function txidEquals(a: string, b: string): boolean {
  return a === b || canonicalTxid(a) === canonicalTxid(b);
}
