/**
 * The validators of single environment variables, shared by src/config/config.ts and each custody
 * provider's own variables (src/custody/<provider>/provider.ts), so that a problem reads the same
 * whichever declares the variable. Every value arrives as text; an empty string counts as unset so that
 * `FOO=` in a compose file means default.
 */
import { z } from 'zod';
import { DURATION_GRAMMAR, parseDuration } from './duration.ts';

export const text = () => z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());

export const httpUrl = (label: string) =>
  z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string({ error: (issue) => (issue.input === undefined ? 'required' : `must be ${label}`) })
      .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), `must be an http(s) URL`)
      .refine((v) => !URL.canParse(v) || new URL(v).search === '', 'must not carry a query string'),
  );

export const optionalHttpUrl = () =>
  z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string()
      .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL')
      .optional(),
  );

export const requiredSecret = () => z.preprocess((v) => (v === '' ? undefined : v), z.string({ error: 'required' }));

export const integer = (fallback: number, min: number, max: number) =>
  z.preprocess(
    (v) => (v === undefined || v === '' ? String(fallback) : v),
    z
      .string()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .refine((n) => n >= min && n <= max, `must be between ${min} and ${max}`),
  );

/** `tooShort`: the message for a duration under `minMs` (why it may not be shorter), instead of the bare bound. */
export const duration = (fallback: string, minMs = 1, tooShort = `must be at least ${minMs} ms`) =>
  z.preprocess(
    (v) => (v === undefined || v === '' ? fallback : v),
    z
      .string()
      .transform((v, ctx) => {
        const ms = parseDuration(v);
        if (ms === undefined) {
          ctx.addIssue({ code: 'custom', message: `must be a duration: ${DURATION_GRAMMAR}` });
          return z.NEVER;
        }
        return ms;
      })
      .refine((ms) => ms >= minMs, tooShort),
  );

/** A duration whose default is another variable's (the caller fills it in): undefined when unset. */
export const optionalDuration = (minMs = 1) => z.preprocess((v) => (v === '' ? undefined : v), duration('0', minMs).optional());

export const bool = (fallback: boolean) =>
  z.preprocess(
    (v) => (v === undefined || v === '' ? String(fallback) : String(v).toLowerCase()),
    z.enum(['true', 'false', '1', '0', 'yes', 'no'], 'must be true or false').transform((v) => ['true', '1', 'yes'].includes(v)),
  );
