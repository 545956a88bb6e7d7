import { boundedCopyWithoutUser, DASHBOARD_COPY_LIMITS, type CopyLimits } from './bounded-copy.ts';

/**
 * What the dashboard may show of a job's data: personal data redacted before the bounded copy
 * (bounded-copy.ts) cuts it to size and removes every `user`. For the submit-transaction payload
 * (docs/contract.md section 3) the transfer fields stay as they are; a top-level `metadata` is shown
 * as redactMetadata says (GET /transfers/:sequenceId shows the metadata its events echo the same way);
 * a top-level `travelRule` keeps its structure and keys, every scalar in it is redacted. The same
 * holds for any queue's job data with those keys. Anything that is not an object is returned as it is.
 *
 * Job data is not trusted (bounded-copy.ts): the walk is iterative and stops where the bounded copy
 * stops anyway (depth, keys per object, values in all), so no input exhausts the stack or is copied
 * whole. The input is never changed.
 */
export const REDACTED = '[redacted]';

/**
 * What the dashboard shows as the data of a job whose stored `data` is not JSON (BullMQ cannot read
 * such a job at all; dashboard.ts reads the rest of it and puts this in place of its data).
 */
export const UNREADABLE_JOB_DATA: Readonly<{ unreadable: string }> = Object.freeze({ unreadable: 'job data is not JSON' });

type Container = Record<string, unknown> | unknown[];

const isContainer = (value: unknown): value is Container => value !== null && typeof value === 'object';

// Objects without a prototype, as in the bounded copy: a key named `__proto__` stays a key.
const empty = (value: Container): Container => (Array.isArray(value) ? [] : (Object.create(null) as Record<string, unknown>));

export function redactJobData(
  data: unknown,
  metadataKeys: readonly string[],
  limits: Readonly<CopyLimits> = DASHBOARD_COPY_LIMITS,
): unknown {
  if (!isContainer(data) || Array.isArray(data)) return data;
  if (!Object.hasOwn(data, 'metadata') && !Object.hasOwn(data, 'travelRule')) return data;
  const view = Object.create(null) as Record<string, unknown>;
  // One key more than the bounded copy shows, so that it still marks the cut.
  for (const key of ownKeys(data, limits.breadth + 1)) {
    const value = data[key];
    // Levels as the bounded copy counts them: the job data is level 1, its `metadata` level 2.
    if (key === 'metadata') view[key] = redactMetadata(value, metadataKeys, limits, 2);
    else if (key === 'travelRule') view[key] = redactLeaves(value, limits, 2);
    else view[key] = value;
  }
  return view;
}

/**
 * What may be shown of a transfer's `metadata`: the one rule for the dashboard (a job's data, through
 * redactJobData) and GET /transfers/:sequenceId (the metadata each event echoes). Every key is kept
 * (but `user`, which the bounded copy drops anyway); a value is shown only when its key is in
 * `metadataKeys` (DASHBOARD_METADATA_KEYS) and it is a scalar. The allow-list names top-level keys,
 * never what is under them: an object or array under an allowed key keeps its structure and keys with
 * every scalar in it REDACTED (as `travelRule`); the value of any other key is REDACTED whole. An
 * array as the metadata has no names: all redacted. A value that is not an object is REDACTED; null
 * and undefined stay. The input is never changed; the result is meant for the bounded copy, which
 * `level` (where the metadata sits in what it copies: 1 when it is the root) lines the walk up with.
 */
export function redactMetadata(
  metadata: unknown,
  metadataKeys: readonly string[],
  limits: Readonly<CopyLimits> = DASHBOARD_COPY_LIMITS,
  level = 1,
): unknown {
  if (metadata === null || metadata === undefined) return metadata;
  if (!isContainer(metadata)) return REDACTED;
  const view = empty(metadata);
  for (const key of ownKeys(metadata, limits.breadth + 1)) {
    let value: unknown = REDACTED;
    if (!Array.isArray(metadata) && metadataKeys.includes(key)) {
      const inner = metadata[key];
      value = isContainer(inner) ? redactLeaves(inner, limits, level + 1) : inner;
    }
    if (Array.isArray(view)) view.push(value);
    else view[key] = value;
  }
  keepLength(metadata, view);
  return view;
}

/**
 * A ledger record's metadata (stored as JSON text) as the console's transfer page and `/api/v1/transfers`
 * show it: as redactMetadata says, then bounded. No metadata is null; text that is not JSON is REDACTED whole.
 */
export function redactStoredMetadata(text: string, metadataKeys: readonly string[]): unknown {
  if (text === '') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return REDACTED;
  }
  return boundedCopyWithoutUser(redactMetadata(parsed, metadataKeys));
}

/**
 * The same structure with every scalar replaced by REDACTED, breadth first like the bounded copy.
 * Containers deeper than it shows, or past its budget of values, are left empty: it shows them as
 * cut (or empty), never with what they held. `level` is the value's depth as the bounded copy counts
 * it (the root it copies is level 1).
 */
function redactLeaves(value: unknown, limits: Readonly<CopyLimits>, level: number): unknown {
  if (value === null || value === undefined) return value;
  if (!isContainer(value)) return REDACTED;
  let budget = limits.nodes;
  const root = empty(value);
  const queue: Array<[Container, Container, number]> = [[value, root, level]];
  for (let index = 0; index < queue.length; index++) {
    const [source, target, depth] = queue[index]!;
    for (const key of ownKeys(source, limits.breadth + 1)) {
      const inner = (source as Record<string, unknown>)[key];
      let copy: unknown = REDACTED;
      if (isContainer(inner)) {
        copy = empty(inner);
        if (depth < limits.depth && budget > 0) queue.push([inner, copy as Container, depth + 1]);
      }
      budget = Math.max(0, budget - 1);
      if (Array.isArray(target)) target.push(copy);
      else target[key] = copy;
    }
    keepLength(source, target);
  }
  return root;
}

/**
 * A cut array keeps its length (the rest are holes, never read: the bounded copy stops before them),
 * so that the bounded copy still says how many elements it left out.
 */
function keepLength(source: Container, target: Container): void {
  if (Array.isArray(source) && Array.isArray(target) && source.length > target.length) target.length = source.length;
}

/** At most `max` own keys (indexes of an array), in order, without `user` (the bounded copy drops it). */
function* ownKeys(source: Container, max: number): Generator<string> {
  let count = 0;
  if (Array.isArray(source)) {
    for (let index = 0; index < source.length && count < max; index++, count++) yield String(index);
    return;
  }
  for (const key in source) {
    if (count === max) return;
    if (!Object.hasOwn(source, key) || key === 'user') continue;
    count++;
    yield key;
  }
}
