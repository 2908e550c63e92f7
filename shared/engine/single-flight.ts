/**
 * One read shared by every caller that asks for the same key while it is under way (a scale-up
 * names one driver, one application's pods, one namespace's count many times at once). Each entry
 * says when its read began, so that a caller can tell whether the answer may predate what it
 * compares it with (shared/rules/observation.ts), and carries what the caller stored with it.
 */
export interface InFlight<V, M> {
  /** When it began, on the clock decisions date by (the API server's, once an answer set it). */
  readonly startedAt: number;
  /**
   * When it began on this process's monotonic clock: what "began before or after" is judged by.
   * The dating clock can step back when its first answer arrives (shared/kube/server-clock.ts),
   * so two of its readings taken across that answer do not order.
   */
  readonly begunAt: number;
  readonly result: Promise<V>;
  readonly meta: M;
}

export class SingleFlight<K, V, M = undefined> {
  private readonly flights = new Map<K, InFlight<V, M>>();

  get size(): number {
    return this.flights.size;
  }

  get(key: K): InFlight<V, M> | undefined {
    return this.flights.get(key);
  }

  /** Starts `read` under `key`; the entry leaves the register when it settles (unless replaced by a newer one meanwhile). */
  start(key: K, startedAt: number, meta: M, read: () => Promise<V>): InFlight<V, M> {
    const entry: InFlight<V, M> = { startedAt, begunAt: performance.now(), result: read(), meta };
    this.flights.set(key, entry);
    const settle = (): void => {
      if (this.flights.get(key) === entry) this.flights.delete(key);
    };
    entry.result.then(settle, settle);
    return entry;
  }

  /** The read under way for `key`, or a new one. */
  join(key: K, startedAt: number, meta: M, read: () => Promise<V>): { entry: InFlight<V, M>; shared: boolean } {
    const running = this.flights.get(key);
    return running === undefined ? { entry: this.start(key, startedAt, meta, read), shared: false } : { entry: running, shared: true };
  }
}
