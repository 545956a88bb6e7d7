/**
 * The files a Node entry point loads at run time, found with TypeScript's own parser: static imports
 * and re-exports (not `import type`/`export type`, which type stripping erases), `import('<literal>')`,
 * and files read next to a module through `new URL('<relative>', import.meta.url)` (the ledger's Lua
 * script). Any other use of `import.meta` or a dynamic import of a computed name is reported as a
 * problem rather than guessed at: a file the graph cannot see would be missing from the image.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join, posix, relative, sep } from 'node:path';
import ts from 'typescript';

export interface ImportGraph {
  /** Every file loaded or read, relative to the root, with `/` separators (entries included). */
  files: Set<string>;
  /** Bare specifiers (packages, not builtins) by the files that import them. */
  packages: Map<string, Set<string>>;
  /** What the walk could not follow (unresolved relative imports, unrecognised file reads). */
  problems: string[];
}

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** `new URL('<string>', import.meta.url)`: the string, else undefined. */
function siblingUrl(node: ts.Node): string | undefined {
  if (!ts.isNewExpression(node) || !ts.isIdentifier(node.expression) || node.expression.text !== 'URL') return undefined;
  const [target, base] = node.arguments ?? [];
  if (!target || !base || !ts.isStringLiteralLike(target)) return undefined;
  const isMetaUrl =
    ts.isPropertyAccessExpression(base) &&
    base.name.text === 'url' &&
    ts.isMetaProperty(base.expression) &&
    base.expression.keywordToken === ts.SyntaxKind.ImportKeyword;
  return isMetaUrl ? target.text : undefined;
}

interface FileRefs {
  /** Specifiers of modules it loads (static and dynamic). */
  modules: string[];
  /** Relative paths of files it reads beside itself. */
  reads: string[];
  problems: string[];
}

function referencesOf(path: string, text: string): FileRefs {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const refs: FileRefs = { modules: [], reads: [], problems: [] };
  const where = (node: ts.Node) => `${path}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
  const understood = new Set<ts.Node>();

  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteralLike(node.moduleSpecifier)) {
      if (!node.importClause?.isTypeOnly) refs.modules.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteralLike(node.moduleSpecifier)) {
      if (!node.isTypeOnly) refs.modules.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [specifier] = node.arguments;
      if (specifier && ts.isStringLiteralLike(specifier)) refs.modules.push(specifier.text);
      else refs.problems.push(`${where(node)}: import() of a computed specifier`);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      refs.problems.push(`${where(node)}: import = require() is not followed`);
    } else {
      const read = siblingUrl(node);
      if (read !== undefined) {
        const base = (node as ts.NewExpression).arguments![1]! as ts.PropertyAccessExpression;
        understood.add(base.expression);
        if (read.startsWith('./') || read.startsWith('../')) refs.reads.push(read);
        else refs.problems.push(`${where(node)}: new URL('${read}', import.meta.url) is not a relative path`);
      }
    }
    if (ts.isMetaProperty(node) && node.keywordToken === ts.SyntaxKind.ImportKeyword && !understood.has(node)) {
      refs.problems.push(
        `${where(node)}: import.meta used other than in new URL('<relative>', import.meta.url): cannot tell what it loads`,
      );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return refs;
}

/** The graph of everything `entries` (paths relative to `root`) load or read at run time. */
export function importGraph(root: string, entries: readonly string[]): ImportGraph {
  const graph: ImportGraph = { files: new Set(), packages: new Map(), problems: [] };
  const toRelative = (absolute: string) => relative(root, absolute).split(sep).join(posix.sep);
  const queue = [...entries];
  const add = (file: string, from: string) => {
    if (!existsSync(join(root, file))) graph.problems.push(`${from}: ${file} does not exist`);
    else if (!graph.files.has(file)) queue.push(file);
  };

  while (queue.length > 0) {
    const file = queue.shift()!;
    if (graph.files.has(file)) continue;
    graph.files.add(file);
    if (!file.endsWith('.ts')) continue;
    const absolute = join(root, file);
    const refs = referencesOf(file, readFileSync(absolute, 'utf8'));
    graph.problems.push(...refs.problems);
    for (const read of refs.reads) add(toRelative(join(dirname(absolute), read)), file);
    for (const specifier of refs.modules) {
      if (specifier.startsWith('./') || specifier.startsWith('../')) add(toRelative(join(dirname(absolute), specifier)), file);
      else if (specifier.startsWith('/') || specifier.startsWith('file:')) graph.problems.push(`${file}: absolute import ${specifier}`);
      else if (!isBuiltin(specifier)) {
        const name = packageName(specifier);
        if (!graph.packages.has(name)) graph.packages.set(name, new Set());
        graph.packages.get(name)!.add(file);
      }
    }
  }
  return graph;
}
