import { describe, expect, it } from 'vitest';
import { latencyKnee } from '../../bench/chart.ts';

const point = (fraction: number, ours: number, bare: number) => ({ fraction, ours: { p99Ms: ours }, bare: { p99Ms: bare } });

describe('the latency knee the chart states', () => {
  it('is the highest rate up to which every measured rate keeps ours within 1.3 × bare', () => {
    expect(latencyKnee([point(0.1, 8, 7), point(0.2, 12, 10), point(0.3, 60, 25)])).toBe(0.2);
    expect(latencyKnee([point(0.1, 8, 7), point(0.2, 9, 8)])).toBe(0.2);
  });

  it('is not moved past a miss by a higher rate where bare alone had a bad window', () => {
    // Run D of issue 14: 0.4 × looked "within" only because bare's p99 spiked to 131 ms there.
    expect(latencyKnee([point(0.4, 57.5, 131.3), point(0.1, 8.2, 6.6), point(0.3, 59.9, 25.1), point(0.2, 13.3, 9.0)])).toBe(0.1);
    expect(latencyKnee([point(0.1, 9, 6.6), point(0.4, 57.5, 131.3)])).toBeUndefined();
  });

  it('is undefined when no rate was measured', () => {
    expect(latencyKnee([])).toBeUndefined();
  });
});
