const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/;

/**
 * The one duration grammar of the worker's and the simulator's environment (docs/contract.md section 2):
 * whole milliseconds, or a decimal number with a lower-case unit; surrounding spaces are ignored,
 * a space may separate number and unit, the result is rounded to whole milliseconds. No sign, no
 * exponent, no upper-case unit. Each variable then applies its own range.
 */
export const DURATION_GRAMMAR = 'whole milliseconds like 1500, or a number with a unit ms, s, m, h or d like 30s, 1.5m, 24h';

/**
 * Parses `1500`, `1500ms`, `30s`, `5m`, `24h`, `30d` into whole milliseconds.
 * A bare number is milliseconds and must be whole. Returns undefined when the text is not a duration.
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const [, amount = '', unit] = match;
  if (unit === undefined && amount.includes('.')) return undefined;
  const ms = Math.round(Number(amount) * UNIT_MS[(unit ?? 'ms') as keyof typeof UNIT_MS]);
  return Number.isSafeInteger(ms) ? ms : undefined;
}
