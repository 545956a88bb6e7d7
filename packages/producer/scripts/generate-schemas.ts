/**
 * Writes the package's JSON Schemas from its zod schemas (docs/contract.md section 8), for producers and
 * consumers in other languages:
 *   schemas/submit-payload.schema.json          the submit-transaction job data (input side)
 *   schemas/events/<event type>.schema.json     the `data` of each event type
 *   schemas/cancel-result.schema.json           what `cancel()` resolves with
 * and the ledger's transition script as a module of the package (src/transition-lua.ts, from the
 * worker's src/ledger/transition.lua), so that the package's cancel() runs the worker's one script.
 *
 * Run with `npm run schemas` (plain `node`: Node 24 strips the types). The files are committed; a test
 * (test/producer/schemas.test.ts) fails when they differ from what this generates, so a schema change
 * without regenerating is caught. What JSON Schema cannot say (the metadata size, a refinement) is
 * written next to the zod rule as `.meta()` (a pattern, a type, a description), so the two stay together.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import { catalogJson } from '../src/catalog.ts';
import { EVENT_DATA_SCHEMAS, EVENT_TYPES, type EventType } from '../src/events.ts';
import { submitPayloadSchema } from '../src/payload.ts';
import { cancelResultSchema } from '../src/cancel-result.ts';

export const SCHEMAS_DIR = new URL('../schemas/', import.meta.url);

/** The worker's transition script (the one source) and the package module that ships it as text. */
export const TRANSITION_LUA_FILE = new URL('../../../src/ledger/transition.lua', import.meta.url);
export const TRANSITION_MODULE_FILE = new URL('../src/transition-lua.ts', import.meta.url);

const ID_BASE = 'urn:custody-transfer-producer:schemas/';
const CONTRACT = 'docs/contract.md';

type JsonSchema = Record<string, unknown>;

/** Every schema file, by its path under schemas/, as the exact text written. */
export function generateSchemas(): Record<string, string> {
  const files: Record<string, string> = {};
  const payload = toJsonSchema(submitPayloadSchema);
  files['submit-payload.schema.json'] = render('submit-payload.schema.json', payload, {
    title: payload.title,
    description: `${String(payload.description)} (${CONTRACT} section 3)`,
  });
  const cancel = toJsonSchema(cancelResultSchema);
  files['cancel-result.schema.json'] = render('cancel-result.schema.json', cancel, {
    title: cancel.title,
    description: `${String(cancel.description)} (${CONTRACT} section 4, "Cancelling a transfer")`,
  });
  // The contract's catalog (src/catalog.ts) for producers and consumers in other languages.
  files['catalog.json'] = `${JSON.stringify(catalogJson(), null, 2)}\n`;
  for (const type of EVENT_TYPES) {
    const path = `events/${type}.schema.json`;
    const schema = toJsonSchema(EVENT_DATA_SCHEMAS[type]);
    files[path] = render(path, schema, { title: type, description: eventDescription(type, schema) });
  }
  return files;
}

function eventDescription(type: EventType, schema: JsonSchema): string {
  const what = typeof schema.description === 'string' ? ` ${schema.description}` : '';
  return `The data of a ${type} entry on the events stream (the JSON text in its data field, ${CONTRACT} section 4).${what} Objects are open: within a major version events only grow, and a consumer ignores keys it does not know.`;
}

function toJsonSchema(schema: z.ZodType): JsonSchema {
  // Input side: what a producer writes (payload) or the worker publishes (events), before any transform.
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const loose = emptySchemas(json);
  if (loose.length > 0) {
    // A `{}` means "anything": zod had no JSON Schema for a rule there. Say what it is with `.meta()`.
    throw new Error(`schema accepts anything at ${loose.join(', ')}: add a .meta() with its JSON Schema`);
  }
  return json;
}

/** Paths of `{}` schemas, except where "any value" is meant (extra keys of an open object, `not`). */
function emptySchemas(node: unknown, path = '#'): string[] {
  if (Array.isArray(node)) return node.flatMap((item, i) => emptySchemas(item, `${path}/${i}`));
  if (typeof node !== 'object' || node === null) return [];
  const found: string[] = [];
  for (const [key, value] of Object.entries(node)) {
    if (key === 'additionalProperties' || key === 'not' || key === 'const' || key === 'enum' || key === 'default') continue;
    if (key === 'properties' || key === '$defs') {
      for (const [name, sub] of Object.entries(value as Record<string, unknown>)) {
        if (isEmpty(sub)) found.push(`${path}/${key}/${name}`);
        else found.push(...emptySchemas(sub, `${path}/${key}/${name}`));
      }
      continue;
    }
    if (key === 'items' && isEmpty(value)) found.push(`${path}/items`);
    if ((key === 'anyOf' || key === 'oneOf' || key === 'allOf') && Array.isArray(value)) {
      value.forEach((sub, i) => {
        if (isEmpty(sub)) found.push(`${path}/${key}/${i}`);
      });
    }
    found.push(...emptySchemas(value, `${path}/${key}`));
  }
  return found;
}

function isEmpty(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

/** `$schema`, `$id`, `title` and `description` first, then the schema itself; two-space JSON with a final newline. */
function render(path: string, schema: JsonSchema, head: { title: unknown; description: string }): string {
  const { $schema, title: _title, description: _description, ...rest } = schema;
  const ordered = { $schema, $id: `${ID_BASE}${path}`, title: head.title, description: head.description, ...rest };
  return `${JSON.stringify(ordered, null, 2)}\n`;
}

/**
 * src/transition-lua.ts: transition.lua's text as a module, exactly (a template literal; `\`, a
 * backtick and `${` escaped). The package runs it (transition.ts assembles it as the worker does).
 */
export function generateTransitionModule(lua: string = readFileSync(TRANSITION_LUA_FILE, 'utf8')): string {
  const text = lua.replaceAll('\\', '\\\\').replaceAll('`', '\\`').replaceAll('${', '\\${');
  return [
    '// Generated by `npm run schemas` from src/ledger/transition.lua (the one source): do not edit.',
    '// test/producer/schemas.test.ts fails when this differs from what the script generates now.',
    '',
    "/** The ledger's transition script as the worker has it, before assembly (transition.ts). */",
    `export const TRANSITION_LUA_SOURCE = \`${text}\`;`,
    '',
  ].join('\n');
}

/** Writes every file and removes event schemas of types that no longer exist. */
export function writeSchemas(dir: URL = SCHEMAS_DIR): string[] {
  const files = generateSchemas();
  mkdirSync(new URL('events/', dir), { recursive: true });
  for (const name of readdirSync(new URL('events/', dir))) {
    if (name.endsWith('.schema.json') && !(`events/${name}` in files)) rmSync(new URL(`events/${name}`, dir));
  }
  for (const [path, text] of Object.entries(files)) writeFileSync(new URL(path, dir), text);
  return Object.keys(files);
}

if (import.meta.main) {
  for (const path of writeSchemas()) console.log(`wrote schemas/${path}`);
  writeFileSync(TRANSITION_MODULE_FILE, generateTransitionModule());
  console.log('wrote src/transition-lua.ts');
}
