import { BoundedLru } from '../bounded-lru.ts';

/**
 * Remembers, per Service, the fingerprint of the executor state it was last ensured for, so that
 * pod updates that change nothing we use (status churn, Spark's own label updates) cost zero API
 * calls. Bounded LRU: memory does not grow with the number of executors ever seen. A Service
 * changed behind our back is repaired by the next event that misses the cache, or by the sweep,
 * which never reads the cache.
 */
export class EnsuredCache {
  private readonly entries: BoundedLru<string>;

  constructor(capacity = 10_000) {
    this.entries = new BoundedLru(capacity);
  }

  /** The fingerprint last remembered for this Service, if any. */
  lookup(key: string): string | undefined {
    return this.entries.get(key);
  }

  remember(key: string, fingerprint: string): void {
    this.entries.set(key, fingerprint);
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}

export function ensuredKey(namespace: string, serviceName: string): string {
  return `${namespace}/${serviceName}`;
}
