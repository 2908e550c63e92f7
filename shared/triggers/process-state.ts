import { FactCache } from '../engine/memory.ts';
import { SweepCursor } from './sweep-cursor.ts';

/**
 * What one function process keeps between events: observed facts and the sweep's position.
 * Every entry is bounded, and losing all of it (a restart, a new instance) only costs API calls.
 */
export interface ProcessCaches {
  readonly facts: FactCache;
  readonly sweepCursor: SweepCursor;
}

export function newProcessCaches(): ProcessCaches {
  return { facts: new FactCache(), sweepCursor: new SweepCursor() };
}
