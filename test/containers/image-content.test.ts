/**
 * What the production image holds, checked against what its programs load. The entry points are the
 * package's own: `npm start`, `npm run simulator` and the bin `custody-worker` (operators run it inside
 * the container). Their import graph (TypeScript's parser, test/support/import-graph.ts) must be
 * copied in full, at the paths their relative imports expect; nothing else from the repository may be
 * copied (no demo, tools, tests or benchmark); and nothing copied may import a package that
 * `npm ci --omit=dev --omit=optional` leaves out.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { copiedFiles, execForm, parseDockerfile, readDockerignore, stagesOf } from './dockerfile.ts';
import { importGraph } from '../support/import-graph.ts';

/** Copied although no module imports them: Node reads package.json ("type": "module"); npm the lockfile. */
const ALLOWED = new Set(['package.json', 'package-lock.json']);

interface PackageJson {
  scripts: Record<string, string>;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

const read = (name: string) => readFileSync(join(PROJECT_ROOT, name), 'utf8');
const pkg = JSON.parse(read('package.json')) as PackageJson;
const runtime = stagesOf(parseDockerfile(read('Dockerfile'))).at(-1)!;
const ignore = readDockerignore(read('.dockerignore'));
const workdir = posix.resolve('/', runtime.instructions.findLast((i) => i.keyword === 'WORKDIR')!.args.trim());

/**
 * The script `node <file>` of an npm script. The Node check that npm scripts run first
 * (tools/node-check.js) is not in the image: its CMD starts `node src/worker.ts` on the image's own Node 24.
 */
function nodeScript(name: string): string {
  const match = /^(?:node tools\/node-check\.js && )?node (\S+\.ts)$/.exec(pkg.scripts[name] ?? '');
  if (!match) throw new Error(`npm script ${name} is not "node <file>.ts": ${pkg.scripts[name]}`);
  return match[1]!;
}

const ENTRIES = [nodeScript('start'), nodeScript('simulator'), ...Object.values(pkg.bin)];
const graph = importGraph(PROJECT_ROOT, ENTRIES);
const copied = copiedFiles(PROJECT_ROOT, runtime, ignore);
const copiedSources = new Set(copied.map((file) => file.source));

describe('the production image', () => {
  it('starts from the worker, the simulator and the CLI, and the graph holds no file it cannot follow', () => {
    expect(ENTRIES.sort()).toEqual(['src/cli/main.ts', 'src/simulator/main.ts', 'src/worker.ts']);
    expect(graph.problems).toEqual([]);
    // The graph follows more than imports: the ledger's Lua script is read beside its module.
    expect(graph.files).toContain('src/ledger/transition.lua');
    expect(graph.files).toContain('packages/producer/src/payload.ts');
  });

  it('puts every copied file where it is in the repository, so relative imports resolve', () => {
    expect(copied.length).toBeGreaterThan(0);
    for (const file of copied) expect(file.target, file.source).toBe(posix.join(workdir, file.source));
  });

  it('holds every file the worker, the simulator and the CLI load', () => {
    // A folder read at run time (the console's templates) is held when every file in it is copied.
    const held = (file: string) =>
      copiedSources.has(file) ||
      (existsSync(join(PROJECT_ROOT, file)) &&
        statSync(join(PROJECT_ROOT, file)).isDirectory() &&
        readdirSync(join(PROJECT_ROOT, file)).every((name) => copiedSources.has(posix.join(file, name))));
    const missing = [...graph.files].filter((file) => !held(file));
    expect(missing, 'loaded at run time but not copied: add them to the Dockerfile').toEqual([]);
  });

  it('holds nothing else: only the source folders of the service (no demo, tools, tests or benchmark)', () => {
    const outside = [...copiedSources].filter(
      (file) => !ALLOWED.has(file) && !file.startsWith('src/') && !file.startsWith('packages/producer/src/'),
    );
    expect(outside, 'copied from outside src/ and packages/producer/src/').toEqual([]);
    // What the folders hold beyond the graph is small and never a test, a fixture or a tool.
    const extra = [...copiedSources].filter((file) => !graph.files.has(file) && !ALLOWED.has(file));
    expect(extra.filter((file) => /(^|\/)(test|tools|bench|fixtures?)\/|\.test\.ts$/.test(file))).toEqual([]);
  });

  it('copies no file that imports a devDependency or anything else npm ci --omit=dev leaves out', () => {
    const copiedModules = [...copiedSources].filter((file) => file.endsWith('.ts'));
    const { packages } = importGraph(PROJECT_ROOT, copiedModules);
    expect(packages.size).toBeGreaterThan(0);
    const wrong: string[] = [];
    for (const [name, importers] of packages) {
      if (name in pkg.dependencies) continue;
      const kind =
        name in (pkg.devDependencies ?? {})
          ? 'a devDependency'
          : name in (pkg.optionalDependencies ?? {})
            ? 'an optionalDependency'
            : 'not a dependency';
      wrong.push(`${name} (${kind}) imported by ${[...importers].join(', ')}`);
    }
    expect(wrong).toEqual([]);
  });

  it("runs what it holds: CMD is npm start's script, custody-worker links the package's bin", () => {
    const cmd = execForm(runtime.instructions.findLast((i) => i.keyword === 'CMD')!.args);
    expect(cmd).toEqual(['node', nodeScript('start')]);
    const link = runtime.instructions
      .filter((i) => i.keyword === 'RUN')
      .map((i) => /\bln -s (\S+) \/usr\/local\/bin\/custody-worker\b/.exec(i.args)?.[1]);
    expect(link.filter(Boolean)).toEqual([posix.join(workdir, pkg.bin['custody-worker']!)]);
    for (const entry of ENTRIES) expect(copiedSources).toContain(entry);
  });
});
