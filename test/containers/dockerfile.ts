/**
 * The Dockerfile and .dockerignore read the way `docker build` reads them, for the forms this repository
 * uses: no Docker engine runs on the development machines, so the container tests check these files
 * against the code instead of building the image.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

/** One instruction per logical line (continuations joined, comments and parser directives dropped). */
export interface Instruction {
  keyword: string;
  args: string;
}

export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const match = /^(\S+)\s*(.*)$/.exec(full);
    if (match) instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]! });
  }
  if (pending !== '') throw new Error('Dockerfile ends inside a continued line');
  return instructions;
}

export interface Stage {
  base: string;
  name: string | undefined;
  instructions: Instruction[];
}

export function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const parts = instruction.args.split(/\s+/).filter((part) => !part.startsWith('--'));
      const as = parts.findIndex((part) => part.toUpperCase() === 'AS');
      stages.push({ base: parts[0]!, name: as === -1 ? undefined : parts[as + 1], instructions: [] });
    } else {
      if (stages.length === 0) throw new Error(`${instruction.keyword} before the first FROM`);
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

/** An exec-form (JSON array) argument such as CMD ["node", "src/worker.ts"]; shell form is refused. */
export function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((part) => typeof part === 'string')) throw new Error(`not an exec form: ${args}`);
  return parsed;
}

/** COPY sources from the build context (not --from another stage), without flags and destination. */
export function contextSources(instruction: Instruction): string[] | undefined {
  const words = instruction.args.split(/\s+/);
  if (words.some((word) => word.startsWith('--from='))) return undefined;
  const paths = words.filter((word) => !word.startsWith('--'));
  return paths.slice(0, -1);
}

/** A .dockerignore pattern (`*`, `?`, `**`) against a context path or any of its parents. */
export function dockerIgnored(patterns: string[], path: string): boolean {
  const toRegex = (pattern: string) =>
    new RegExp(
      `^${
        pattern
          .replace(/[.+^${}()|[\]\\]/g, '\\$&')
          .replace(/\*\*/g, '\u0000')
          .replace(/\*/g, '[^/]*')
          .replace(/\?/g, '[^/]')
          .replace(/\u0000/g, '.*') /* eslint-disable-line no-control-regex -- a NUL stands for ** while the glob is rewritten */
      }$`,
    );
  const segments = path.split('/');
  const prefixes = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\/|\/$/g, '');
    if (prefixes.some((prefix) => toRegex(pattern).test(prefix))) ignored = !negate;
  }
  return ignored;
}

export function readDockerignore(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** A file of the build context and where a stage's COPY puts it. */
export interface CopiedFile {
  /** Path in the build context (the repository), `/`-separated. */
  source: string;
  /** Absolute path in the image. */
  target: string;
}

/** Every file of a directory in the context that .dockerignore lets through, relative to the context. */
function contextFiles(root: string, dir: string, ignore: string[]): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(join(root, dir))) {
    const path = posix.join(dir, entry);
    if (dockerIgnored(ignore, path)) continue;
    if (statSync(join(root, path)).isDirectory()) files.push(...contextFiles(root, path, ignore));
    else files.push(path);
  }
  return files;
}

/**
 * The files a stage's COPY instructions take from the build context, and where each lands, by Docker's
 * rules: relative destinations start at the WORKDIR in force; a file goes to the destination itself, or
 * into it when it ends with `/` (required with several sources); a directory's contents (not the
 * directory) go into the destination. Wildcards, ADD and the JSON form are refused: this repository
 * names its paths.
 */
export function copiedFiles(root: string, stage: Stage, ignore: string[]): CopiedFile[] {
  const copied: CopiedFile[] = [];
  let workdir = '/';
  for (const instruction of stage.instructions) {
    if (instruction.keyword === 'WORKDIR') workdir = posix.resolve(workdir, instruction.args.trim());
    if (instruction.keyword === 'ADD') throw new Error(`ADD ${instruction.args}: use COPY`);
    if (instruction.keyword !== 'COPY') continue;
    if (instruction.args.trim().startsWith('[') || /\s\[/.test(instruction.args))
      throw new Error(`COPY in JSON form is not read here: ${instruction.args}`);
    const sources = contextSources(instruction);
    if (sources === undefined) continue; // --from another stage
    const words = instruction.args.split(/\s+/).filter((word) => !word.startsWith('--'));
    const destination = words.at(-1)!;
    const into = destination.endsWith('/') || sources.length > 1;
    const target = posix.resolve(workdir, destination);
    for (const raw of sources) {
      if (/[*?[]/.test(raw)) throw new Error(`COPY ${raw}: wildcards are not read here; name the paths`);
      const source = posix.normalize(raw).replace(/^\.\//, '').replace(/\/$/, '');
      if (statSync(join(root, source)).isDirectory()) {
        for (const file of contextFiles(root, source, ignore))
          copied.push({ source: file, target: posix.join(target, posix.relative(source, file)) });
      } else if (!dockerIgnored(ignore, source)) {
        copied.push({ source, target: into ? posix.join(target, posix.basename(source)) : target });
      }
    }
  }
  return copied;
}
