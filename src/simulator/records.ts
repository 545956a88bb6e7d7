/**
 * Builds the bodies of the custody API, field for field as spec sections 2.1 to 2.5, from a transfer
 * the simulator holds. Values are realistic (8-decimal strings, ISO timestamps with milliseconds,
 * numeric-text ids) so a client's schemas meet what production sends.
 */
import { createHash } from 'node:crypto';
import type { HalfSigned, SimTransfer } from './state.ts';

/** What the simulator derives from txHex, so the same bytes always mean the same transfer. */
export interface Derived {
  /** Lowercase `0x` + 40 hex. */
  destination: string;
  /** Fractional digits of the units below: 8, or more when a fixed amount has more. */
  scale: number;
  /**
   * Amounts in units of 10^-scale coin, kept as integers so no float rounding leaks into decimal
   * strings; bigints, so an amount of 20 significant digits stays exact.
   */
  amountUnits: bigint;
  feeUnits: bigint;
  /** 0 when the transaction has no change output. */
  changeUnits: bigint;
  /** The amount came from `fixedAmount`: 2.4 writes its exact digits, which a JS number may not hold. */
  exactAmount: boolean;
}

/** Spec 2.4. */
export interface SubmitRecord {
  id: number;
  userid: number;
  raw: string;
  status: number;
  walletid: string;
  type: number;
  asset: string;
  chain: string;
  timestamp: string;
  transactionSequenceId: number;
  sequenceId: string;
  amount: number;
  destinationAddress: string;
  usdamount: number;
}

/** Spec 2.3. */
export interface WalletRecord {
  id: number;
  name: string;
  type: string;
  config: string;
  status: number;
  balance: string;
  balanceusd: string;
  raw: null;
  issynced: boolean;
  walletpath: null;
  walletidentifier: string;
  coin: string;
  chain: string;
  parentchain: string;
  subtype: string;
  isArchived: boolean;
  teamId: null;
  version: number;
  orgid: number;
}

/** Spec 2.2. */
export interface TransferParty {
  address: string;
  amount: string;
  isMine: boolean;
  wallet?: WalletRecord;
}

/** Spec 2.1. */
export interface TransactionRecord {
  coin: string;
  id: string;
  wallet: number;
  txid: string;
  date: string;
  value: string;
  valueString: string;
  baseValue: number;
  baseValueString: string;
  feeString: string;
  usd: string;
  walletType: string;
  inputs: TransferParty[];
  outputs: TransferParty[];
  type: string;
  DestinationTag: null;
  sequenceId?: string;
}

/** Spec 2.5. */
export interface WalletTransactionRecord {
  id: number;
  txid: string;
  raw: null;
  walletid: number;
  type: string;
  fee: string;
  effectivechange: string;
  runningbalance: null;
  timestamp: string;
  externaladdress: string;
  coin: string;
  effectivechangeusd: string;
  wallet: {
    id: number;
    name: string;
    type: string;
    config: string;
    balance: string;
    address: string;
    coin: string;
    chain: string;
    parentchain: string;
    subtype: string;
    access: string;
    balanceUSD: string;
  };
  explorerLink: string;
}

/** sendTransaction carries no coin; records made before a get-transfer names one use this. */
export const DEFAULT_COIN = 'eth';
export const USD_PER_COIN = 3123.45;
const COIN_DECIMALS = 8;
const USER_ID = 1043;
const ORG_ID = 17;

/** Decimal text with exactly `scale` fractional digits. */
export function formatUnits(units: bigint, scale = COIN_DECIMALS): string {
  const sign = units < 0n ? '-' : '';
  const digits = (units < 0n ? -units : units).toString().padStart(scale + 1, '0');
  return `${sign}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

/** The nearest double, as parsing the decimal text gives it (for 8 decimals: exactly units / 1e8). */
export function unitsToNumber(units: bigint, scale = COIN_DECIMALS): number {
  return Number(formatUnits(units, scale));
}

export function usdOf(units: bigint, scale = COIN_DECIMALS): number {
  return unitsToNumber(units, scale) * USD_PER_COIN;
}

/** JSON.rawJSON (Node 21+, not yet in TypeScript's lib): a value JSON.stringify writes as the given text. */
const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/**
 * The JSON text of a 2.4 record (as built, or as a profile shaped it). An amount set by `fixedAmount`
 * is written as its exact digits: JSON.stringify of a JS number keeps only about 17 of them.
 */
export function submitRecordJson(record: object, derived: Derived, options: { amountAsDouble?: boolean } = {}): string {
  const digits = formatUnits(derived.amountUnits, derived.scale).replace(/\.?0+$/, '');
  // A float serialiser's rendering: the double nearest the amount, written with 17 significant digits.
  if (options.amountAsDouble) return JSON.stringify({ ...record, amount: rawJson(Number(digits).toPrecision(17)) });
  if (!derived.exactAmount) return JSON.stringify(record);
  return JSON.stringify({ ...record, amount: rawJson(digits) });
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * `fixedAmount` (decimal text, checked by settings.ts) replaces the amount drawn from txHex, so a test can
 * send e.g. 20 significant digits; the scale grows past 8 when the amount has more fractional digits.
 */
export function deriveFromTxHex(txHex: string, fixedAmount: string | null = null): Derived {
  const hash = sha256Hex(txHex);
  const word = (from: number, to: number): number => Number.parseInt(hash.slice(from, to), 16);
  const destination = `0x${hash.slice(0, 40)}`;
  // 21000 gas at 10 to 59 gwei
  const feeUnits = BigInt(2_100 * (10 + (word(48, 50) % 50)));
  const changeUnits = BigInt(word(50, 52) % 2 === 1 ? (word(52, 60) % 100_000_000) + 1 : 0);
  if (fixedAmount === null) {
    // 0.001 to 2.501 coin
    const amountUnits = BigInt((word(40, 48) % 250_000_000) + 100_000);
    return { destination, scale: COIN_DECIMALS, amountUnits, feeUnits, changeUnits, exactAmount: false };
  }
  const [whole = '0', fraction = ''] = fixedAmount.split('.');
  const scale = Math.max(COIN_DECIMALS, fraction.length);
  const rescale = 10n ** BigInt(scale - COIN_DECIMALS);
  return {
    destination,
    scale,
    amountUnits: BigInt(whole + fraction.padEnd(scale, '0')),
    feeUnits: feeUnits * rescale,
    changeUnits: changeUnits * rescale,
    exactAmount: true,
  };
}

/** Toggles the case of every other hex letter: same address, different spelling (upstream API 2.2). */
export function mixCase(address: string): string {
  let letter = 0;
  let out = '0x';
  for (const char of address.slice(2)) {
    if (char >= 'a' && char <= 'f') {
      out += letter % 2 === 0 ? char.toUpperCase() : char;
      letter += 1;
    } else if (char >= 'A' && char <= 'F') {
      out += letter % 2 === 0 ? char.toLowerCase() : char;
      letter += 1;
    } else {
      out += char;
    }
  }
  return out;
}

interface WalletFacts {
  address: string;
  balanceUnits: number;
}

const walletFacts = new Map<number, WalletFacts>();

function factsOf(walletId: number): WalletFacts {
  let facts = walletFacts.get(walletId);
  if (!facts) {
    // bounded: a benchmark with random wallet ids must not grow this forever
    if (walletFacts.size > 10_000) walletFacts.clear();
    const hash = sha256Hex(`wallet:${walletId}`);
    facts = {
      address: `0x${hash.slice(0, 40)}`,
      balanceUnits: (Number.parseInt(hash.slice(40, 50), 16) % 5_000_000_000) + 1_000_000_000,
    };
    walletFacts.set(walletId, facts);
  }
  return facts;
}

export function walletAddress(walletId: number): string {
  return factsOf(walletId).address;
}

export function buildWallet(walletId: number, coin: string): WalletRecord {
  const facts = factsOf(walletId);
  return {
    id: walletId,
    name: `Treasury hot wallet ${walletId}`,
    type: 'pipeline',
    config: '2of2',
    status: 1,
    balance: formatUnits(BigInt(facts.balanceUnits)),
    balanceusd: usdOf(BigInt(facts.balanceUnits)).toFixed(8),
    raw: null,
    issynced: true,
    walletpath: null,
    walletidentifier: facts.address,
    coin,
    chain: coin,
    parentchain: 'EVM',
    subtype: 'hot',
    isArchived: false,
    teamId: null,
    version: 2,
    orgid: ORG_ID,
  };
}

/** The person fields of upstream API 2.4's raw.user, as fake but realistic PII. */
export function buildUser(clientId: string): Record<string, unknown> {
  return {
    id: USER_ID,
    displayName: 'Jane Doe',
    photoURL: 'https://images.example.com/avatars/jane-doe.png',
    lastLoginAt: '2024-11-18T08:42:17.331Z',
    email: 'jane.doe@example.com',
    phoneNumber: '+15551234567',
    status: 1,
    created_at: '2023-05-02T14:10:55.120Z',
    clientid: clientId,
    type: 1,
  };
}

export function buildSubmitRecord(transfer: SimTransfer, clientId: string): SubmitRecord {
  const { derived, sequenceId, walletId } = transfer;
  const halfSigned: HalfSigned = {
    ...transfer.halfSigned,
    payload: JSON.stringify({
      walletId,
      sequenceId,
      recipient: derived.destination,
      amount: formatUnits(derived.amountUnits, derived.scale),
    }),
    sequenceId,
  };
  return {
    id: 150_000 + transfer.ordinal,
    userid: USER_ID,
    raw: JSON.stringify({ txHex: transfer.txHex, halfSigned, user: buildUser(clientId), sequenceId }),
    status: 1,
    walletid: String(walletId),
    type: 2,
    // the coin is unknown when the send is accepted (the request names none)
    asset: DEFAULT_COIN,
    chain: DEFAULT_COIN,
    timestamp: new Date(transfer.acceptedAt).toISOString(),
    transactionSequenceId: 9_000 + transfer.ordinal,
    sequenceId,
    // the nearest double; submitRecordJson writes the exact digits of a fixed amount
    amount: unitsToNumber(derived.amountUnits, derived.scale),
    destinationAddress: derived.destination,
    usdamount: Math.round(usdOf(derived.amountUnits, derived.scale) * 100) / 100,
  };
}

export interface TransactionOptions {
  coin: string;
  txid: string;
  mixedCase: boolean;
  includeSequenceId: boolean;
}

/** Spec 2.1 for a send: inputs are the wallet's own address, outputs the destination (+ change). */
export function buildTransaction(transfer: SimTransfer, options: TransactionOptions): TransactionRecord {
  const { derived, walletId } = transfer;
  const { scale } = derived;
  const spell = options.mixedCase ? mixCase : (address: string) => address;
  const wallet = buildWallet(walletId, options.coin);
  const own = spell(wallet.walletidentifier);
  const spentUnits = derived.amountUnits + derived.feeUnits;
  const value = formatUnits(-spentUnits, scale);
  const outputs: TransferParty[] = [
    { address: spell(derived.destination), amount: formatUnits(derived.amountUnits, scale), isMine: false },
  ];
  if (derived.changeUnits > 0n) {
    outputs.push({ address: own, amount: formatUnits(derived.changeUnits, scale), isMine: true, wallet });
  }
  const record: TransactionRecord = {
    coin: options.coin,
    id: String(70_000_000 + transfer.ordinal),
    wallet: walletId,
    txid: options.txid,
    date: new Date(transfer.acceptedAt).toISOString(),
    value,
    valueString: value,
    baseValue: -unitsToNumber(spentUnits, scale),
    baseValueString: value,
    feeString: formatUnits(derived.feeUnits, scale),
    usd: (-usdOf(spentUnits, scale)).toFixed(5),
    walletType: 'pipeline',
    inputs: [{ address: own, amount: formatUnits(spentUnits + derived.changeUnits, scale), isMine: true, wallet }],
    outputs,
    type: 'send',
    DestinationTag: null,
  };
  if (options.includeSequenceId) record.sequenceId = transfer.sequenceId;
  return record;
}

/** Spec 2.5 of a transfer whose txid is shown. */
export function buildWalletTransaction(transfer: SimTransfer, txid: string): WalletTransactionRecord {
  const { derived, walletId } = transfer;
  const { scale } = derived;
  const coin = transfer.coin ?? DEFAULT_COIN;
  const wallet = buildWallet(walletId, coin);
  const spentUnits = derived.amountUnits + derived.feeUnits;
  return {
    id: 3_000_000 + transfer.ordinal,
    txid,
    raw: null,
    walletid: walletId,
    type: 'send',
    fee: formatUnits(derived.feeUnits, scale),
    effectivechange: formatUnits(-spentUnits, scale),
    runningbalance: null,
    timestamp: new Date(Math.max(transfer.txidAt, transfer.acceptedAt)).toISOString(),
    externaladdress: derived.destination,
    coin,
    effectivechangeusd: (-usdOf(spentUnits, scale)).toFixed(5),
    wallet: {
      id: walletId,
      name: wallet.name,
      type: wallet.type,
      config: wallet.config,
      balance: wallet.balance,
      address: wallet.walletidentifier,
      coin,
      chain: wallet.chain,
      parentchain: wallet.parentchain,
      subtype: wallet.subtype,
      access: 'SIGNER',
      balanceUSD: wallet.balanceusd,
    },
    explorerLink: `https://etherscan.io/tx/${txid}`,
  };
}
