/**
 * The fields of one entry of the worker's events stream, in the order src/ledger/transition.lua writes
 * them (event, sequenceId, walletId, coin, version, at, data, metadata, then epoch when given), as a flat
 * list for XADD. Unset fields take the values of a sample transfer: walletId `'310'`, coin `'eth'`, `at`
 * now, metadata empty. Every value is written as given, so a test can write a field empty or malformed.
 */
export function streamEntryFields(entry: {
  event: string;
  sequenceId: string;
  version: string;
  data: string;
  walletId?: string;
  coin?: string;
  at?: string;
  metadata?: string;
  /** The ledger's epoch field; left out when undefined (`''` writes it empty). */
  epoch?: string;
}): string[] {
  return [
    ...['event', entry.event, 'sequenceId', entry.sequenceId],
    ...['walletId', entry.walletId ?? '310', 'coin', entry.coin ?? 'eth'],
    ...['version', entry.version, 'at', entry.at ?? new Date().toISOString()],
    ...['data', entry.data, 'metadata', entry.metadata ?? ''],
    ...(entry.epoch === undefined ? [] : ['epoch', entry.epoch]),
  ];
}
