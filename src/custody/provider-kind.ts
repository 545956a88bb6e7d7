/**
 * What a custody provider is to the rest of the worker: one descriptor, exported by its folder
 * (src/custody/<provider>/provider.ts) and listed in src/custody/providers.ts. From the descriptors
 * src/config/config.ts derives CUSTODY_PROVIDER's values, reads (and documents) only the chosen
 * provider's own variables, and src/custody/provider.ts builds the adapter and lists its secrets.
 */
import type { z } from 'zod';
import type { CustodyEndpoint } from './errors.ts';
import type { NarrowingMemo } from './lookup-narrowing.ts';
import type { CustodyPort, SkippedRecord } from './port.ts';

/** One variable's entry in docs/configuration.md: what an operator reads as its default, and what it means. */
export interface VariableDoc {
  default: string;
  meaning: string;
}

/** The custody settings every provider's adapter gets (CUSTODY_TIMEOUT, CUSTODY_CONNECT_TIMEOUT, …). */
export interface SharedCustodySettings {
  timeoutMs: number;
  connectTimeoutMs: number;
  connections: number;
  /** A 429's Retry-After above this is read as this. */
  maxPauseMs: number;
}

/** What the worker hands an adapter besides its settings (an adapter ignores what it has no use for). */
export interface AdapterOptions {
  /** Records of a list answer that fail the adapter's schema were skipped (reporting.ts counts and logs them). */
  onSkippedRecords?: (endpoint: CustodyEndpoint, skipped: readonly SkippedRecord[]) => void;
  /**
   * Where an adapter whose API leaves open whether lookups are narrowed keeps what it found out, for
   * every worker process (lookup-narrowing.ts). Absent (the CLI): never narrowed, so a lone record
   * without the sequenceId identifies nothing.
   */
  narrowing?: NarrowingMemo;
}

/**
 * A custody provider. `Shape` is its own environment variables (read only when CUSTODY_PROVIDER names
 * it, each problem named by its variable), `Settings` what the config carries for it
 * (`Config['custody'].settings`).
 */
export interface CustodyProvider<Name extends string = string, Shape extends z.ZodRawShape = z.ZodRawShape, Settings = unknown> {
  /** CUSTODY_PROVIDER's value that chooses it. */
  readonly name: Name;
  /** Its own variables, with the validators of src/config/validators.ts. */
  readonly env: z.ZodObject<Shape>;
  /** Their entries in docs/configuration.md, one per variable. */
  readonly docs: { readonly [K in keyof Shape]: VariableDoc };
  /** Problems across its variables, from the raw text, as `VARIABLE: problem` lines. */
  check?(env: NodeJS.ProcessEnv): string[];
  /** What the config holds for it, from its parsed variables. */
  settings(env: z.infer<z.ZodObject<Shape>>): Settings;
  /** What its settings hold that must never be printed, as it could appear (the CLI redacts these). */
  secrets(settings: Settings): Array<string | undefined>;
  /** Every value its adapter can give ListedTransfer.halted (none when absent): the metrics count halts by it. */
  readonly haltedStates?: readonly string[];
  /** Whether its adapter can have the wake-up capability (port.ts, Wakeups): the webhook metric has its series at 0 from start-up. */
  readonly wakeups?: boolean;
  /** Its adapter, undecorated (src/custody/provider.ts adds the budget, metrics and tracing). */
  create(settings: Settings, shared: SharedCustodySettings, options: AdapterOptions): CustodyPort;
}

/**
 * Any provider, as config.ts and the factory handle one they looked up by name: its settings are
 * opaque there (`never` in, `unknown` out), handed back only to the provider that made them.
 */
export interface AnyCustodyProvider {
  readonly name: string;
  readonly env: z.ZodObject;
  readonly docs: Readonly<Record<string, VariableDoc>>;
  check?(env: NodeJS.ProcessEnv): string[];
  settings(env: never): unknown;
  secrets(settings: never): Array<string | undefined>;
  readonly haltedStates?: readonly string[];
  readonly wakeups?: boolean;
  create(settings: never, shared: SharedCustodySettings, options: AdapterOptions): CustodyPort;
}

/** Declares a provider with its name, variables and settings inferred (and checked against each other). */
export function defineCustodyProvider<const Name extends string, Shape extends z.ZodRawShape, Settings>(
  provider: CustodyProvider<Name, Shape, Settings>,
): CustodyProvider<Name, Shape, Settings> {
  return provider;
}
