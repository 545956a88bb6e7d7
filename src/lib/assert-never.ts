/**
 * The default branch of a switch over a union the worker decides money by: a new member that no case
 * handles is a compile error here, and a value that slipped past the types a thrown error, never a
 * silent fall-through.
 */
export function assertNever(value: never, what: string): never {
  throw new Error(`unhandled ${what}: ${JSON.stringify(value)}`);
}
