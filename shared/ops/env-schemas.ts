/** zod schemas for values read from the environment, shared by config.ts and edge-config.ts. */
import { z } from 'zod';

/** A whole number within [min, max], written in decimal. */
export const intFromEnv = (min: number, max: number) =>
  z.string().trim().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min).max(max));

/** A comma-separated list (blanks and empty entries dropped), each entry checked by `item`. */
export const commaList = (item: z.ZodString) =>
  z
    .string()
    .optional()
    .transform((v) =>
      (v ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    )
    .pipe(z.array(item));
