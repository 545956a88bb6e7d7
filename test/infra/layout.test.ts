/**
 * Where code lives: src/ is the service (worker, CLI, simulator) and loads nothing from the tooling
 * around it; the demo and the private-Redis helpers (tools/) and the benchmark (bench/) load nothing
 * from the tests; domain code reaches the custody provider only through its port. Followed through the import graph (test/support/import-graph.ts), not by name.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { importGraph } from '../support/import-graph.ts';

function modulesUnder(dir: string): string[] {
  return readdirSync(join(PROJECT_ROOT, dir)).flatMap((entry) => {
    const path = posix.join(dir, entry);
    if (statSync(join(PROJECT_ROOT, path)).isDirectory()) return modulesUnder(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Files of `dirs` whose import graph reaches a file under one of `forbidden`, with what they reach. */
function reaching(dirs: string[], forbidden: string[]): string[] {
  const found: string[] = [];
  for (const file of dirs.flatMap(modulesUnder)) {
    const { files } = importGraph(PROJECT_ROOT, [file]);
    const reached = [...files].filter((other) => forbidden.some((dir) => other.startsWith(`${dir}/`)));
    if (reached.length > 0) found.push(`${file} → ${reached.join(', ')}`);
  }
  return found;
}

describe('code layout', () => {
  it('src/ loads nothing from tools/, bench/ or test/', () => {
    expect(reaching(['src'], ['tools', 'bench', 'test'])).toEqual([]);
  });

  it('domain code (src/jobs, src/transfers, src/ledger) reaches a custody provider only through the port', () => {
    // src/custody/port.ts, errors.ts and deadline.ts are the port; src/custody/spec/ is one implementation.
    // This follows what loads at run time; ESLint (no-restricted-imports) refuses type imports too.
    expect(modulesUnder('src/custody/spec').length).toBeGreaterThan(0);
    expect(reaching(['src/jobs', 'src/transfers', 'src/ledger'], ['src/custody/spec'])).toEqual([]);
  });

  it('tools/ and bench/ load nothing from test/', () => {
    expect(modulesUnder('bench').length).toBeGreaterThan(0);
    expect(reaching(['tools', 'bench'], ['test'])).toEqual([]);
  });
});
