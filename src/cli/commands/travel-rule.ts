import { travelRuleApplies, type TravelRuleSetting } from '../../custody/port.ts';
import type { Command } from '../command.ts';
import { withCustody } from '../custody.ts';
import { CliError, usageError } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';
import { table } from '../format.ts';

/** The setting without `dataJson`: the originator's name and identity document are never printed. */
type PrintedSetting = Omit<TravelRuleSetting, 'dataJson'>;

export const travelRuleCommand: Command = {
  name: 'travel-rule',
  synopsis: 'travel-rule',
  summary: 'upstream API 4.4: the travel-rule setting and whether the rule applies',
  help: `Calls is-enabled (upstream API 4.4, Basic auth) and prints the travel-rule setting and the decision the
worker's gate takes from it: the rule applies when outgoingTxn = 1 and mandatory = true. The setting
belongs to the calling application (the client credentials), not to a wallet, so there is no --wallet.
The originator data (dataJson) is never printed.

Needs the worker's CUSTODY_* configuration (CUSTODY_SDK_URL, CUSTODY_CLIENT_ID, CUSTODY_CLIENT_SECRET, ...).

Example:
  custody-worker travel-rule --json`,
  // Known only to be refused with the reason: someone reading "travel-rule --wallet" would expect a per-wallet answer.
  options: { wallet: { type: 'string' } },
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, out, env }) {
    if (values.wallet !== undefined) {
      throw usageError('travel-rule takes no --wallet: the setting belongs to the calling application (upstream API 4.4), not to a wallet');
    }
    const setting = await withCustody(env, out, async (client) => {
      if (!client.getTravelRuleSetting) {
        throw new CliError(
          'NO_GATE',
          'this custody provider does not gate on the travel rule: no transfer is ever blocked (docs/providers.md)',
          ExitCode.REFUSED,
        );
      }
      return client.getTravelRuleSetting();
    });
    const { dataJson: _originator, ...printed } = setting;
    out.result({ applies: travelRuleApplies(setting), setting: printed }, formatSetting);
  },
};

function formatSetting({ applies, setting }: { applies: boolean; setting: PrintedSetting }): string {
  return table([
    ['travel rule', applies ? 'applies (outgoingTxn = 1 and mandatory): jobs need travelRule.reference' : 'does not apply'],
    ['outgoingTxn', setting.outgoingTxn],
    ['mandatory', setting.mandatory],
    ['blockTxn', setting.blockTxn],
    ['incomingTxn', setting.incomingTxn],
    ['outgoingTxnTimeout', setting.outgoingTxnTimeout],
    ['status', setting.status],
    ['id', setting.id],
    ['appId', setting.appId],
    ['orgId', setting.orgId],
    ['updatedBy', setting.updatedBy],
    ['createdAt', setting.createdAt],
    ['updatedAt', setting.updatedAt],
  ]);
}
