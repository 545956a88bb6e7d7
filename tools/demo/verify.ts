/**
 * Checks a finished demo run against what each sample must end in (docs/contract.md section 4 guarantees):
 * exactly one terminal event of the expected type, `transfer.submitted` exactly once for the ones sent
 * (before the broadcast), versions 1..n without gaps, and the simulator's accepted sends matching.
 */
import { TERMINAL_EVENTS, type TransferEvent } from '../../packages/producer/src/events.ts';
import type { Sample } from './samples.ts';

export interface SampleResult {
  sample: Sample;
  /** The terminal event types it got, in order (exactly one when all is well). */
  terminal: string[];
  submitted: number;
  /** Sends the simulator accepted for this sequenceId. */
  accepted: number;
  /** Every event of the transfer. */
  events: number;
  ok: boolean;
  problems: string[];
}

export interface Verdict {
  ok: boolean;
  samples: SampleResult[];
  /** Every problem, each naming its sequenceId. */
  problems: string[];
}

export function verifyRun(
  samples: readonly Sample[],
  events: readonly TransferEvent[],
  acceptedSends: (sequenceId: string) => number,
): Verdict {
  const results = samples.map((sample) =>
    verifySample(
      sample,
      events.filter((event) => event.sequenceId === sample.sequenceId),
      acceptedSends(sample.sequenceId),
    ),
  );
  const known = new Set(samples.map((sample) => sample.sequenceId));
  const problems = results.flatMap((result) => result.problems.map((problem) => `${result.sample.sequenceId}: ${problem}`));
  for (const event of events) {
    if (event.event !== 'reconcile.completed' && !known.has(event.sequenceId)) {
      problems.push(`${event.sequenceId || '(no sequenceId)'}: unexpected ${event.event} for a transfer the demo did not enqueue`);
    }
  }
  return { ok: problems.length === 0, samples: results, problems };
}

function verifySample(sample: Sample, events: readonly TransferEvent[], accepted: number): SampleResult {
  const problems: string[] = [];
  const terminal = events.filter((event) => TERMINAL_EVENTS.has(event.event)).map((event) => event.event);
  const submitted = events.filter((event) => event.event === 'transfer.submitted').length;

  if (terminal.length === 0) problems.push(`no terminal event, expected ${sample.expected}`);
  else if (terminal.length > 1) problems.push(`${terminal.length} terminal events (${terminal.join(', ')}), expected exactly one`);
  else if (terminal[0] !== sample.expected) problems.push(`got ${terminal[0]}, expected ${sample.expected}`);

  if (submitted !== sample.sends) problems.push(`${submitted} transfer.submitted events, expected ${sample.sends}`);
  if (accepted !== sample.sends) problems.push(`the simulator accepted ${accepted} sends, expected ${sample.sends}`);

  events.forEach((event, index) => {
    if (event.version !== index + 1) problems.push(`${event.event} has version ${event.version}, expected ${index + 1}`);
  });
  const submittedAt = events.findIndex((event) => event.event === 'transfer.submitted');
  const broadcastAt = events.findIndex((event) => event.event === 'transfer.broadcast');
  if (broadcastAt !== -1 && (submittedAt === -1 || submittedAt > broadcastAt))
    problems.push('transfer.broadcast before transfer.submitted');

  return { sample, terminal, submitted, accepted, events: events.length, ok: problems.length === 0, problems };
}
