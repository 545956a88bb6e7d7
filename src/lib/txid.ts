const HEX_TXID = /^(0x)?[0-9a-f]+$/i;

/**
 * One spelling per transaction: hex txids (with or without `0x`) in lower case, as providers and
 * explorers print them in either case; any other form as given.
 */
export function canonicalTxid(txid: string): string {
  return HEX_TXID.test(txid) ? txid.toLowerCase() : txid;
}
