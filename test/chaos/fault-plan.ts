/**
 * Random fault plans whose injected faults can be counted exactly afterwards.
 *
 * A `{ probability, kinds }` plan draws inside the simulator and leaves no count per kind (a
 * 'malformed' answer is a 200 in its request stats). A `sequence` plan is the same draw done here, up
 * front: the simulator consumes one entry per request and reports how many it consumed
 * (`GET /_sim/faults`), so the faults injected are exactly the non-'ok' entries of that prefix.
 */
import type { FaultKind, SimEndpoint } from '../../src/simulator/index.ts';

export type FaultEntry = FaultKind | 'ok';

/** `length` entries, each a fault with `probability`, its kind drawn by `weights`. */
export function randomFaultSequence(
  length: number,
  probability: number,
  weights: Partial<Record<FaultKind, number>>,
  random: () => number = Math.random,
): FaultEntry[] {
  const kinds = Object.entries(weights).filter(([, weight]) => (weight ?? 0) > 0) as Array<[FaultKind, number]>;
  const total = kinds.reduce((sum, [, weight]) => sum + weight, 0);
  if (kinds.length === 0 || total <= 0) throw new Error('randomFaultSequence: no fault kind with a positive weight');
  const sequence: FaultEntry[] = [];
  for (let i = 0; i < length; i++) {
    if (random() >= probability) {
      sequence.push('ok');
      continue;
    }
    let pick = random() * total;
    let kind = kinds[kinds.length - 1]![0];
    for (const [candidate, weight] of kinds) {
      if (pick < weight) {
        kind = candidate;
        break;
      }
      pick -= weight;
    }
    sequence.push(kind);
  }
  return sequence;
}

/** Faults per kind among the first `consumed` entries. */
export function countInjected(sequence: readonly FaultEntry[], consumed: number): Partial<Record<FaultKind, number>> {
  const counts: Partial<Record<FaultKind, number>> = {};
  for (const entry of sequence.slice(0, consumed)) {
    if (entry !== 'ok') counts[entry] = (counts[entry] ?? 0) + 1;
  }
  return counts;
}

/** How many entries of each endpoint's sequence the simulator consumed, from its control API. */
export async function consumedPerEndpoint(simUrl: string): Promise<Partial<Record<SimEndpoint, number>>> {
  const response = await fetch(`${simUrl}/_sim/faults`);
  if (!response.ok) throw new Error(`GET /_sim/faults answered ${response.status}`);
  const snapshot = (await response.json()) as Partial<Record<SimEndpoint, { consumed: number }>>;
  const out: Partial<Record<SimEndpoint, number>> = {};
  for (const [endpoint, plan] of Object.entries(snapshot) as Array<[SimEndpoint, { consumed: number }]>) out[endpoint] = plan.consumed;
  return out;
}
