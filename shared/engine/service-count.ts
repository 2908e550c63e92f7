/**
 * How many Services of ours each namespace — and each application in it — holds, for the caps
 * (MAX_SERVICES_PER_NAMESPACE, MAX_SERVICES_PER_APPLICATION), in one place: the count as last
 * read (by a count or a sweep's complete Services pass), kept current by our own creates and
 * deletes, the creates decided and not yet settled (counted by every decision meanwhile), and the
 * one count read concurrent decisions share. A count read also brings the gone-marked Services it
 * saw (the oldest marks first): the ones that may give way to a live executor at a cap. The rules
 * that refuse a create at a cap, and that choose what gives way, are in shared/rules/decide.ts;
 * this only keeps the numbers honest.
 */
import type { ServiceFact } from '../model/service-spec.ts';
import { type Observation, datedAheadOfNow } from '../rules/observation.ts';
import { SingleFlight } from './single-flight.ts';

/** A counted number of our Services is trusted this long, kept current by our own creates and deletes meanwhile. */
export const COUNT_MAX_AGE_MS = 60_000;
/** Gone-marked Services a count keeps as candidates to give way (oldest marks first): each costs reads only when a create needs room. */
export const MARKED_KEPT = 64;
/** Applications' counts remembered at once (a namespace's are few: WATCH_NAMESPACES); older ones are dropped first. */
const APP_COUNTS_KEPT = 4096;

export interface Counted {
  readonly value: number;
  /** When the count began, on the dating clock (the API server's): how old it is. */
  readonly at: number;
  /**
   * When the count began on this process's monotonic clock (its epoch): our writes since then are
   * in `value`, and which of two counts is newer is judged by it — the dating clock steps back at
   * its first answer or when the API server's is set back (as shared reads, single-flight.ts).
   */
  readonly epoch: number;
}

/** What one count read found: how many, and the gone-marked ones among them (oldest first, at most MARKED_KEPT). */
export interface CountRead {
  readonly count: number;
  readonly marked: readonly ServiceFact[];
}

/** The key of an application's count beside its namespace's (a namespace name has no '/'). */
export const appCountKey = (namespace: string, appId: string): string => `${namespace}/${appId}`;

/** Keeps the `limit` oldest gone marks of a listing, as it pages (sorted only now and then: a count lists thousands). */
export class OldestMarks {
  private kept: Array<{ readonly at: number; readonly service: ServiceFact }> = [];
  private readonly limit: number;
  constructor(limit = MARKED_KEPT) {
    this.limit = limit;
  }

  offer(service: ServiceFact): void {
    const at = service.goneAt === undefined ? Number.NaN : Date.parse(service.goneAt);
    if (Number.isNaN(at)) return;
    this.kept.push({ at, service });
    if (this.kept.length >= 2 * this.limit) this.trim();
  }

  private trim(): void {
    this.kept.sort((a, b) => a.at - b.at);
    if (this.kept.length > this.limit) this.kept.length = this.limit;
  }

  get value(): readonly ServiceFact[] {
    this.trim();
    return this.kept.map((k) => k.service);
  }
}

export class ServiceCounts {
  /** By namespace, and by namespace/app (appCountKey). */
  private readonly counts = new Map<string, Counted>();
  private readonly creating = new Map<string, number>();
  /** Counts under way, by key: concurrent creates share one. */
  readonly reads = new SingleFlight<string, CountRead>();

  get(key: string): Counted | undefined {
    return this.counts.get(key);
  }

  set(key: string, count: number, at: number, epoch: number = performance.now()): void {
    this.counts.delete(key);
    this.counts.set(key, { value: count, at, epoch });
    if (this.counts.size > APP_COUNTS_KEPT) {
      // Insertion order is age order (set re-inserts): drop the oldest, which a decision would recount anyway.
      for (const old of this.counts.keys()) {
        if (this.counts.size <= APP_COUNTS_KEPT) break;
        this.counts.delete(old);
      }
    }
  }

  /** Our own create (+1) or delete (−1) succeeded. */
  adjust(key: string, delta: number): void {
    const known = this.counts.get(key);
    if (known !== undefined) this.counts.set(key, { ...known, value: Math.max(0, known.value + delta) });
  }

  /** Concurrent decisions each count what the others are about to create. */
  reserve(key: string, delta: number): void {
    const left = (this.creating.get(key) ?? 0) + delta;
    if (left > 0) this.creating.set(key, left);
    else this.creating.delete(key);
  }

  underWay(key: string): number {
    return this.creating.get(key) ?? 0;
  }

  /** A count remembered within COUNT_MAX_AGE_MS, as a remembered observation (enough to create, never to refuse). */
  remembered(key: string, now: number): { observation: Observation<number>; epoch: number } | undefined {
    const known = this.counts.get(key);
    if (known === undefined || now - known.at > COUNT_MAX_AGE_MS || datedAheadOfNow(known.at, now)) return undefined;
    return { observation: { value: known.value, at: known.at, fresh: false, order: 0 }, epoch: known.epoch };
  }

  /** Counts afresh, sharing a count under way; the result includes our own creates since the count began. */
  async count(
    key: string,
    now: number,
    list: () => Promise<CountRead>,
  ): Promise<{ value: number; epoch: number | undefined; marked: readonly ServiceFact[] }> {
    const { entry } = this.reads.join(key, now, undefined, async () => {
      const epoch = performance.now();
      const read = await list();
      this.set(key, read.count, now, epoch);
      return read;
    });
    const read = await entry.result;
    const current = this.counts.get(key);
    return { value: Math.max(read.count, current?.value ?? 0), epoch: current?.epoch, marked: read.marked };
  }

  /**
   * The count as a decision must see it: what its view counted, our creates since (the process's
   * count of the same epoch or a newer one), and the creates other decisions are about to make.
   */
  now(key: string, seen: Observation<number>, epoch: number | undefined): Observation<number> {
    const known = this.counts.get(key);
    const counted = known !== undefined && epoch !== undefined && known.epoch >= epoch ? Math.max(seen.value, known.value) : seen.value;
    return { ...seen, value: counted + this.underWay(key) };
  }
}
