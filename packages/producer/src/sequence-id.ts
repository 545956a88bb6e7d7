import { z } from 'zod';

/** A transfer's identity end to end (docs/contract.md section 3): 1–128 of `[A-Za-z0-9_-]`. */
export const SEQUENCE_ID = /^[A-Za-z0-9_-]{1,128}$/;

export const sequenceIdSchema = z.string().regex(SEQUENCE_ID, 'must be 1-128 of A-Z a-z 0-9 _ -');
