/**
 * The Grafana board can be narrowed to one Prometheus job and instance: it has `job` and `instance`
 * variables, and every series selector of every panel filters on both (a board without them mixes
 * every deployment scraped by the same Prometheus).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

interface Board {
  templating: { list: Array<{ name: string; query?: unknown }> };
  panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
}

const board = JSON.parse(readFileSync(join(PROJECT_ROOT, 'deploy/grafana/custody-worker.json'), 'utf8')) as Board;

describe('Grafana board filters', () => {
  it('has job and instance variables', () => {
    const names = board.templating.list.map((v) => v.name);
    expect(names).toEqual(expect.arrayContaining(['datasource', 'job', 'instance']));
  });

  it('filters every selector of every panel on job and instance', () => {
    const selectors = board.panels.flatMap((panel) =>
      (panel.targets ?? []).flatMap((target) =>
        [...target.expr.matchAll(/\b((?:custody|process|nodejs)_[a-z0-9_]+)(\{[^}]*\})?/g)].map((m) => ({
          panel: panel.title,
          selector: m[0],
        })),
      ),
    );
    expect(selectors.length).toBeGreaterThan(20);
    const unfiltered = selectors.filter(
      ({ selector }) => !(selector.includes('job=~"$job"') && selector.includes('instance=~"$instance"')),
    );
    expect(unfiltered).toEqual([]);
  });
});
