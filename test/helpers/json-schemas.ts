/**
 * The committed JSON Schemas of the producer package (packages/producer/schemas), compiled with ajv:
 * what a producer or consumer in another language validates with. The harnesses check every event they
 * read against them, so each test that looks at events also checks that the published shapes are the
 * documented ones (on top of the zod check parseStreamEntry makes).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import {
  checkEventData,
  EVENT_TYPES,
  parseStreamEntry,
  type EventData,
  type EventType,
  type TransferEvent,
} from '../../packages/producer/src/events.ts';

export const SCHEMAS_DIR = new URL('../../packages/producer/schemas/', import.meta.url);

const ajv = new Ajv2020({
  allErrors: true,
  strict: true,
  // The schemas carry zod's own pattern next to `format: date-time`: the pattern is the check.
  formats: { 'date-time': true },
});

function compile(path: string): ValidateFunction {
  return ajv.compile(JSON.parse(readFileSync(new URL(path, SCHEMAS_DIR), 'utf8')) as object);
}

let events: Map<EventType, ValidateFunction> | undefined;
let payload: ValidateFunction | undefined;

function eventValidator(type: EventType): ValidateFunction {
  events ??= new Map(EVENT_TYPES.map((t) => [t, compile(`events/${t}.schema.json`)]));
  return events.get(type)!;
}

let cancelResult: ValidateFunction | undefined;

/** Whether a cancel's answer validates against schemas/cancel-result.schema.json, and why not. */
export function checkCancelResultJson(data: unknown): { valid: boolean; errors: string } {
  cancelResult ??= compile('cancel-result.schema.json');
  const valid = cancelResult(data);
  return { valid, errors: describe(cancelResult.errors) };
}

/** Whether job data validates against schemas/submit-payload.schema.json, and why not. */
export function checkPayloadJson(data: unknown): { valid: boolean; errors: string } {
  payload ??= compile('submit-payload.schema.json');
  const valid = payload(data);
  return { valid, errors: describe(payload.errors) };
}

/** Throws, naming the event type and ajv's errors, when `data` does not validate against its type's JSON Schema. */
export function assertEventDataMatchesJsonSchema(type: EventType, data: unknown): void {
  const validate = eventValidator(type);
  if (!validate(data)) {
    throw new Error(`${type} data does not validate against schemas/events/${type}.schema.json: ${describe(validate.errors)}`);
  }
}

function describe(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((error) => `${error.instancePath || '(root)'} ${error.message ?? error.keyword}`).join('; ');
}

/** parseStreamEntry (the zod check), then the JSON Schema check of the data as published (the entry's JSON text). */
export function parseCheckedEntry(entry: [string, string[]]): TransferEvent {
  const event = parseStreamEntry(entry);
  const fields = entry[1];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === 'data') assertEventDataMatchesJsonSchema(event.event, JSON.parse(fields[i + 1]!));
  }
  return event;
}

/** The data of an event that must be of `type` (else the test fails), typed by that type's schema. */
export function dataOf<K extends EventType>(event: TransferEvent | undefined, type: K): EventData[K] {
  if (event?.event !== type) throw new Error(`expected a ${type} event, got ${event?.event ?? 'none'}`);
  return checkEventData(type, event.data);
}
