import { FailureCode } from '../../../../packages/producer/src/events.ts';
import type { SubmitPayload } from '../../../../packages/producer/src/payload.ts';
import { SEND_VIEW, type GateDecision, type TransferRecord } from '../../../ledger/ledger.ts';
import { op } from '../../../ledger/operations.ts';
import { RetryLater } from '../../../queues/outcomes.ts';
import { backoffDelay } from '../../../timing.ts';
import { travelRuleApplies } from '../../../custody/port.ts';
import { CustodyError } from '../../../custody/errors.ts';
import type { GateSetting } from '../../../custody/travel-rule-cache.ts';
import { changed, storedPayload, type Run, type Step } from './context.ts';
import { leaseStart, sendTaken } from './send.ts';

/** The travel-rule decision for a payload under a setting (the text of its time is the process's clock). */
export function decide(setting: GateSetting | null, payload: SubmitPayload, now: number): GateDecision {
  // A provider that does not gate (setting null): the rule never applies here, nothing is blocked.
  const applies = setting !== null && travelRuleApplies(setting);
  const hasReference = payload.travelRule?.reference !== undefined;
  return {
    setting: setting && { outgoingTxn: setting.outgoingTxn, mandatory: setting.mandatory, blockTxn: setting.blockTxn },
    settingFetchedAt: setting?.fetchedAt ?? '',
    checkedAt: new Date(now).toISOString(),
    applies,
    reference: hasReference,
    outcome: applies && !hasReference ? 'blocked' : 'passed',
  };
}

/**
 * The common case in one step: a transfer with no record yet whose gate passes goes straight to
 * `submitting` (record, gate decision and send lease in one transition), then sends. It is as safe
 * as the step-by-step path: a crash after the transition leaves `submitting` with a pending send,
 * which the next runner treats as "may have gone out". Anything else (a record exists, the rule
 * blocks, the setting cannot be fetched) returns null and takes the step-by-step path.
 */
export async function startFresh(run: Run, jobId: string, payload: SubmitPayload): Promise<Step | null> {
  const { deps } = run;
  let setting: GateSetting | null;
  try {
    setting = await deps.travelRule.setting();
  } catch {
    return null; // the gate step retries, with the failure counted on the record
  }
  const decision = decide(setting, payload, (deps.now ?? Date.now)());
  if (decision.outcome !== 'passed') return null;
  const request = op.createAndTakeSend(jobId, payload, decision, run.owner, deps.sendLeaseMs);
  const session = deps.ledger.session();
  const started = leaseStart(run);
  const taken = await deps.ledger.transitionReading(payload.halfSigned.sequenceId, request, SEND_VIEW);
  // Refused: a record exists, or the ledger's epoch (epoch.ts) asks for the step-by-step path.
  if (!taken.ok) return null;
  return sendTaken(run, taken.record, payload, session, started);
}

/** received → blocked | gated. Nothing is sent here; a crash leaves `received`, which gates again. */
export async function gate(run: Run, record: TransferRecord): Promise<Step> {
  const { deps } = run;
  const payload = storedPayload(record);
  let setting: GateSetting | null;
  try {
    setting = await deps.travelRule.setting();
  } catch (error) {
    const failures = record.failures + 1;
    const code = FailureCode.TRAVEL_RULE_UNAVAILABLE;
    if (failures >= deps.attempts) {
      const custody = error instanceof CustodyError ? error : undefined;
      const data = { code, httpStatus: custody?.httpStatus ?? null, message: custody?.message ?? 'retries exhausted', attempts: failures };
      return changed(await deps.ledger.transition(record.sequenceId, op.gateFailed(failures, data)));
    }
    await deps.ledger.transition(record.sequenceId, op.gateUnavailable(failures));
    const delayMs = backoffDelay(deps.retry, failures);
    run.log.warn({ err: error, code, failures, delayMs }, 'travel-rule lookup failed, retrying later');
    throw new RetryLater(delayMs, code);
  }
  const decision = decide(setting, payload, (deps.now ?? Date.now)());
  if (decision.outcome === 'blocked' && decision.setting !== null) {
    const blocked = await deps.ledger.transition(record.sequenceId, op.block({ ...decision, setting: decision.setting }));
    run.log.info({ setting: decision.setting }, 'transfer blocked by the travel rule');
    return changed(blocked);
  }
  return changed(await deps.ledger.transition(record.sequenceId, op.pass(decision)));
}
