import { stringOption, type Command } from '../command.ts';
import { coinArgument, custodyOptions, walletArgument, withCustody } from '../custody.ts';
import { usageError } from '../errors.ts';
import { table } from '../format.ts';

export const bitgoCommand: Command = {
  name: 'bitgo',
  synopsis: 'bitgo webhooks add --wallet ID --coin COIN --url URL',
  summary: "register BitGo's transfer webhook of a wallet, the worker's wake-up for tracking",
  help: `Registers a \`transfer\` webhook of the wallet with BitGo (POST /api/v2/{coin}/wallet/{walletId}/webhooks,
{ type: transfer, url }) and prints BitGo's record of it. Point --url at the worker's
POST /providers/bitgo/webhook (docs/providers.md); BitGo then calls it when a transfer changes, and the
worker polls that transfer at once instead of at its next scheduled poll.

Options:
  --wallet ID     BitGo's wallet id (32 lowercase hex)
  --coin COIN     the coin of the wallet (e.g. tbtc)
  --url URL       where BitGo calls (http or https)

Needs CUSTODY_PROVIDER=bitgo, BITGO_BASE_URL, BITGO_ACCESS_TOKEN and BITGO_WEBHOOK_SECRET.

Example:
  custody-worker bitgo webhooks add --wallet 5d1f0c9b2a7d4e3f8a6b1c0d9e8f7a6b --coin tbtc --url https://worker.example/providers/bitgo/webhook`,
  options: { wallet: custodyOptions.wallet, coin: custodyOptions.coin, url: { type: 'string' } },
  positionals: { min: 2, max: 2, names: 'webhooks add' },
  async run({ values, positionals, out, env }) {
    if (positionals[0] !== 'webhooks' || positionals[1] !== 'add')
      throw usageError('usage: custody-worker bitgo webhooks add --wallet ID --coin COIN --url URL');
    const wallet = { walletId: walletArgument(values), coin: coinArgument(values) };
    const url = stringOption(values, 'url');
    if (url === undefined || !/^https?:\/\/[^\s]+$/.test(url)) throw usageError('--url must be an http(s) URL');
    const record = await withCustody(env, out, (client) => {
      if (!client.wakeups)
        throw usageError('needs CUSTODY_PROVIDER=bitgo and BITGO_WEBHOOK_SECRET (the secret BitGo signs its calls with)');
      return client.wakeups.register(wallet, url);
    });
    out.result(record, (hook) =>
      table(Object.entries(hook).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)])),
    );
  },
};
