/**
 * Where code lives: src/ is the service (worker, CLI, simulator) and loads nothing from the tooling
 * around it; the demo and the private-Redis helpers (tools/) and the benchmark (bench/) load nothing
 * from the tests; domain code reaches the custody provider only through its port (also as ESLint's rule). Followed through the import graph (test/support/import-graph.ts), not by name.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { importGraph } from '../support/import-graph.ts';

/**
 * Domain code: it may import only the files directly in src/custody/, but for the factory that builds
 * the adapters (eslint.config.js says the same).
 */
const DOMAIN_DIRS = ['src/jobs', 'src/transfers', 'src/ledger', 'src/queues'];
/** The one file directly in src/custody/ that builds adapters (src/app.ts and the CLI use it). */
const FACTORY = 'src/custody/provider.ts';
/** The one file directly in src/custody/ that names the adapters (the factory and config.ts read it). */
const REGISTRY = 'src/custody/providers.ts';

/** Every folder under src/custody/: each is an adapter (a provider's, or the generic http/). */
const ADAPTER_DIRS = () =>
  readdirSync(join(PROJECT_ROOT, 'src/custody'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `src/custody/${entry.name}`)
    .sort();

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

  it('domain code (src/jobs, src/transfers, src/ledger, src/queues) reaches a custody provider only through the port', () => {
    // The files directly in src/custody/ (port.ts, errors.ts, deadline.ts, budget.ts) are the port; each
    // folder under it is an adapter (wallet-service/, http/, ...). This follows what loads at run time;
    // ESLint (no-restricted-imports, below) refuses type imports too.
    const adapters = ADAPTER_DIRS();
    expect(adapters).toEqual(expect.arrayContaining(['src/custody/http', 'src/custody/wallet-service']));
    expect(reaching(DOMAIN_DIRS, adapters)).toEqual([]);
    const port = readdirSync(join(PROJECT_ROOT, 'src/custody'))
      .filter((entry) => entry.endsWith('.ts'))
      .map((entry) => `src/custody/${entry}`)
      .filter((file) => file !== FACTORY && file !== REGISTRY);
    expect(port.length).toBeGreaterThan(0);
    const reachedFromPort = port.flatMap((file) =>
      [...importGraph(PROJECT_ROOT, [file]).files].filter((other) => adapters.some((dir) => other.startsWith(`${dir}/`))),
    );
    expect(reachedFromPort).toEqual([]);
  });

  it('ESLint refuses an import of any custody adapter folder from domain code, and allows the port', async () => {
    const eslint = new ESLint({ cwd: PROJECT_ROOT });
    const lint = async (filePath: string, code: string) =>
      (await eslint.lintText(code, { filePath: join(PROJECT_ROOT, filePath) }))[0]!.messages
        .filter((message) => message.ruleId === 'no-restricted-imports')
        .map((message) => message.line);
    const planted = [
      "import { CustodyClient } from '../custody/wallet-service/client.ts';",
      "import type { Transport } from '../custody/http/transport.ts';",
      "export type { Later } from '../custody/bitgo/client.ts';",
      "import type { CustodyPort } from '../custody/port.ts';",
      "import { CustodyErrorCode } from '../custody/errors.ts';",
      'export type Used = [typeof CustodyClient, Transport, CustodyPort, typeof CustodyErrorCode];',
    ].join('\n');
    for (const dir of DOMAIN_DIRS) expect(await lint(`${dir}/planted.ts`, planted), dir).toEqual([1, 2, 3]);
    const factory = "import { createCustodyPort } from '../custody/provider.ts';\nexport const build = createCustodyPort;";
    for (const dir of DOMAIN_DIRS) expect(await lint(`${dir}/planted.ts`, factory), dir).toEqual([1]);
    const registry = "import { PROVIDERS } from '../custody/providers.ts';\nexport const all = PROVIDERS;";
    for (const dir of DOMAIN_DIRS) expect(await lint(`${dir}/planted.ts`, registry), dir).toEqual([1]);
    expect(
      await lint('src/custody/planted.ts', "import type { Transport } from './http/transport.ts';\nexport type T = Transport;"),
    ).toEqual([1]);
    // The wiring may name an adapter; the CLI gets its port from the factory, like the worker, and names none.
    expect(await lint('src/app.ts', planted.replaceAll('../custody/', './custody/'))).toEqual([]);
    expect(await lint('src/cli/planted.ts', planted)).toEqual([1, 2, 3]);
    expect(await lint('src/cli/planted.ts', factory)).toEqual([]);
  });

  it('tools/ and bench/ load nothing from test/', () => {
    expect(modulesUnder('bench').length).toBeGreaterThan(0);
    expect(reaching(['tools', 'bench'], ['test'])).toEqual([]);
  });
});
