/**
 * The repository documents itself (docs/contract.md section 9): no document, help text, error message
 * or comment points outside it (a clone has nothing beside it), and every relative link in a Markdown
 * file resolves to a file of the repository.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: PROJECT_ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => /\.(ts|md|py|lua|json|ya?ml|sh)$|Dockerfile$|^\.ci\//.test(file) && !file.endsWith('package-lock.json'))
  .filter((file) => existsSync(join(PROJECT_ROOT, file)));

/** References to documents that live only beside the repository, never in it. */
const OUTSIDE = [
  /\.\.\/shared\b/,
  /\bshared\/(CONTRACT|STYLE|spec)\b/,
  /\bCONTRACT\.md\b/,
  /\bCONTRACT (section|v?\d)/,
  /\bspec\/upstream-api\.md\b/,
];

describe('the documentation stays inside the repository', () => {
  it('no file names a document outside the repository', () => {
    const self = 'test/infra/docs.test.ts';
    const hits: string[] = [];
    for (const file of tracked.filter((f) => f !== self)) {
      const lines = readFileSync(join(PROJECT_ROOT, file), 'utf8').split('\n');
      lines.forEach((line, index) => {
        if (OUTSIDE.some((pattern) => pattern.test(line))) hits.push(`${file}:${index + 1}: ${line.trim().slice(0, 120)}`);
      });
    }
    expect(hits).toEqual([]);
  });

  it('every relative link of a Markdown file resolves to a file of the repository', () => {
    const broken: string[] = [];
    for (const file of tracked.filter((f) => f.endsWith('.md'))) {
      const text = readFileSync(join(PROJECT_ROOT, file), 'utf8');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!.split('#')[0]!;
        if (target === '' || /^[a-z]+:/i.test(target)) continue;
        const resolved = normalize(join(dirname(file), target));
        if (resolved.startsWith('..') || !existsSync(join(PROJECT_ROOT, resolved))) broken.push(`${file}: ${match[1]}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every repository path a Markdown page names in backticks exists', () => {
    // Paths a run creates (not in a clone): the CPU profiles of `BENCH_CPU_PROF=1`.
    const createdByRuns = new Set(['bench/results/prof/']);
    const missing: string[] = [];
    for (const file of tracked.filter((f) => f.endsWith('.md') && !/(^|\/)CHANGELOG\.md$/.test(f))) {
      const text = readFileSync(join(PROJECT_ROOT, file), 'utf8');
      for (const match of text.matchAll(/`((?:\.\.\/)*(?:src|test|tools|bench|deploy|docs|packages|examples|\.ci)\/[^`\s]*)`/g)) {
        const named = match[1]!.replace(/^(\.\.\/)+/, '');
        // Placeholders and patterns (`src/jobs/<queue>/`, `schemas/events/*.json`) name no one file.
        if (/[<*{…]/.test(named) || createdByRuns.has(named)) continue;
        const path = named.split('#')[0]!.replace(/:\d+$/, '');
        if (!existsSync(join(PROJECT_ROOT, path))) missing.push(`${file}: ${match[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("every variable the README's configuration table names is one the worker reads", () => {
    // The full table is docs/configuration.md, generated from the schema; the README names the essentials.
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Configuration'), readme.indexOf('\n## ', readme.indexOf('\n## Configuration') + 1));
    const named = section
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]!));
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((name) => !CONFIG_VARIABLES.includes(name))).toEqual([]);
  });

  it('the README links the contract, the upstream API and the architecture under docs/', () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    for (const doc of ['docs/contract.md', 'docs/upstream-api.md', 'docs/architecture.md']) expect(readme).toContain(`](${doc})`);
  });
});
