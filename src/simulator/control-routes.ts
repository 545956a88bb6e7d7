/**
 * The simulator's `/_sim/` control API: no auth, JSON in and out, bad input → 400. Tests, the demo and
 * the benchmark use it to change settings and faults, read counters and transfers, set a txid and
 * expire tokens. A real custody provider has nothing like it, so it lives apart from the upstream
 * endpoints (server.ts), and it must never be exposed beyond loopback.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { decodeSegment, failure, isObject, json, nonEmptyString, parseJson, readBody, write } from './http.ts';
import type { Answer } from './http.ts';
import { SettingsError, parseFaultPlan } from './settings.ts';
import type { FaultPlan } from './settings.ts';

/**
 * What the control API reads and changes of a running simulator, whichever provider it plays
 * (wallet-service: server.ts; BitGo: bitgo/server.ts). Each method throws SettingsError on bad input.
 */
export interface ControlTarget {
  /** The endpoint names a fault plan can target. */
  readonly endpoints: readonly string[];
  stats(): unknown;
  settings(): unknown;
  /** Deep-merges a partial into the settings and returns them. */
  patchSettings(patch: unknown): unknown;
  faults(): unknown;
  clearFaults(): void;
  /** `endpoint` is one of `endpoints`; the plan was validated by parseFaultPlan. */
  setFault(endpoint: string, plan: FaultPlan | null): void;
  reset(): void;
  /** The simulator's view of a transfer, undefined when none has this sequenceId. */
  transfer(sequenceId: string, now: number): unknown;
  /** Forces the txid to show now (the given one, or the one drawn at acceptance); false: unknown sequenceId. */
  setTxid(sequenceId: string, txid: string | undefined, now: number): boolean;
  /** Every accepted transfer shows its txid from now on; returns how many. */
  releaseAllTxids(now: number): number;
  expireTokens(): void;
  /** Routes only this provider serves (`POST transfers/:id/state`, …); undefined: not found. */
  extraRoute?(route: string, id: string, text: string, now: number): Answer | undefined;
}

/** What every simulator server has that its control target reads and changes the same way. */
export interface ControlledServer<S, E extends string> {
  readonly state: { stats(): unknown; releaseAllTxids(now: number): number };
  readonly faults: { snapshot(): unknown; clear(): void; set(endpoint: E, plan: FaultPlan | null): void };
  /** The settings in force; `PATCH settings` replaces them with the merged ones. */
  current: S;
  reset(): void;
}

/** What differs between the providers' control targets. */
export interface ControlSpecifics<S, E extends string> extends Pick<ControlTarget, 'transfer' | 'setTxid' | 'expireTokens' | 'extraRoute'> {
  readonly endpoints: readonly E[];
  /** Deep-merges a partial into the settings (throws SettingsError on bad input). */
  mergeSettings(current: S, patch: unknown): S;
  /** Checks a fault plan further before it is set (the provider serves only some faults); default: none. */
  checkFaultPlan?(plan: FaultPlan | null): FaultPlan | null;
}

/**
 * The control target of a simulator server: settings, faults, stats, reset and the release of txids
 * from `server` itself, the rest from `specifics`. Reads `server` at each call, never before.
 */
export function controlTarget<S, E extends string>(server: ControlledServer<S, E>, specifics: ControlSpecifics<S, E>): ControlTarget {
  const { mergeSettings, checkFaultPlan, ...own } = specifics;
  return {
    ...own,
    stats: () => server.state.stats(),
    settings: () => server.current,
    patchSettings: (patch) => {
      server.current = mergeSettings(server.current, patch);
      return server.current;
    },
    faults: () => server.faults.snapshot(),
    clearFaults: () => server.faults.clear(),
    setFault: (endpoint, plan) => server.faults.set(endpoint as E, checkFaultPlan === undefined ? plan : checkFaultPlan(plan)),
    reset: () => server.reset(),
    releaseAllTxids: (now) => server.state.releaseAllTxids(now),
  };
}

const NOT_FOUND = failure(404, 'not found');

export async function handleControl(target: ControlTarget, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const body = await readBody(req);
  if (!body.ok) {
    if (body.tooLarge) write(res, { ...failure(413, 'request body too large'), headers: { connection: 'close' } });
    return;
  }
  let answer: Answer;
  try {
    answer = controlAnswer(target, req.method ?? 'GET', path.split('/').slice(2), body.text);
  } catch (error) {
    answer =
      error instanceof SettingsError || error instanceof ControlInputError ? failure(400, error.message) : failure(500, 'internal error');
  }
  write(res, answer);
}

function controlAnswer(target: ControlTarget, method: string, parts: string[], text: string): Answer {
  const [resource, id, action] = parts.map((part) => decodeSegment(part) ?? '');
  const route = `${method} ${resource ?? ''}${parts.length > 1 ? '/:id' : ''}${parts.length > 2 ? `/${action}` : ''}`;
  const now = Date.now();
  switch (route) {
    case 'GET stats':
      return json(200, target.stats());
    case 'GET settings':
      return json(200, target.settings());
    case 'PATCH settings':
    case 'PUT settings':
      return json(200, target.patchSettings(parseControlJson(text, false)));
    case 'GET faults':
      return json(200, target.faults());
    case 'DELETE faults':
      target.clearFaults();
      return json(200, { success: true });
    case 'PUT faults/:id':
    case 'DELETE faults/:id': {
      const endpoint = id ?? '';
      if (!target.endpoints.includes(endpoint)) {
        throw new ControlInputError(`unknown endpoint: ${endpoint.slice(0, 64)} (one of ${target.endpoints.join(', ')})`);
      }
      const plan = method === 'DELETE' ? null : parseFaultPlan(parseControlJson(text, false));
      target.setFault(endpoint, plan);
      return json(200, { endpoint, plan });
    }
    case 'POST reset':
      target.reset();
      return json(200, { success: true });
    case 'GET transfers/:id': {
      const view = target.transfer(id ?? '', now);
      return view ? json(200, view) : failure(404, 'unknown sequenceId');
    }
    case 'POST transfers/:id/txid': {
      const input = parseControlJson(text, true);
      let txid: string | undefined;
      if (input !== undefined && input !== null) {
        if (!isObject(input)) throw new ControlInputError('body must be a JSON object');
        if (input.txid !== undefined && !nonEmptyString(input.txid)) {
          throw new ControlInputError('txid must be a non-empty string');
        }
        txid = input.txid;
      }
      if (!target.setTxid(id ?? '', txid, now)) return failure(404, 'unknown sequenceId');
      return json(200, target.transfer(id ?? '', now));
    }
    case 'POST txids':
      return json(200, { released: target.releaseAllTxids(now) });
    case 'POST tokens/:id':
      if (id !== 'expire') return NOT_FOUND;
      target.expireTokens();
      return json(200, { success: true });
    default:
      return target.extraRoute?.(route, id ?? '', text, now) ?? NOT_FOUND;
  }
}

export class ControlInputError extends Error {
  override name = 'ControlInputError';
}

export function parseControlJson(text: string, optional: boolean): unknown {
  if (text.trim() === '') {
    if (optional) return undefined;
    throw new ControlInputError('a JSON body is required');
  }
  const parsed = parseJson(text);
  if (!parsed.ok) throw new ControlInputError('body is not valid JSON');
  return parsed.value;
}
