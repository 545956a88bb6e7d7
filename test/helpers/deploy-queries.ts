/**
 * The PromQL the shipped deployment files run: every expression of every rule file under
 * deploy/prometheus/ (alerts and recording rules) and of the Grafana board (its panels and its variables),
 * and the metric names each one reads. test/deploy/ checks these names against what a worker exports.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

export interface BoardPanel {
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: BoardPanel[];
}

export interface Board {
  panels: BoardPanel[];
  templating?: { list: Array<{ name: string; type?: string; query?: unknown }> };
}

export interface Rule {
  alert?: string;
  record?: string;
  expr?: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleFile {
  file: string;
  groups: Array<{ name: string; rules: Rule[] }>;
}

const PROMETHEUS_DIR = join(PROJECT_ROOT, 'deploy/prometheus');

export const board = JSON.parse(readFileSync(join(PROJECT_ROOT, 'deploy/grafana/custody-worker.json'), 'utf8')) as Board;

/** Every YAML file of deploy/prometheus/ that holds rule groups (the scrape config and promtool's tests hold none). */
export const ruleFiles: RuleFile[] = readdirSync(PROMETHEUS_DIR)
  .filter((file) => /\.ya?ml$/.test(file))
  .sort()
  .map((file) => ({ file, ...(parse(readFileSync(join(PROMETHEUS_DIR, file), 'utf8')) as Partial<RuleFile>) }))
  .filter((parsed): parsed is RuleFile => Array.isArray(parsed.groups));

/** Series Prometheus itself adds to every scrape target. */
export const PROMETHEUS_OWN = new Set(['up']);
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'and',
  'or',
  'unless',
  'inf',
  'nan',
]);

/** Metric names in a PromQL expression: identifiers that are not functions, keywords, label names, strings or durations. */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = stripped.slice(match.index + match[0].length);
    if (/^\s*\(/.test(after)) continue; // a function or aggregation
    if (KEYWORDS.has(match[0].toLowerCase())) continue;
    const before = stripped.slice(0, match.index);
    if (/[0-9.]$/.test(before)) continue; // the exponent of a number, e.g. 1e3
    names.push(match[0]);
  }
  return names;
}

function allPanels(panels: readonly BoardPanel[]): BoardPanel[] {
  return panels.flatMap((panel) => [panel, ...allPanels(panel.panels ?? [])]);
}

/** A variable's query: Grafana's `label_values(<selector>, <label>)` reads the selector's series. */
function variableExpr(query: unknown): string | undefined {
  const text = typeof query === 'string' ? query : (query as { query?: unknown } | undefined)?.query;
  if (typeof text !== 'string') return undefined;
  return /^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$/.exec(text)?.[1] ?? text;
}

/** Every PromQL expression of the board's panels and of every rule, with where it is (for messages). */
export const expressions: Array<{ where: string; expr: string }> = [
  ...allPanels(board.panels).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ where: `panel "${panel.title}"`, expr: target.expr ?? '' })),
  ),
  ...ruleFiles.flatMap(({ file, groups }) =>
    groups.flatMap((group) =>
      group.rules.map((rule) => ({
        where: rule.alert !== undefined ? `alert ${rule.alert}` : `${file}: record ${rule.record}`,
        expr: String(rule.expr ?? ''),
      })),
    ),
  ),
];

/** The expressions of the board's variables (the job and instance pickers). */
export const variableExpressions: Array<{ where: string; expr: string }> = (board.templating?.list ?? []).flatMap((variable) => {
  const expr = variable.type === 'query' ? variableExpr(variable.query) : undefined;
  return expr === undefined ? [] : [{ where: `variable ${variable.name}`, expr }];
});
