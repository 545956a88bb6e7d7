/**
 * What the dashboard shows of a job's data and return value: a copy without any `user` key (the person
 * inside a submitted record's `raw`), bounded in depth, breadth and total size. Job data comes from
 * producers and is not trusted: a 100,000-deep object once made the recursive formatter throw
 * `Maximum call stack size exceeded` and the whole job list answer 500. Iterative, so no input can
 * exhaust the stack; whatever is cut is replaced by a marker string saying so.
 */
export interface CopyLimits {
  depth: number;
  breadth: number;
  stringLength: number;
  nodes: number;
}

export const DASHBOARD_COPY_LIMITS: Readonly<CopyLimits> = {
  /** Objects/arrays nested deeper than this are shown as a marker. */
  depth: 16,
  /** Keys or elements shown per object/array. */
  breadth: 100,
  /** Characters shown per string. */
  stringLength: 2_000,
  /** Values (objects, arrays, scalars) copied in all; the rest become markers. */
  nodes: 5_000,
};

export const TRUNCATED = '[truncated]';

type Container = Record<string, unknown> | unknown[];

export function boundedCopyWithoutUser(value: unknown, limits: Readonly<CopyLimits> = DASHBOARD_COPY_LIMITS): unknown {
  let budget = limits.nodes;
  const copyScalar = (inner: unknown): unknown =>
    typeof inner === 'string' && inner.length > limits.stringLength
      ? `${inner.slice(0, limits.stringLength)}… ${TRUNCATED} (${inner.length} characters)`
      : inner;
  const isContainer = (inner: unknown): inner is Container => inner !== null && typeof inner === 'object';
  // Objects without a prototype: a key named `__proto__` (JSON.parse makes it an own key) stays a key.
  const empty = (inner: Container): Container => (Array.isArray(inner) ? [] : (Object.create(null) as Record<string, unknown>));

  if (!isContainer(value)) return copyScalar(value);
  // Work list of (source, target, depth): breadth-first, so the budget keeps the shallow parts.
  const root = empty(value);
  const queue: Array<[Container, Container, number]> = [[value, root, 1]];
  for (let index = 0; index < queue.length; index++) {
    const [source, target, depth] = queue[index]!;
    const total = Array.isArray(source) ? source.length : undefined;
    let shown = 0;
    // for…in over an object and an index over an array: nothing proportional to a huge input is built.
    for (const key of keysOf(source)) {
      if (!Array.isArray(source) && key === 'user') continue;
      if (shown === limits.breadth || budget === 0) {
        const rest = total === undefined ? TRUNCATED : `${TRUNCATED} (${total - shown} more)`;
        if (Array.isArray(target)) target.push(rest);
        else target[TRUNCATED] = rest;
        break;
      }
      shown += 1;
      budget -= 1;
      const inner = (source as Record<string, unknown>)[key];
      let copy: unknown;
      if (!isContainer(inner)) copy = copyScalar(inner);
      else if (depth >= limits.depth) copy = `${TRUNCATED} (deeper than ${limits.depth} levels)`;
      else {
        copy = empty(inner);
        queue.push([inner, copy as Container, depth + 1]);
      }
      if (Array.isArray(target)) target.push(copy);
      else target[key] = copy;
    }
  }
  return root;
}

function* keysOf(source: Container): Generator<string> {
  if (Array.isArray(source)) {
    for (let index = 0; index < source.length; index++) yield String(index);
    return;
  }
  for (const key in source) if (Object.hasOwn(source, key)) yield key;
}
