/**
 * Writes the tables of the documentation that restate code, from that code (one copy of each fact):
 *   docs/configuration.md   the environment variables (src/config/config.ts: envSchema, CONFIG_DOCS)
 *   docs/metrics.md         the worker's Prometheus metrics (src/metrics.ts: createMetrics)
 *   docs/events.md          the event types and failure codes (packages/producer/src/events.ts, catalog.ts)
 *   docs/architecture.md    what an answer to sendTransaction proves (src/transfers/send-proof.ts)
 *   docs/bitgo-api.md       what an answer to BitGo's send proves (src/custody/bitgo/responses.ts)
 *   docs/cli.md             the CLI's usage text (src/cli/usage.ts with src/cli/run.ts's COMMANDS)
 *   bench/README.md         the benchmarks' figures and goals (bench/results/*.json, bench/goals.ts;
 *                           tools/docs/bench.ts)
 *
 * Each table sits in a marked region of its page, `<!-- generated: <name> -->` … `<!-- end generated:
 * <name> -->`; only what is between the markers is replaced, the rest of the page is prose written by
 * hand. Run `npm run docs` to write the pages, `npm run docs -- --check` to exit 1 naming every stale
 * page (CI). test/infra/docs-generated.test.ts fails when a page differs from what this generates.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { FAILURE_CODE_DOCS, FailureCode } from '../../packages/producer/src/catalog.ts';
import { EVENT_DATA_SCHEMAS, EVENT_TYPES } from '../../packages/producer/src/events.ts';
import { COMMANDS } from '../../src/cli/run.ts';
import { usage } from '../../src/cli/usage.ts';
import { CONFIG_DOCS, CONFIG_VARIABLES, type ConfigVariable } from '../../src/config/config.ts';
import { createMetrics } from '../../src/metrics.ts';
import { SEND_PROOF_TABLE, proofOfAnswer } from '../../src/transfers/send-proof.ts';
import { BITGO_SEND_PROOF, bitgoSendProof } from '../../src/custody/bitgo/responses.ts';
import { benchBudget, benchCapacity, benchWakeup, benchFigures, benchMemory, benchScale, benchTargets, budgetSizing } from './bench.ts';
import { code, table } from './markdown.ts';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every generated region, by the page (path from the repository root) it lives in. */
export const PAGES: Readonly<Record<string, readonly RegionName[]>> = {
  'docs/configuration.md': ['configuration'],
  'docs/metrics.md': ['metrics'],
  'docs/events.md': ['events', 'failure-codes'],
  'docs/architecture.md': ['send-proof'],
  'docs/bitgo-api.md': ['bitgo-send-proof'],
  'docs/cli.md': ['cli-usage'],
  'bench/README.md': [
    'bench-targets',
    'bench-figures',
    'bench-memory',
    'bench-scale',
    'bench-budget',
    'bench-wakeup',
    'budget-sizing',
    'bench-capacity',
  ],
};

const REGIONS = {
  configuration: configurationTable,
  metrics: metricsTable,
  events: eventsTable,
  'failure-codes': failureCodesTable,
  'send-proof': sendProofTable,
  'bitgo-send-proof': bitgoSendProofTable,
  'cli-usage': cliUsage,
  'bench-targets': benchTargets,
  'bench-figures': benchFigures,
  'bench-memory': benchMemory,
  'bench-scale': benchScale,
  'bench-budget': benchBudget,
  'bench-wakeup': benchWakeup,
  'budget-sizing': budgetSizing,
  'bench-capacity': benchCapacity,
} as const satisfies Record<string, () => string>;

export type RegionName = keyof typeof REGIONS;

/** The Markdown of every region, as generated from the code now. */
export function generateRegions(): Record<RegionName, string> {
  return Object.fromEntries(Object.entries(REGIONS).map(([name, render]) => [name, render()])) as Record<RegionName, string>;
}

/**
 * `text` with the content of each of its marked regions replaced by `regions`'. Throws when a region
 * the page should hold is missing or unclosed, or when the page marks a region nobody generates.
 */
export function fillRegions(page: string, text: string, regions: Readonly<Record<RegionName, string>>): string {
  const expected = PAGES[page] ?? [];
  const marked = [...text.matchAll(/<!-- generated: ([^ ]+) -->/g)].map((match) => match[1]!);
  const unknown = marked.filter((name) => !(expected as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`${page}: marks regions nobody generates here: ${unknown.join(', ')}`);
  let result = text;
  for (const name of expected) {
    const start = `<!-- generated: ${name} -->\n`;
    const end = `<!-- end generated: ${name} -->`;
    const from = result.indexOf(start);
    const to = result.indexOf(end, from);
    if (from < 0 || to < 0 || result.indexOf(start, from + 1) >= 0) {
      throw new Error(`${page}: needs exactly one region ${start.trim()} … ${end}`);
    }
    result = `${result.slice(0, from + start.length)}${regions[name]}\n${result.slice(to)}`;
  }
  return result;
}

/** Every page as it should be: its text on disk with the regions filled in (`read` gets a page's text). */
export function generatePages(read: (page: string) => string = readPage): Record<string, string> {
  const regions = generateRegions();
  return Object.fromEntries(Object.keys(PAGES).map((page) => [page, fillRegions(page, read(page), regions)]));
}

export function readPage(page: string): string {
  return readFileSync(join(PROJECT_ROOT, page), 'utf8');
}

// ---------------------------------------------------------------------------------------------------
// The tables.

/** One row per variable in envSchema's order; neighbours with the same meaning share a row. */
function configurationTable(): string {
  const groups: ConfigVariable[][] = [];
  for (const name of CONFIG_VARIABLES as readonly ConfigVariable[]) {
    const last = groups.at(-1);
    if (last && CONFIG_DOCS[last[0]!].meaning === CONFIG_DOCS[name].meaning) last.push(name);
    else groups.push([name]);
  }
  const rows = groups.map((names) => {
    const defaults = [...new Set(names.map((name) => CONFIG_DOCS[name].default))];
    return [names.map(code).join(', '), defaults.join(', '), CONFIG_DOCS[names[0]!].meaning];
  });
  return table(['variable', 'default', 'meaning'], rows);
}

/** The worker's own metrics (Node's default process_* and nodejs_* ones are left out), in declaration order. */
function metricsTable(): string {
  const metrics = createMetrics();
  const own = new Set<unknown>(Object.entries(metrics).flatMap(([key, value]) => (key === 'registry' ? [] : [value])));
  const rows = metrics.registry
    .getMetricsAsArray()
    .filter((metric) => own.has(metric))
    .map((metric) => {
      // prom-client keeps a metric's label names in its public `labelNames` field (not in its typings).
      const labels = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
      return [code(metric.name), String(metric.type), labels.length > 0 ? labels.map(code).join(', ') : '–', metric.help];
    });
  if (rows.length !== own.size) throw new Error('a metric of createMetrics() is not on its registry');
  return table(['metric', 'type', 'labels', 'help'], rows);
}

/** Each event type, what its data schema says it means, and the JSON Schema of its data. */
function eventsTable(): string {
  const rows = EVENT_TYPES.map((type) => {
    const description = EVENT_DATA_SCHEMAS[type].description;
    if (!description) throw new Error(`${type}: its data schema has no .meta({ description }) (packages/producer/src/events.ts)`);
    return [code(type), description, `[schema](../packages/producer/schemas/events/${type}.schema.json)`];
  });
  return table(['event', 'when', 'data'], rows);
}

/** Each failure code, the event types that carry it (checked against their data schemas), and its meaning. */
function failureCodesTable(): string {
  const rows = Object.values(FailureCode).map((failure) => {
    const { events, meaning } = FAILURE_CODE_DOCS[failure];
    for (const type of events) {
      const schema: z.ZodType = EVENT_DATA_SCHEMAS[type];
      const field = schema instanceof z.ZodObject ? (schema.shape as Record<string, z.ZodType | undefined>).code : undefined;
      if (!field?.safeParse(failure).success) throw new Error(`FAILURE_CODE_DOCS: ${type} cannot carry code ${failure}`);
    }
    return [code(failure), events.map(code).join(', '), meaning];
  });
  return table(['code', 'carried by', 'meaning'], rows);
}

/** SEND_PROOF_TABLE's rows, each with what proofOfAnswer says about its examples. */
function sendProofTable(): string {
  const rows = SEND_PROOF_TABLE.map((row) => {
    const proofs = [...new Set(row.examples.map(proofOfAnswer))];
    if (proofs.length !== 1) throw new Error(`SEND_PROOF_TABLE row "${row.answer}": its examples prove ${proofs.join(', ') || 'nothing'}`);
    return [row.answer, code(proofs[0]!)];
  });
  return table(['answer', 'proves'], rows);
}

/** BitGo's own rows, each checked: the table gives every example of a row that row's proof. */
function bitgoSendProofTable(): string {
  const rows = BITGO_SEND_PROOF.map((row) => {
    const wrong = row.examples.filter((example) => bitgoSendProof(example) !== row.proof);
    if (wrong.length > 0) throw new Error(`BITGO_SEND_PROOF row "${row.answer}": ${wrong.length} of its examples get another proof`);
    return [row.answer, code(row.proof), row.basis];
  });
  return table(['answer to the send', 'proves', 'basis'], rows);
}

function cliUsage(): string {
  return `\`\`\`text\n${usage(COMMANDS).trimEnd()}\n\`\`\``;
}

// ---------------------------------------------------------------------------------------------------

function main(args: readonly string[]): number {
  const unknown = args.filter((arg) => arg !== '--check');
  if (unknown.length > 0) {
    process.stderr.write(`usage: npm run docs [-- --check]   (unknown: ${unknown.join(' ')})\n`);
    return 2;
  }
  const check = args.includes('--check');
  const stale: string[] = [];
  for (const [page, text] of Object.entries(generatePages())) {
    if (text === readPage(page)) continue;
    stale.push(page);
    if (!check) writeFileSync(join(PROJECT_ROOT, page), text);
  }
  if (check) {
    for (const page of stale) process.stderr.write(`${page}: stale, run npm run docs\n`);
    return stale.length > 0 ? 1 : 0;
  }
  for (const page of stale) process.stdout.write(`wrote ${page}\n`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
