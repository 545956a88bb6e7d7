/**
 * How answers are shaped per profile (settings.profile). `spec` hands the bodies of records.ts through
 * unchanged. `realistic` answers as a real provider does, which differs from its documentation wherever
 * the spec leaves room or a client should not depend on a detail:
 * - nulls and absent keys in optional or unused fields, `txid` null or absent (never "") before it is set;
 * - undocumented keys everywhere, nested objects included (`createdBy`, `meta`, `_links`, …);
 * - numbers as numeric text, and `bearer` in lower case, where the client decides nothing;
 * - addresses in another letter case from record to record (upstream API 2.2);
 * - get-transfer not finding a transfer: 404 `{ success: false, message: "no transfer found" }`;
 * - an answer that is not narrowed (narrowResults off) also lists `receive` records and older-format
 *   records of the wallet.
 *
 * What decides money and tracking keeps its documented type: 2.1 `id` (numeric text), `txid` (a string
 * once set), `type`, outputs' `address` and `amount` (decimal text), `sequenceId`; 2.4 `id`,
 * `sequenceId`, `destinationAddress`, `amount` (a JSON number); 2.5 `txid`; 2.6 `outgoingTxn`,
 * `mandatory`, `blockTxn`.
 *
 * Deterministic: each variation of a transfer's records is a draw keyed by its sequenceId and the
 * variation's name, so a transfer looks the same in every answer and from poll to poll, and a test with
 * fixed sequenceIds sees fixed answers. Token and is-enabled answers belong to no transfer: they vary
 * with their count since the last reset.
 */
import { createHash } from 'node:crypto';
import { buildWallet, formatUnits, mixCase, sha256Hex, unitsToNumber, usdOf, walletAddress } from './records.ts';
import type { SubmitRecord, TransactionRecord, TransferParty, WalletRecord, WalletTransactionRecord } from './records.ts';
import type { TravelRuleSetting } from './settings.ts';
import type { SimTransfer } from './state.ts';

type Json = Record<string, unknown>;

export interface TokenBody {
  access_token: string;
  expires_in: number;
  token_type: string;
}

export interface ProfileAnswer {
  status: number;
  body: unknown;
}

/** The answers a profile shapes. Each takes the spec body (records.ts) and returns what is sent. */
export interface AnswerProfile {
  token(body: TokenBody): unknown;
  isEnabled(setting: TravelRuleSetting): unknown;
  /** 2.4; the server writes a fixed amount's exact digits afterwards (records.submitRecordJson). */
  submitRecord(record: SubmitRecord, transfer: SimTransfer): object;
  transaction(record: TransactionRecord, transfer: SimTransfer): unknown;
  walletTransaction(record: WalletTransactionRecord, transfer: SimTransfer): unknown;
  /** get-transfer found nothing. */
  transferNotFound(): ProfileAnswer;
  /**
   * Records of other kinds appended to an answer that is not narrowed, newest first. `listed` are
   * the transfers already in the answer, `seed` the one it was asked for.
   */
  otherRecords(walletId: number, coin: string, seed: SimTransfer, listed: readonly SimTransfer[]): unknown[];
}

export const SPEC_PROFILE: AnswerProfile = {
  token: (body) => body,
  isEnabled: (setting) => ({ success: true, data: setting }),
  submitRecord: (record) => record,
  transaction: (record) => record,
  walletTransaction: (record) => ({ result: record }),
  transferNotFound: () => ({ status: 200, body: [] }),
  otherRecords: () => [],
};

/** `draw(name, n)`: 0 … n-1, fixed for the seed and the name. */
type Draw = (name: string, outOf: number) => number;

function drawsFor(seed: string): Draw {
  return (name, outOf) => createHash('sha256').update(`${seed}\u0000${name}`).digest().readUInt32BE(0) % outOf;
}

function oneIn(draw: Draw, name: string, outOf: number): boolean {
  return draw(name, outOf) === 0;
}

/** Same address, another spelling: as given, lower case, upper case, or every other letter toggled. */
function respell(address: string, draw: Draw, name: string): string {
  if (!address.startsWith('0x')) return address;
  switch (draw(name, 4)) {
    case 0:
      return address;
    case 1:
      return address.toLowerCase();
    case 2:
      return `0x${address.slice(2).toUpperCase()}`;
    default:
      return mixCase(address.toLowerCase());
  }
}

/** Undocumented keys a provider adds: who made the record, a nested `meta`, HAL-style links. */
function extras(draw: Draw, where: string, href: string): Json {
  const out: Json = {};
  if (oneIn(draw, `${where}:createdBy`, 2)) out.createdBy = draw(`${where}:creator`, 2) === 0 ? 1043 : 'system';
  if (oneIn(draw, `${where}:meta`, 2)) {
    const revision = 1 + draw(`${where}:revision`, 9);
    out.meta = { source: 'ledger-sync', revision, flags: { reviewed: false, tags: [] } };
  }
  if (oneIn(draw, `${where}:links`, 3)) out._links = { self: { href } };
  return out;
}

/** 2.3: fields null or missing, numbers as text, extra keys. One shaping per record, shared by its parties. */
function shapeWallet(wallet: WalletRecord, draw: Draw): Json {
  const out: Json = { ...wallet };
  if (oneIn(draw, 'wallet:balance-null', 3)) {
    out.balance = null;
    out.balanceusd = null;
  }
  if (oneIn(draw, 'wallet:name-null', 4)) out.name = null;
  if (oneIn(draw, 'wallet:sparse', 3)) {
    delete out.raw;
    delete out.walletpath;
    delete out.teamId;
    delete out.issynced;
  }
  if (oneIn(draw, 'wallet:text', 3)) {
    out.status = String(wallet.status);
    out.version = String(wallet.version);
    out.orgid = String(wallet.orgid);
  }
  if (oneIn(draw, 'wallet:extra', 2)) {
    out.createdAt = '2023-05-02T14:12:09.004Z';
    out.meta = { labels: ['treasury'], policy: { id: `pol-${wallet.id}`, approvals: { required: 1 } } };
  }
  return out;
}

function shapeParty(party: TransferParty, draw: Draw, where: string, wallet: Json | undefined): Json {
  const out: Json = { ...party, address: respell(party.address, draw, `${where}:case`) };
  if (party.wallet) out.wallet = wallet;
  if (oneIn(draw, `${where}:label`, 3)) out.label = null;
  if (oneIn(draw, `${where}:meta`, 4)) out.meta = { script: null, tags: [] };
  return out;
}

/** 2.1, for a transfer's own record and for mixed-in `receive` records alike. */
function shapeTransaction(record: TransactionRecord, draw: Draw): Json {
  const embedded = [...record.inputs, ...record.outputs].find((party) => party.wallet)?.wallet;
  const wallet = embedded ? shapeWallet(embedded, draw) : undefined;
  const out: Json = {
    ...record,
    inputs: record.inputs.map((party, index) => shapeParty(party, draw, `in:${index}`, wallet)),
    outputs: record.outputs.map((party, index) => shapeParty(party, draw, `out:${index}`, wallet)),
  };
  if (record.txid === '') {
    if (oneIn(draw, 'txid-absent', 2)) delete out.txid;
    else out.txid = null;
  }
  if (oneIn(draw, 'tag-absent', 2)) delete out.DestinationTag;
  if (oneIn(draw, 'usd-null', 3)) out.usd = null;
  if (oneIn(draw, 'fee-absent', 3)) delete out.feeString;
  if (oneIn(draw, 'wallet-type-absent', 3)) delete out.walletType;
  if (oneIn(draw, 'wallet-text', 2)) out.wallet = String(record.wallet);
  if (oneIn(draw, 'base-value-text', 3)) out.baseValue = String(record.baseValue);
  return { ...out, ...extras(draw, 'tx', `/api/wallet/${record.wallet}/transfers/${record.id}`) };
}

/** Record ids of mixed-in records: below the 70,000,000 + n of transfers, so never one of theirs. */
const OTHER_ID_BASE = 60_000_000;
/** Mixed-in records per wallet: even slots `receive`, odd slots older-format sends. */
const OTHER_SLOTS = 6;
/** Mixed-in records are dated before this, after one another, an hour or more apart. */
const OTHER_BEFORE = Date.parse('2025-01-01T00:00:00.000Z');

interface OtherRecord {
  date: number;
  /** The address and amount a matcher would compare, to keep a transfer's own pair out. */
  address: string;
  amount: string;
  body: Json;
}

/**
 * Slot `slot` of the wallet's history before the simulator: a `receive` (upstream API 2.1 form, shaped like any
 * record) or an older-format send (no inputs, no fee or usd fields, `value` a JSON number). Addresses
 * and amounts come from their own hash domain, never from a transfer's txHex.
 */
function otherRecord(walletId: number, coin: string, slot: number): OtherRecord {
  const seed = `other:${walletId}:${slot}`;
  const hash = sha256Hex(seed);
  const word = (from: number, to: number): number => Number.parseInt(hash.slice(from, to), 16);
  const units = BigInt((word(40, 48) % 400_000_000) + 50_000);
  const amount = formatUnits(units);
  const date = OTHER_BEFORE - (slot + 1) * 3_600_000 - (word(48, 56) % 3_000_000);
  const id = String(OTHER_ID_BASE + ((walletId * OTHER_SLOTS + slot) % 10_000_000));
  const txid = `0x${sha256Hex(`${seed}:txid`)}`;
  const counterparty = `0x${hash.slice(0, 40)}`;
  if (slot % 2 === 0) {
    const wallet = buildWallet(walletId, coin);
    const record: TransactionRecord = {
      coin,
      id,
      wallet: walletId,
      txid,
      date: new Date(date).toISOString(),
      value: amount,
      valueString: amount,
      baseValue: unitsToNumber(units),
      baseValueString: amount,
      feeString: formatUnits(0n),
      usd: usdOf(units).toFixed(5),
      walletType: 'pipeline',
      inputs: [{ address: counterparty, amount, isMine: false }],
      outputs: [{ address: walletAddress(walletId), amount, isMine: true, wallet }],
      type: 'receive',
      DestinationTag: null,
    };
    return { date, address: walletAddress(walletId), amount, body: shapeTransaction(record, drawsFor(seed)) };
  }
  const body: Json = {
    id,
    coin,
    wallet: walletId,
    txid,
    date: new Date(date).toISOString(),
    type: 'send',
    value: -unitsToNumber(units),
    fee: 0.00021,
    outputs: [{ address: counterparty, amount, isMine: false }],
    confirmations: 12 + (word(56, 60) % 1_000),
  };
  return { date, address: counterparty, amount, body };
}

/** Address in lower case and amount without trailing zeros: 1.5 and 1.50000000 are one amount. */
function pairKey(address: string, amount: string): string {
  return `${address.toLowerCase()}|${amount.replace(/\.?0+$/, '')}`;
}

export class RealisticProfile implements AnswerProfile {
  private tokens = 0;
  private travelRules = 0;

  reset(): void {
    this.tokens = 0;
    this.travelRules = 0;
  }

  token(body: TokenBody): unknown {
    const draw = drawsFor(`token:${this.tokens++}`);
    const out: Json = { ...body };
    if (oneIn(draw, 'expires-text', 2)) out.expires_in = String(body.expires_in);
    if (oneIn(draw, 'type-lower', 2)) out.token_type = body.token_type.toLowerCase();
    if (oneIn(draw, 'extra', 2)) {
      out.scope = 'custody:read custody:write';
      out['not-before-policy'] = 0;
    }
    return out;
  }

  isEnabled(setting: TravelRuleSetting): unknown {
    const draw = drawsFor(`travel-rule:${this.travelRules++}`);
    const data: Json = { ...setting };
    if (oneIn(draw, 'data-null', 3)) data.dataJson = null;
    else if (oneIn(draw, 'data-extra', 2)) {
      const address = { ...setting.dataJson.address, postalCode: '10115' };
      data.dataJson = { ...setting.dataJson, address, dateOfBirth: null };
    }
    if (oneIn(draw, 'updated-by-null', 3)) data.updatedBy = null;
    if (oneIn(draw, 'timeout-absent', 2)) delete data.outgoingTxnTimeout;
    if (oneIn(draw, 'ids-text', 3)) {
      for (const key of ['id', 'appId', 'incomingTxn', 'status', 'orgId'] as const) data[key] = String(setting[key]);
    }
    Object.assign(data, extras(draw, 'data', `/api/travel-rule/${setting.id}`));
    const envelope: Json = { success: true, data };
    if (oneIn(draw, 'message', 3)) envelope.message = 'travel rule setting fetched';
    return envelope;
  }

  submitRecord(record: SubmitRecord, transfer: SimTransfer): object {
    const draw = drawsFor(`send:${transfer.sequenceId}`);
    const raw = JSON.parse(record.raw) as Json;
    const user: Json = { ...(raw.user as Json) };
    if (oneIn(draw, 'photo-null', 2)) user.photoURL = null;
    if (oneIn(draw, 'login-null', 2)) user.lastLoginAt = null;
    if (oneIn(draw, 'user-extra', 3)) user.settings = { locale: 'en-US', mfa: { enabled: true } };
    raw.user = user;
    if (oneIn(draw, 'raw-extra', 2)) raw.meta = { client: 'custody-sdk', version: '2.14.0' };
    const out: Json = {
      ...record,
      raw: JSON.stringify(raw),
      destinationAddress: respell(record.destinationAddress, draw, 'destination:case'),
    };
    if (oneIn(draw, 'usd-text', 2)) out.usdamount = String(record.usdamount);
    if (oneIn(draw, 'userid-text', 3)) out.userid = String(record.userid);
    if (oneIn(draw, 'status-text', 3)) out.status = String(record.status);
    if (oneIn(draw, 'type-text', 3)) out.type = String(record.type);
    if (oneIn(draw, 'tsid-text', 3)) out.transactionSequenceId = String(record.transactionSequenceId);
    return { ...out, ...extras(draw, 'send', `/api/wallet/${record.walletid}/transfers/${record.id}`) };
  }

  transaction(record: TransactionRecord, transfer: SimTransfer): unknown {
    return shapeTransaction(record, drawsFor(`tx:${transfer.sequenceId}`));
  }

  walletTransaction(record: WalletTransactionRecord, transfer: SimTransfer): unknown {
    const draw = drawsFor(`wallet-tx:${transfer.sequenceId}`);
    const wallet: Json = { ...record.wallet, address: respell(record.wallet.address, draw, 'wallet:case') };
    if (oneIn(draw, 'wallet:usd-null', 3)) wallet.balanceUSD = null;
    if (oneIn(draw, 'wallet:extra', 2)) wallet.meta = { labels: [], limits: { daily: null } };
    const out: Json = { ...record, wallet };
    if (oneIn(draw, 'running-absent', 2)) delete out.runningbalance;
    if (oneIn(draw, 'explorer-null', 3)) out.explorerLink = null;
    if (oneIn(draw, 'walletid-text', 3)) out.walletid = String(record.walletid);
    // upstream API 2.5: "or a literal marker word when external"
    out.externaladdress = oneIn(draw, 'external-word', 4) ? 'external' : respell(record.externaladdress, draw, 'external:case');
    Object.assign(out, extras(draw, 'wallet-tx', `/api/wallet/${record.walletid}/txid/${record.txid}`));
    return { result: out };
  }

  transferNotFound(): ProfileAnswer {
    return { status: 404, body: { success: false, message: 'no transfer found' } };
  }

  otherRecords(walletId: number, coin: string, seed: SimTransfer, listed: readonly SimTransfer[]): unknown[] {
    const draw = drawsFor(`others:${seed.sequenceId}`);
    const count = draw('count', 4);
    const first = draw('first', OTHER_SLOTS);
    // A record with a listed transfer's destination and amount would make the transfer ambiguous to a
    // matcher. Separate hash domains make that impossible by accident; this makes it impossible.
    const pairs = new Set(listed.map(({ derived }) => pairKey(derived.destination, formatUnits(derived.amountUnits, derived.scale))));
    const records: OtherRecord[] = [];
    for (let index = 0; index < count; index += 1) {
      const record = otherRecord(walletId, coin, (first + index) % OTHER_SLOTS);
      if (!pairs.has(pairKey(record.address, record.amount))) records.push(record);
    }
    return records.sort((a, b) => b.date - a.date).map((record) => record.body);
  }
}
