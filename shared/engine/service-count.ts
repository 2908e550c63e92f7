/**
 * How many Services of ours each namespace holds, for the cap (MAX_SERVICES_PER_NAMESPACE), in
 * one place: the count as last read (by a count or a sweep's complete Services pass), kept
 * current by our own creates and deletes, the creates decided and not yet settled (counted by
 * every decision meanwhile), and the one count read concurrent decisions share. The rule that
 * refuses a create at the cap is in shared/rules/decide.ts; this only keeps the number honest.
 */
import type { Observation } from '../rules/observation.ts';
import { SingleFlight } from './single-flight.ts';

/** A counted number of our Services is trusted this long, kept current by our own creates and deletes meanwhile. */
export const COUNT_MAX_AGE_MS = 60_000;

export interface Counted {
  readonly value: number;
  /** When the count began (its epoch): our writes since then are in `value`. */
  readonly at: number;
}

export class ServiceCounts {
  /** Namespaces are few (WATCH_NAMESPACES), so these maps are bounded by the configuration. */
  private readonly counts = new Map<string, Counted>();
  private readonly creating = new Map<string, number>();
  /** Counts under way, by namespace: concurrent creates share one. */
  readonly reads = new SingleFlight<string, number>();

  get(namespace: string): Counted | undefined {
    return this.counts.get(namespace);
  }

  set(namespace: string, count: number, at: number): void {
    this.counts.set(namespace, { value: count, at });
  }

  /** Our own create (+1) or delete (−1) succeeded. */
  adjust(namespace: string, delta: number): void {
    const known = this.counts.get(namespace);
    if (known !== undefined) this.counts.set(namespace, { value: Math.max(0, known.value + delta), at: known.at });
  }

  /** Concurrent decisions each count what the others are about to create. */
  reserve(namespace: string, delta: number): void {
    const left = (this.creating.get(namespace) ?? 0) + delta;
    if (left > 0) this.creating.set(namespace, left);
    else this.creating.delete(namespace);
  }

  underWay(namespace: string): number {
    return this.creating.get(namespace) ?? 0;
  }

  /** A count remembered within COUNT_MAX_AGE_MS, as a remembered observation (enough to create, never to refuse). */
  remembered(namespace: string, now: number): { observation: Observation<number>; epoch: number } | undefined {
    const known = this.counts.get(namespace);
    if (known === undefined || now - known.at > COUNT_MAX_AGE_MS) return undefined;
    return { observation: { value: known.value, at: known.at, fresh: false, order: 0 }, epoch: known.at };
  }

  /** Counts afresh, sharing a count under way; the result includes our own creates since the count began. */
  async count(namespace: string, now: number, list: () => Promise<number>): Promise<{ value: number; epoch: number | undefined }> {
    const { entry } = this.reads.join(namespace, now, undefined, async () => {
      const count = await list();
      this.set(namespace, count, now);
      return count;
    });
    const count = await entry.result;
    const current = this.counts.get(namespace);
    return { value: Math.max(count, current?.value ?? 0), epoch: current?.at };
  }

  /**
   * The count as a decision must see it: what its view counted, our creates since (the process's
   * count of the same epoch or a newer one), and the creates other decisions are about to make.
   */
  now(namespace: string, seen: Observation<number>, epoch: number | undefined): Observation<number> {
    const known = this.counts.get(namespace);
    const counted = known !== undefined && epoch !== undefined && known.at >= epoch ? Math.max(seen.value, known.value) : seen.value;
    return { ...seen, value: counted + this.underWay(namespace) };
  }
}
