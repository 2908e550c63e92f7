import { DEFAULT_FACT_CACHE_LIMITS, FactCache, type FactCacheLimits } from '../engine/memory.ts';
import { SweepCursor } from './sweep-cursor.ts';

/**
 * What one function process keeps between events: observed facts and the sweep's position.
 * Every entry is bounded, and losing all of it (a restart, a new instance) only costs API calls.
 */
export interface ProcessCaches {
  readonly facts: FactCache;
  readonly sweepCursor: SweepCursor;
}

export function newProcessCaches(limits: FactCacheLimits = DEFAULT_FACT_CACHE_LIMITS): ProcessCaches {
  return { facts: new FactCache(limits), sweepCursor: new SweepCursor() };
}
