import type { WalletTransaction } from '../../custody/port.ts';
import { stringOption, type Command } from '../command.ts';
import { custodyOptions, txidArgument, walletArgument, withCustody } from '../custody.ts';
import { show, table } from '../format.ts';

export const walletTransactionCommand: Command = {
  name: 'wallet-transaction',
  synopsis: 'wallet-transaction --wallet ID --txid TXID [--coin COIN]',
  summary: 'upstream API 4.3: one wallet transaction',
  help: `Calls get single wallet transaction (upstream API 4.3, Bearer auth) and prints the record. Upstream's 404
exits 3.

Options:
  --wallet ID     wallet id (digits; with CUSTODY_PROVIDER=bitgo, 32 lowercase hex)
  --txid TXID     transaction hash
  --coin COIN     the asset code: required with CUSTODY_PROVIDER=bitgo, whose paths name it

Needs the worker's CUSTODY_* configuration (CUSTODY_BASE_URL, CUSTODY_TOKEN_URL or CUSTODY_ACCESS_TOKEN, ...).

Example:
  custody-worker wallet-transaction --wallet 310 --txid 0x5f1c... --json`,
  options: { wallet: custodyOptions.wallet, coin: custodyOptions.coin, txid: custodyOptions.txid },
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, out, env }) {
    const walletId = walletArgument(values);
    const txid = txidArgument(values);
    const wallet = { walletId, coin: stringOption(values, 'coin') ?? '' };
    const record = await withCustody(env, out, (client) => client.getWalletTransaction(wallet, txid));
    out.result(record, formatWalletTransaction);
  },
};

function formatWalletTransaction(tx: WalletTransaction): string {
  const wallet = (typeof tx.wallet === 'object' && tx.wallet !== null ? tx.wallet : {}) as Record<string, unknown>;
  return table([
    ['txid', tx.txid],
    ['id', tx.id],
    ['type', tx.type],
    ['wallet', `${show(tx.walletid)} ${show(wallet.name)} (${show(wallet.type)}, ${show(wallet.config)}, ${show(wallet.subtype)})`],
    ['coin', `${show(tx.coin)} on ${show(wallet.chain)}`],
    ['change', `${tx.effectivechange} (usd ${tx.effectivechangeusd})`],
    ['fee', tx.fee],
    ['running balance', tx.runningbalance],
    ['counterparty', tx.externaladdress],
    ['timestamp', tx.timestamp],
    ['explorer', tx.explorerLink],
  ]);
}
