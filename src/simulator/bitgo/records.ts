/**
 * The bodies the BitGo simulator answers, shaped as docs/bitgo-api.md describes them: the transfer
 * (section 4), send's two success answers (section 2) and the error envelope (section 5).
 */
import { randomBytes } from 'node:crypto';
import { json } from '../http.ts';
import type { Answer } from '../http.ts';
import { isEvmCoin } from './state.ts';
import type { BitgoState, BitgoTransfer } from './state.ts';

/** The user every simulated send is made by (a BitGo user id: 32 hex). */
export const SIM_USER_ID = '5b4e7d1c9a0f3e2d8c6b1a7f4e3d2c1b';
/** The enterprise of every simulated wallet. */
export const SIM_ENTERPRISE_ID = '5a1c9d8e7f6b4a3c2d1e0f9a8b7c6d5e';

/** A height BitGo gives an unconfirmed transfer (api.yaml: "999999999 if unconfirmed"). */
const UNCONFIRMED_HEIGHT = 999_999_999;

/** Like the documented example `cjo7uw7si0buzttlmazmvthay`: 25 characters of [0-9a-z]. */
export function newRequestId(): string {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  return [...randomBytes(25)].map((byte) => alphabet[byte % 36]).join('');
}

/**
 * BitGo's error envelope: `error` (human-readable, may change), `name` (a stable code), `requestId`
 * (the client's Request-ID when it sent one), echoed as the `request-id` header. `extra` carries
 * `context` and the like where the API documents them.
 */
export function bitgoError(status: number, name: string, error: string, requestId: string, extra: Record<string, unknown> = {}): Answer {
  return json(status, { error, name, requestId, ...extra }, { 'request-id': requestId });
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** A stable address standing for the wallet itself in `entries`. */
function walletAddress(transfer: BitgoTransfer): string {
  return isEvmCoin(transfer.coin) ? `0x${transfer.walletId}${transfer.walletId.slice(0, 8)}` : `sim1${transfer.walletId}`;
}

function total(transfer: BitgoTransfer): bigint {
  return transfer.recipients.reduce((sum, recipient) => sum + recipient.amount, 0n);
}

/**
 * The transfer as get-transfer-by-sequenceId answers it (api.yaml Transfer: the required fields, and
 * `sequenceId`, `entries`, `feeString`, `pendingApproval` and the state times). A send's `value` is
 * negative: what left the wallet, fee included; `baseValue` excludes the fee. A txid not yet known is
 * absent.
 */
export function transferRecord(state: BitgoState, transfer: BitgoTransfer, now: number): Record<string, unknown> {
  const current = state.stateOf(transfer, now);
  const txid = state.shownTxid(transfer, now);
  const sent = total(transfer);
  const value = -(sent + transfer.fee);
  const signed = now >= transfer.approvedAt && current !== 'pendingApproval' && current !== 'rejected';
  const history: Array<Record<string, unknown>> = [{ date: iso(transfer.acceptedAt), user: SIM_USER_ID, action: 'created' }];
  if (transfer.pendingApprovalId !== undefined && signed) history.push({ date: iso(transfer.approvedAt), action: 'approved' });
  if (signed) history.push({ date: iso(transfer.approvedAt), action: 'signed' });
  const lastChange = Math.max(transfer.acceptedAt, signed ? transfer.approvedAt : 0, txid ? transfer.txidAt : 0, transfer.forced?.at ?? 0);
  const record: Record<string, unknown> = {
    id: transfer.id,
    coin: transfer.coin,
    wallet: transfer.walletId,
    enterprise: SIM_ENTERPRISE_ID,
    ...(txid ? { txid } : {}),
    height: current === 'confirmed' ? 1 : UNCONFIRMED_HEIGHT,
    date: iso(Math.min(lastChange, now)),
    confirmations: current === 'confirmed' ? 1 : 0,
    type: 'send',
    value: Number(value),
    valueString: value.toString(),
    baseValue: Number(-sent),
    baseValueString: (-sent).toString(),
    feeString: transfer.fee.toString(),
    usd: 0,
    usdRate: 0,
    state: current,
    tags: [transfer.walletId, SIM_ENTERPRISE_ID],
    history: history.reverse(),
    comment: transfer.comment,
    coinSpecific: {},
    sequenceId: transfer.sequenceId,
    entries: [
      { address: walletAddress(transfer), wallet: transfer.walletId, value: Number(value), valueString: value.toString() },
      ...transfer.recipients.map((recipient) => ({
        address: recipient.address,
        value: Number(recipient.amount),
        valueString: recipient.amount.toString(),
      })),
    ],
    createdTime: iso(transfer.acceptedAt),
  };
  if (transfer.pendingApprovalId !== undefined) record.pendingApproval = transfer.pendingApprovalId;
  if (signed) record.signedTime = iso(transfer.approvedAt);
  return record;
}

/** send's 200 (api.yaml TransactionResponse): the transfer, its txid when known, the tx, its state. */
export function sendResponse(state: BitgoState, transfer: BitgoTransfer, now: number): Record<string, unknown> {
  const txid = state.shownTxid(transfer, now);
  return {
    transfer: transferRecord(state, transfer, now),
    ...(txid ? { txid } : {}),
    tx: transfer.tx,
    status: state.stateOf(transfer, now),
  };
}

/**
 * send's 202 (api.yaml PendingApproval): the approval BitGo now waits for. It names neither the
 * transfer nor the sequenceId: the transfer is found with get-transfer-by-sequenceId.
 */
export function pendingApprovalResponse(transfer: BitgoTransfer): Record<string, unknown> {
  return {
    id: transfer.pendingApprovalId,
    coin: transfer.coin,
    wallet: transfer.walletId,
    enterprise: SIM_ENTERPRISE_ID,
    creator: SIM_USER_ID,
    createDate: iso(transfer.acceptedAt),
    info: {
      type: 'transactionRequest',
      transactionRequest: {
        comment: transfer.comment,
        recipients: transfer.recipients.map((recipient) => ({ address: recipient.address, amount: recipient.amount.toString() })),
        requestedAmount: total(transfer).toString(),
        fee: transfer.fee.toString(),
        isUnsigned: false,
      },
    },
    state: 'pending',
    scope: 'wallet',
    userIds: [SIM_USER_ID],
    approvalsRequired: 1,
  };
}
