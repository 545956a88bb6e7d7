import type { z } from 'zod';

/** Where an answer broke its schema: up to five field paths with zod's message, never a value. */
export function schemaFailure(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
    .join('; ');
}
