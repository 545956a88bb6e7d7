import type { ListedTransfer } from '../../custody/port.ts';
import { stringOption, type Command } from '../command.ts';
import { coinArgument, custodyOptions, sequenceIdArgument, txidArgument, walletArgument, withCustody } from '../custody.ts';
import { usageError } from '../errors.ts';
import { show, table } from '../format.ts';

export const getTransferCommand: Command = {
  name: 'get-transfer',
  synopsis: 'get-transfer --wallet ID --coin COIN (--sequence-id ID | --txid TXID)',
  summary: "upstream API 4.1: a wallet's transactions by sequenceId or by txid",
  help: `Calls get-transfer (upstream API 4.1, Basic auth) and prints the transactions upstream returns, newest first.
The list may hold other transactions of the wallet too (the spec does not say it is narrowed); an
empty list is an answer, not an error (exit 0).

Options:
  --wallet ID          wallet id (digits; with CUSTODY_PROVIDER=bitgo, 32 lowercase hex)
  --coin COIN          lowercase asset code, e.g. eth
  --sequence-id ID     look up by sequenceId, or
  --txid TXID          look up by transaction hash

Needs the worker's CUSTODY_* configuration (CUSTODY_SDK_URL, CUSTODY_CLIENT_ID, CUSTODY_CLIENT_SECRET, ...).

Examples:
  custody-worker get-transfer --wallet 310 --coin eth --sequence-id a88a1846-b23d-f7e8-2344-f2bddb0c16f9
  custody-worker get-transfer --wallet 310 --coin eth --txid 0x5f1c... --json`,
  options: {
    wallet: custodyOptions.wallet,
    coin: custodyOptions.coin,
    'sequence-id': custodyOptions['sequence-id'],
    txid: custodyOptions.txid,
  },
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, out, env }) {
    const walletId = walletArgument(values);
    const coin = coinArgument(values);
    const bySequence = stringOption(values, 'sequence-id') !== undefined;
    const byTxid = stringOption(values, 'txid') !== undefined;
    if (bySequence === byTxid) throw usageError('give exactly one of --sequence-id and --txid');
    const sequenceId = bySequence ? sequenceIdArgument(values) : undefined;
    const txid = byTxid ? txidArgument(values) : undefined;
    const wallet = { walletId, coin };
    const transactions = await withCustody(env, out, (client) =>
      sequenceId !== undefined ? client.getTransfersBySequenceId(wallet, sequenceId) : client.getTransfersByTxId(wallet, txid!),
    );
    out.result(transactions, formatTransactions);
  },
};

function formatTransactions(transactions: ListedTransfer[]): string {
  if (transactions.length === 0) return 'no transactions';
  const blocks = transactions.map((tx, index) =>
    [
      `#${index + 1}`,
      table([
        ['id', tx.id],
        ['type', tx.type],
        ['sequenceId', tx.sequenceId],
        ['txid', tx.txid],
        ['date', tx.date],
        ['wallet', `${tx.wallet} (${tx.walletType})`],
        ['coin', tx.coin],
        ['value', `${tx.valueString} (usd ${tx.usd})`],
        ['fee', tx.feeString],
        ['destination tag', tx.DestinationTag],
      ])
        .split('\n')
        .map((line) => `  ${line}`)
        .join('\n'),
      ...parties('inputs', Array.isArray(tx.inputs) ? tx.inputs : []),
      ...parties('outputs', tx.outputs),
    ].join('\n'),
  );
  return `${transactions.length} transaction(s), newest first\n${blocks.join('\n')}`;
}

function parties(label: string, list: readonly unknown[]): string[] {
  if (list.length === 0) return [`  ${label}: none`];
  return [
    `  ${label}:`,
    ...list.map((item) => {
      const party = (item ?? {}) as { address?: unknown; amount?: unknown; isMine?: unknown; wallet?: unknown };
      const wallet = (party.wallet ?? {}) as { id?: unknown; name?: unknown };
      return `    ${show(party.address)} ${show(party.amount)}${party.isMine === true ? ` (mine: wallet ${show(wallet.id)} ${show(wallet.name)})` : ''}`;
    }),
  ];
}
