/**
 * Cancels racing sends (docs/contract.md section 4, "Cancelling a transfer"), through the whole worker
 * against the simulator: 200 transfers whose sendTransaction takes 300 ms, each cancelled once at a
 * moment drawn from a seed (before its submit, around its gate and send claim, during its send, after
 * it; and about one in ten once the simulator has taken its send, however long the worker took to get
 * there, so that a busy machine, whose worker reaches no send within the drawn moments, still races the
 * cancel against a send), half through the worker's Ledger.cancel, half through the producer package's
 * cancel(). At the
 * end, every transfer has exactly one terminal event, and the sends the simulator accepted are exactly
 * the transfers whose cancel did not take effect: a cancel and a send never both succeed, and a cancel
 * that says `cancelled` really stopped the send. CANCEL_RACE_SEED=<seed> replays the draws (the timing
 * of the worker is real, so a replay draws the same moments, not the same interleaving).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TERMINAL_EVENTS, type TransferEvent } from '../../packages/producer/src/events.ts';
import type { CancelResult } from '../../packages/producer/src/transition.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { sleep, until } from '../helpers/wait.ts';

const TRANSFERS = 200;
const SEND_MS = 300;
const SEED = Number(process.env.CANCEL_RACE_SEED ?? Date.now() % 2_147_483_647);

let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    name: 'cancel-race',
    sim: { settings: { latencyMs: { sendTransaction: SEND_MS } } },
    env: { SUBMIT_CONCURRENCY: '32', CUSTODY_TIMEOUT: '5s' },
  });
});
afterAll(async () => {
  await h?.close();
});

describe(`${TRANSFERS} transfers with ${SEND_MS} ms sends, each cancelled at a random moment (seed ${SEED})`, () => {
  it('accepted sends = transfers not cancelled; exactly one terminal event each', async () => {
    const draw = seededRandom(SEED);
    const transfers = Array.from({ length: TRANSFERS }, (_, index) => {
      const payload = samplePayload();
      return {
        index,
        payload,
        sequenceId: payload.halfSigned.sequenceId,
        // Submitted within the first 2 s; cancelled from 300 ms before its submit to 1.2 s after it.
        submitAt: Math.floor(draw() * 2_000),
        cancelAfter: Math.floor(draw() * 1_500) - 300,
        via: draw() < 0.5 ? ('ledger' as const) : ('producer' as const),
        // Cancelled once its send reached the simulator (a condition, not a moment): too-late for sure.
        afterSend: draw() < 0.1,
        result: undefined as CancelResult | undefined,
      };
    });
    const ids = new Set(transfers.map((transfer) => transfer.sequenceId));
    const started = Date.now();
    const at = (ms: number) => sleep(Math.max(0, started + ms - Date.now()));
    await Promise.all(
      transfers.flatMap((transfer) => [
        at(transfer.submitAt).then(() => h.producer.submit(transfer.payload)),
        at(transfer.submitAt + (transfer.afterSend ? 0 : transfer.cancelAfter)).then(async () => {
          if (transfer.afterSend)
            await until(`the send of ${transfer.sequenceId} taken by the simulator`, 60_000, async () =>
              h.sim.transfer(transfer.sequenceId) === undefined ? undefined : true,
            );
          const reason = `race ${SEED}/${transfer.index}`;
          transfer.result =
            transfer.via === 'ledger'
              ? await h.app!.ledger.cancel(transfer.sequenceId, { reason, by: 'cli' })
              : await h.producer.cancel(transfer.sequenceId, { reason });
        }),
      ]),
    );

    // Every transfer ends: cancelled, or sent and tracked to broadcast.
    const read = async (): Promise<TransferEvent[]> => (await h.events()).filter((event) => ids.has(event.sequenceId));
    const endedCount = (list: TransferEvent[]) =>
      new Set(list.filter((event) => TERMINAL_EVENTS.has(event.event)).map((event) => event.sequenceId)).size;
    const deadline = Date.now() + 60_000;
    let events = await read();
    while (endedCount(events) < TRANSFERS && Date.now() < deadline) {
      await sleep(200);
      events = await read();
    }

    const outcomes = { cancelled: 0, 'too-late': 0, 'already-ended': 0 } as Record<CancelResult['outcome'], number>;
    const tooLateStates: Record<string, number> = {};
    const problems: string[] = [];
    const sends = h.sim.stats().sends;
    let accepted = 0;
    for (const transfer of transfers) {
      const result = transfer.result!;
      outcomes[result.outcome]++;
      if (result.outcome === 'too-late') tooLateStates[result.state] = (tooLateStates[result.state] ?? 0) + 1;
      const own = events.filter((event) => event.sequenceId === transfer.sequenceId);
      const terminal = own.filter((event) => TERMINAL_EVENTS.has(event.event)).map((event) => event.event);
      const sent = sends[transfer.sequenceId]?.accepted ?? 0;
      accepted += sent;
      const moment = transfer.afterSend ? 'once its send was taken' : `${transfer.cancelAfter} ms after submit`;
      const name = `${transfer.sequenceId} (${transfer.via}, cancel ${moment}, ${result.outcome} ${result.state})`;
      if (terminal.length !== 1) problems.push(`${name}: terminal events [${terminal.join(', ')}]`);
      if (result.outcome === 'cancelled') {
        if (sent !== 0) problems.push(`${name}: cancelled, yet ${sent} sends accepted`);
        if (own.map((event) => event.event).join() !== 'transfer.cancelled')
          problems.push(`${name}: events ${own.map((e) => e.event).join()}`);
      } else {
        if (sent !== 1) problems.push(`${name}: ${sent} sends accepted`);
        if (own.some((event) => event.event === 'transfer.cancelled'))
          problems.push(`${name}: transfer.cancelled although the cancel said ${result.outcome}`);
      }
    }
    console.log(
      `[cancel-race] seed ${SEED}: ${JSON.stringify(outcomes)}, too-late in ${JSON.stringify(tooLateStates)}; ${accepted} sends accepted for ${TRANSFERS - outcomes.cancelled} transfers not cancelled`,
    );
    expect(problems).toEqual([]);
    expect(accepted).toBe(TRANSFERS - outcomes.cancelled);
    // The draws reach both sides of the race.
    expect(outcomes.cancelled).toBeGreaterThan(0);
    expect(outcomes['too-late'] + outcomes['already-ended']).toBeGreaterThan(0);
  }, 120_000);
});
