import { LiveDriverCache } from './driver-lookup.ts';
import { EnsuredCache } from './ensured-cache.ts';
import { ExpiryThrottle } from './expiry.ts';

/**
 * What one function process remembers between events. Every entry is bounded, and losing all of
 * it (a restart, a new instance) only costs API calls, never correctness.
 */
export interface ProcessCaches {
  readonly expiryThrottle: ExpiryThrottle;
  readonly ensuredCache: EnsuredCache;
  readonly liveDrivers: LiveDriverCache;
}

export function newProcessCaches(): ProcessCaches {
  return { expiryThrottle: new ExpiryThrottle(), ensuredCache: new EnsuredCache(), liveDrivers: new LiveDriverCache() };
}
