/**
 * The benchmark's picture (`bench/results/latest.svg`, embedded in bench/README.md): throughput per round,
 * ours vs bare, for submissions and tracking polls, the latency distribution at half load, and p99 latency
 * against the offered rate (the sweep). Plain SVG built by hand: four small panels do not need a chart
 * library.
 */
import type { BenchResult } from './report.ts';

const WIDTH = 1330;
const HEIGHT = 330;
const PANEL = { top: 62, bottom: 270, width: 255, gap: 75, left: 60 };
const COLOURS = { ours: '#1f6feb', bare: '#8b949e' } as const;
type Side = keyof typeof COLOURS;

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fixed = (value: number) => (Math.round(value * 10) / 10).toString();
const thousands = (value: number) => Math.round(value).toLocaleString('en-US');

function text(x: number, y: number, content: string, attributes = ''): string {
  return `<text x="${fixed(x)}" y="${fixed(y)}" ${attributes}>${escape(content)}</text>`;
}

/** A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten, at least `value`. */
function niceCeiling(value: number, steps: readonly number[] = [1, 2, 5, 10]): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return steps.map((step) => step * power).find((bound) => bound >= value) ?? 10 * power;
}

/** Finer bounds for an axis whose four ticks should still be round numbers. */
const FINE_STEPS = [1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10] as const;

function frame(x: number, title: string, subtitle: string): string[] {
  return [
    text(x, 22, title, 'font-weight="600" font-size="14"'),
    ...subtitle.split('\n').map((line, index) => text(x, 38 + index * 13, line, 'font-size="11" fill="#57606a"')),
    `<line x1="${x}" y1="${PANEL.bottom}" x2="${x + PANEL.width}" y2="${PANEL.bottom}" stroke="#d0d7de"/>`,
    `<line x1="${x}" y1="${PANEL.top}" x2="${x}" y2="${PANEL.bottom}" stroke="#d0d7de"/>`,
  ];
}

function yAxis(x: number, max: number, label: (value: number) => string): string[] {
  const parts: string[] = [];
  for (let tick = 0; tick <= 4; tick++) {
    const value = (max * tick) / 4;
    const y = PANEL.bottom - ((PANEL.bottom - PANEL.top) * tick) / 4;
    if (tick > 0) parts.push(`<line x1="${x}" y1="${fixed(y)}" x2="${x + PANEL.width}" y2="${fixed(y)}" stroke="#eaeef2"/>`);
    parts.push(text(x - 6, y + 4, label(value), 'font-size="10" text-anchor="end" fill="#57606a"'));
  }
  return parts;
}

/** Bars per round, ours beside bare, with the medians (the figures) as dashed lines. */
function roundsPanel(
  x: number,
  title: string,
  unit: string,
  sides: Record<Side, number[]>,
  medians: Record<Side, number>,
  ratio: number,
): string[] {
  const max = niceCeiling(Math.max(...sides.ours, ...sides.bare));
  const rounds = Math.max(sides.ours.length, sides.bare.length);
  const slot = PANEL.width / rounds;
  const bar = Math.min(28, slot / 3);
  const height = (value: number) => ((PANEL.bottom - PANEL.top) * value) / max;
  const parts = [
    ...frame(
      x,
      title,
      `median ${unit}: ours ${thousands(medians.ours)}, bare ${thousands(medians.bare)}\nours ÷ bare ${ratio.toFixed(2)} (dashed: medians)`,
    ),
  ];
  parts.push(...yAxis(x, max, thousands));
  for (let round = 0; round < rounds; round++) {
    const centre = x + slot * (round + 0.5);
    (['ours', 'bare'] as const).forEach((side, index) => {
      const value = sides[side][round];
      if (value === undefined) return;
      const left = centre - bar + index * bar;
      parts.push(
        `<rect x="${fixed(left)}" y="${fixed(PANEL.bottom - height(value))}" width="${fixed(bar - 2)}" height="${fixed(height(value))}" fill="${COLOURS[side]}"><title>${side} round ${round + 1}: ${thousands(value)} ${unit}</title></rect>`,
      );
    });
    parts.push(text(centre, PANEL.bottom + 14, `round ${round + 1}`, 'font-size="10" text-anchor="middle" fill="#57606a"'));
  }
  for (const side of ['ours', 'bare'] as const) {
    const y = PANEL.bottom - height(medians[side]);
    parts.push(
      `<line x1="${x}" y1="${fixed(y)}" x2="${x + PANEL.width}" y2="${fixed(y)}" stroke="${COLOURS[side]}" stroke-dasharray="4 3"/>`,
    );
  }
  return parts;
}

/** Latency percentile curves (x: percentile, y: ms on a linear axis up to the larger p99.9). */
function latencyPanel(x: number, result: BenchResult): string[] {
  const { ours, bare } = result.latency;
  const curves: Record<Side, Array<[number, number]>> = { ours: ours.percentiles, bare: bare.percentiles };
  const top = niceCeiling(Math.max(...[...curves.ours, ...curves.bare].filter(([p]) => p <= 99.9).map(([, ms]) => ms)));
  const subtitle = `both at ${thousands(ours.offeredPerSecond)} jobs/s offered (half of ours' max)\np99 ours ${ours.p99Ms.toFixed(1)} ms, bare ${bare.p99Ms.toFixed(1)} ms: ${(ours.p99Ms / bare.p99Ms).toFixed(2)} ×`;
  const parts = [...frame(x, 'latency enqueue → submitted', subtitle)];
  parts.push(...yAxis(x, top, (value) => `${fixed(value)} ms`));
  // The x axis stretches the tail: position = -log10(100 - p), so p50, p90, p99, p99.9 are evenly spaced.
  const span = 3.3;
  const xOf = (p: number) => x + (PANEL.width * Math.min(span, -Math.log10(Math.max(100 - p, 0.05) / 100))) / span;
  const yOf = (ms: number) => PANEL.bottom - ((PANEL.bottom - PANEL.top) * Math.min(ms, top)) / top;
  for (const p of [0, 50, 90, 99, 99.9]) {
    parts.push(`<line x1="${fixed(xOf(p))}" y1="${PANEL.bottom}" x2="${fixed(xOf(p))}" y2="${PANEL.bottom + 4}" stroke="#57606a"/>`);
    parts.push(text(xOf(p), PANEL.bottom + 14, p === 0 ? 'p0' : `p${p}`, 'font-size="10" text-anchor="middle" fill="#57606a"'));
  }
  for (const side of ['bare', 'ours'] as const) {
    const points = curves[side].map(([p, ms]) => `${fixed(xOf(p))},${fixed(yOf(ms))}`).join(' ');
    parts.push(`<polyline points="${points}" fill="none" stroke="${COLOURS[side]}" stroke-width="2"><title>${side}</title></polyline>`);
  }
  return parts;
}

/**
 * The highest fraction of ours' maximum up to which ours' p99 stays within 1.3 × bare's at every
 * measured rate (undefined when the lowest rate misses already). A rate where bare alone had a bad
 * window must not hide a miss at a lower one.
 */
export function latencyKnee(
  points: ReadonlyArray<{ fraction: number; ours: { p99Ms: number }; bare: { p99Ms: number } }>,
): number | undefined {
  let knee: number | undefined;
  for (const point of [...points].sort((a, b) => a.fraction - b.fraction)) {
    if (point.ours.p99Ms > 1.3 * point.bare.p99Ms) break;
    knee = point.fraction;
  }
  return knee;
}

/** p99 (solid) and p50 (dashed) against the offered rate, both sides measured at the same rates. */
function sweepPanel(x: number, result: BenchResult): string[] {
  const points = result.latencySweep;
  const maxRate = niceCeiling(Math.max(...points.map((point) => point.offeredPerSecond)), FINE_STEPS);
  const top = niceCeiling(Math.max(...points.flatMap((point) => [point.ours.p99Ms, point.bare.p99Ms])));
  const upTo = latencyKnee(points);
  const knee =
    upTo === undefined ? 'ours p99 > 1.3 × bare at the lowest rate' : `ours p99 ≤ 1.3 × bare at every rate up to ${upTo} × ours' max`;
  const subtitle = `p99 solid, p50 dashed; same rates both sides\n${knee}`;
  const parts = [...frame(x, 'latency against offered rate', subtitle)];
  parts.push(...yAxis(x, top, (value) => `${fixed(value)} ms`));
  const xOf = (rate: number) => x + (PANEL.width * rate) / maxRate;
  const yOf = (ms: number) => PANEL.bottom - ((PANEL.bottom - PANEL.top) * Math.min(ms, top)) / top;
  for (let tick = 0; tick <= 4; tick++) {
    const rate = (maxRate * tick) / 4;
    parts.push(text(xOf(rate), PANEL.bottom + 14, `${thousands(rate)}/s`, 'font-size="10" text-anchor="middle" fill="#57606a"'));
  }
  for (const side of ['bare', 'ours'] as const) {
    for (const [key, dash] of [
      ['p99Ms', ''],
      ['p50Ms', ' stroke-dasharray="4 3"'],
    ] as const) {
      const line = points.map((point) => `${fixed(xOf(point.offeredPerSecond))},${fixed(yOf(point[side][key]))}`).join(' ');
      parts.push(
        `<polyline data-sweep="${key}" points="${line}" fill="none" stroke="${COLOURS[side]}" stroke-width="2"${dash}><title>${side} ${key.slice(0, 3)}</title></polyline>`,
      );
    }
    for (const point of points) {
      parts.push(
        `<circle cx="${fixed(xOf(point.offeredPerSecond))}" cy="${fixed(yOf(point[side].p99Ms))}" r="3" fill="${COLOURS[side]}"><title>${side} at ${thousands(point.offeredPerSecond)}/s: p99 ${point[side].p99Ms.toFixed(1)} ms</title></circle>`,
      );
    }
  }
  return parts;
}

export function chart(result: BenchResult): string {
  const at = (index: number) => PANEL.left + index * (PANEL.width + PANEL.gap);
  const { submissions, tracking } = result;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    ...roundsPanel(
      at(0),
      'submissions end to end, per round',
      'jobs/s',
      { ours: submissions.ours.rounds.map((round) => round.perSecond), bare: submissions.bare.rounds.map((round) => round.perSecond) },
      { ours: submissions.ours.perSecond, bare: submissions.bare.perSecond },
      submissions.ratio,
    ),
    ...roundsPanel(
      at(1),
      'tracking polls, per round',
      'polls/s',
      { ours: tracking.ours.rounds.map((round) => round.pollsPerSecond), bare: tracking.bare.rounds.map((round) => round.pollsPerSecond) },
      { ours: tracking.ours.pollsPerSecond, bare: tracking.bare.pollsPerSecond },
      tracking.ratio,
    ),
    ...latencyPanel(at(2), result),
    ...sweepPanel(at(3), result),
  ];
  const legendY = HEIGHT - 18;
  (['ours', 'bare'] as const).forEach((side, index) => {
    const x = PANEL.left + index * 180;
    parts.push(`<rect x="${x}" y="${legendY - 9}" width="12" height="12" fill="${COLOURS[side]}"/>`);
    parts.push(text(x + 18, legendY + 1, side === 'ours' ? 'ours (src/worker.ts)' : 'bare BullMQ worker (1 POST + 1 XADD)'));
  });
  parts.push(
    text(
      WIDTH - 10,
      legendY + 1,
      `${result.machine.cores} cores, ${result.versions.node}, Redis ${result.versions.redis}${result.quick ? ', BENCH_QUICK (figures meaningless)' : ''}`,
      'font-size="10" text-anchor="end" fill="#57606a"',
    ),
  );
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
