/**
 * A Map that forgets its least recently used entries once it holds `capacity` entries or
 * `maxBytes` of estimated size: the one building block of every per-process cache here, so that
 * none grows with the number of executors or applications ever seen, nor with the size of
 * what hostile input manages to put in an entry.
 */
export class BoundedLru<V> {
  private readonly entries = new Map<string, { readonly value: V; readonly bytes: number }>();
  readonly capacity: number;
  readonly maxBytes: number;
  private readonly sizeOf: (key: string, value: V) => number;
  private totalBytes = 0;
  private evicted = 0;

  constructor(capacity: number, maxBytes = Number.POSITIVE_INFINITY, sizeOf: (key: string, value: V) => number = (key) => 2 * key.length) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    if (!(maxBytes > 0)) throw new RangeError(`maxBytes must be positive, got ${maxBytes}`);
    this.capacity = capacity;
    this.maxBytes = maxBytes;
    this.sizeOf = sizeOf;
  }

  /** The value, marked as most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** The value, leaving the order alone: for looking around without keeping what is looked at. */
  peek(key: string): V | undefined {
    return this.entries.get(key)?.value;
  }

  set(key: string, value: V): void {
    this.delete(key);
    const bytes = this.sizeOf(key, value);
    if (bytes > this.maxBytes) return; // could never fit: not kept at all
    this.entries.set(key, { value, bytes });
    this.totalBytes += bytes;
    while (this.entries.size > this.capacity || this.totalBytes > this.maxBytes) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.delete(oldest);
      this.evicted++;
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.totalBytes -= entry.bytes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Estimated bytes held (keys and values as UTF-16 strings, plus per-entry overhead). */
  get bytes(): number {
    return this.totalBytes;
  }

  /** Entries forgotten to stay within the bounds, since the cache was made. */
  get evictions(): number {
    return this.evicted;
  }
}

/** Estimated heap bytes of a plain value: UTF-16 strings, 8 bytes a number, 64 bytes an object or array. */
export function estimateBytes(value: unknown): number {
  if (typeof value === 'string') return 16 + 2 * value.length;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return 8;
  if (Array.isArray(value)) return value.reduce<number>((sum, item) => sum + 8 + estimateBytes(item), 64);
  if (typeof value === 'object') {
    let sum = 64;
    for (const [key, inner] of Object.entries(value)) sum += 8 + 2 * key.length + estimateBytes(inner);
    return sum;
  }
  return 64;
}
