/**
 * Which listed transfer is a sequenceId's, for the adapters: the rules by which a provider's list
 * answer identifies (or cannot identify) one transfer, with the provider's own quirks as parameters
 * (the precision its lists write amounts at, whether its lookups are narrowed). Each adapter's
 * `findTransfer` (port.ts) runs its answer through `findInAnswer`; the domain sees only the finding.
 */
import { decimalEqualsAtPlaces } from '../lib/decimal.ts';
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

/** What the finding says about records of other sequenceIds, and the criteria compared (for logs). */
const NO_OTHERS: ReadonlyMap<string, ListedTransfer> = new Map();

/**
 * Picks the transfer that is `known.sequenceId`'s from a list answer. Never guesses: two candidates
 * are `ambiguous`, and so is one that only "the answer held exactly one record" points at when the
 * provider is not known to narrow its answers.
 *  1. a record carrying the sequenceId (a record carrying another sequenceId is never ours);
 *  2. the record id seen before;
 *  3. a `send` whose outputs hold the destination address (any letter case) with an equal decimal
 *     amount (at `rules.amountPlaces`);
 *  4. knowing neither (the send was recovered from a conflict), only an answer of exactly one record,
 *     a `send` (records the adapter could not read count), and only from a provider that narrows.
 * A record carrying our sequenceId that the adapter could not read makes the finding `unreadable`; so
 * does any record it could not read in an answer found `absent` from a provider that narrows (every
 * record of a narrowed answer is the sequenceId's, whether or not it carries it): "absent" would let a
 * resend rest on the provider's duplicate refusal alone.
 */
export async function findInAnswer(answer: ListedTransfers, known: KnownTransfer, rules: MatchRules = {}): Promise<TransferFinding> {
  const finding = matchAnswer(answer, known, rules);
  if (finding.kind === 'absent' && (answer[UNREADABLE] ?? 0) > 0 && (await narrowed(rules))) {
    return { kind: 'unreadable', others: finding.others, compared: finding.compared };
  }
  if (finding.kind === 'found' && 'loneRecord' in finding && !(await narrowed(rules))) {
    return { kind: 'ambiguous', candidates: 1, others: finding.others, compared: finding.compared };
  }
  if (finding.kind === 'found')
    return {
      kind: 'found',
      transfer: finding.transfer,
      others: finding.others,
      compared: finding.compared,
      bySequenceId: finding.bySequenceId,
    };
  return finding;
}

/**
 * The rules of findInAnswer without the question of narrowing: a transfer found by rule 4 alone (the
 * answer held exactly one record) is marked `loneRecord`, and findInAnswer asks `rules.narrows` then.
 */
export function matchAnswer(
  answer: readonly ListedTransfer[] | ListedTransfers,
  known: KnownTransfer,
  rules: Omit<MatchRules, 'narrows'> = {},
): TransferFinding | (Extract<TransferFinding, { kind: 'found' }> & { loneRecord: true }) {
  const others = othersIn(answer, known.sequenceId);
  const compared = comparedBy(known, rules);
  if ((rules.unreadableOurs ?? 0) > 0) return { kind: 'unreadable', others, compared };
  const eligible = answer.filter((tx) => tx.sequenceId === undefined || tx.sequenceId === known.sequenceId);

  const bySequence = eligible.filter((tx) => tx.sequenceId === known.sequenceId);
  if (bySequence.length > 0) return decide(bySequence, others, compared, true);

  if (known.transactionId !== undefined) {
    const byId = eligible.filter((tx) => tx.id === known.transactionId);
    if (byId.length > 0) return decide(byId, others, compared, false);
  }

  const sends = eligible.filter((tx) => tx.type.toLowerCase() === 'send');
  if (known.destinationAddress !== undefined && known.amount !== undefined) {
    const address = known.destinationAddress.toLowerCase();
    const amount = known.amount;
    const candidates = sends.filter((tx) =>
      tx.outputs.some((out) => out.address.toLowerCase() === address && amountEquals(out.amount, amount, rules)),
    );
    return decide(candidates, others, compared, false, sendsOf(sends, rules));
  }
  if (known.transactionId !== undefined) return { kind: 'absent', others, compared, sendsListed: sendsOf(sends, rules) };
  // "Exactly one" counts the records the adapter could not read too: one of them may be ours.
  const answered = answer.length + ((answer as ListedTransfers)[UNREADABLE] ?? 0);
  if (answered > 1 && sends.length > 0) return { kind: 'ambiguous', candidates: sends.length, others, compared };
  const finding = decide(sends, others, compared, false);
  return finding.kind === 'found' ? { ...finding, loneRecord: true } : finding;
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
/** The fields compared by address and amount, per amount precision: made once, not on every poll. */
const comparedByOutputs = new Map<number | undefined, readonly string[]>();

function comparedBy(known: KnownTransfer, rules: Pick<MatchRules, 'amountPlaces'>): readonly string[] {
  if (known.transactionId !== undefined) return COMPARED_BY_ID;
  let compared = comparedByOutputs.get(rules.amountPlaces);
  if (!compared) {
    const places = rules.amountPlaces === undefined ? 'exactly' : `at ${rules.amountPlaces} fractional digits`;
    compared = ['sequenceId', 'outputs[].address (any letter case)', `outputs[].amount (${places})`];
    comparedByOutputs.set(rules.amountPlaces, compared);
  }
  return compared;
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
