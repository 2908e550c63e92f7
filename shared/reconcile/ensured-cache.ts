/**
 * Remembers, per Service, the fingerprint of the executor state it was last ensured for, so that
 * pod updates that change nothing we use (status churn, Spark's own label updates) cost zero API
 * calls. Bounded LRU: memory does not grow with the number of executors ever seen. A Service
 * changed behind our back is repaired by the next event that misses the cache, or by the sweep,
 * which never reads the cache.
 */
export class EnsuredCache {
  private readonly entries = new Map<string, string>();
  private readonly capacity: number;

  constructor(capacity = 10_000) {
    this.capacity = capacity;
  }

  /** The fingerprint last remembered for this Service, if any. */
  lookup(key: string): string | undefined {
    const found = this.entries.get(key);
    if (found === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, found); // refresh recency
    return found;
  }

  remember(key: string, fingerprint: string): void {
    this.entries.delete(key);
    this.entries.set(key, fingerprint);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
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
