import { BoundedLru, estimateBytes } from '../ops/bounded-lru.ts';
import type { ServiceFact } from '../model/service-spec.ts';
import type { PodFact } from '../model/spark-pod.ts';

/**
 * What one function process remembers between events: facts it read and its own writes, each
 * with when it was observed — never a decision, and never that something is gone (a "gone"
 * fact must come from a read made for the decision that uses it). Losing all of it (a restart,
 * a new instance) only costs API calls. Bounded in entries and in bytes.
 */
export interface Remembered<T> {
  readonly value: T;
  readonly at: number;
}

export interface FactCacheLimits {
  readonly entries: number;
  readonly bytes: number;
}

/** 4,096 entries and 4 MiB per kind: at most 12 MiB for the three kinds together. */
export const DEFAULT_FACT_CACHE_LIMITS: FactCacheLimits = { entries: 4096, bytes: 4 * 1024 * 1024 };

/** Applications whose last look around an ended executor is remembered: a number each, keyed by namespace/app id (label values, ≤ 63 chars each). */
const ENDED_PEER_APPS = 1024;

const sized = <T>(key: string, value: Remembered<T>): number => 64 + 2 * key.length + estimateBytes(value.value);

export class FactCache {
  /** Pods seen existing, by namespace/name. */
  readonly pods: BoundedLru<Remembered<PodFact>>;
  /** Our Services as last read or written, by namespace/name. */
  readonly services: BoundedLru<Remembered<ServiceFact>>;
  /** The complete list of pods that carried a slot's labels, by namespace/app/exec. */
  readonly claimants: BoundedLru<Remembered<readonly string[]>>;
  /**
   * How many other executors of an application the last look around an ended one found ended,
   * by namespace/app, and when: only chooses how widely the next ended executor's event reads.
   */
  readonly endedPeers: BoundedLru<Remembered<number>>;
  /** How many Services of ours each namespace holds, as last counted and then kept up to date by our own writes. */
  private readonly counts = new Map<string, Remembered<number>>();
  /** Creates decided and not yet settled, by namespace: counted toward the cap by every decision meanwhile. */
  private readonly creating = new Map<string, number>();
  /** Pod reads under way, by namespace/name: concurrent events share one read (a scale-up names one driver many times). */
  readonly podReads = new Map<string, { readonly startedAt: number; readonly read: Promise<PodFact | 'absent'> }>();
  /** Counts of our Services under way, by namespace: concurrent creates share one. */
  readonly countReads = new Map<string, Promise<number>>();
  /**
   * Slots events of this process are deciding now, by namespace/app/exec, each with when those
   * events finish: a later event for the slot waits for them (and then finds their writes
   * remembered), and a claimant window leaves the slot to them, instead of racing to one create.
   */
  readonly slotsUnderWay = new Map<string, Set<Promise<void>>>();
  /** Lists of an application's executor pods under way, by namespace/app, with the exec ids each covers. */
  readonly claimantReads = new Map<string, { readonly ids: ReadonlySet<string>; readonly startedAt: number; readonly done: Promise<unknown> }>();

  constructor(limits: FactCacheLimits = DEFAULT_FACT_CACHE_LIMITS) {
    this.pods = new BoundedLru(limits.entries, limits.bytes, sized);
    this.services = new BoundedLru(limits.entries, limits.bytes, sized);
    this.claimants = new BoundedLru(limits.entries, limits.bytes, sized);
    this.endedPeers = new BoundedLru(ENDED_PEER_APPS, Number.POSITIVE_INFINITY, (key) => 64 + 2 * key.length);
  }

  serviceCount(namespace: string): Remembered<number> | undefined {
    return this.counts.get(namespace);
  }

  /** Namespaces are few (WATCH_NAMESPACES), so this map is bounded by the configuration. */
  setServiceCount(namespace: string, count: number, at: number): void {
    this.counts.set(namespace, { value: count, at });
  }

  /** Concurrent decisions each count what the others are about to create (they share one count). */
  reserveCreates(namespace: string, delta: number): void {
    const left = (this.creating.get(namespace) ?? 0) + delta;
    if (left > 0) this.creating.set(namespace, left);
    else this.creating.delete(namespace);
  }

  createsUnderWay(namespace: string): number {
    return this.creating.get(namespace) ?? 0;
  }

  adjustServiceCount(namespace: string, delta: number): void {
    const known = this.counts.get(namespace);
    if (known !== undefined) this.counts.set(namespace, { value: Math.max(0, known.value + delta), at: known.at });
  }

  stats(): { entries: number; bytes: number; evictions: number } {
    const kinds = [this.pods, this.services, this.claimants];
    return {
      entries: kinds.reduce((n, k) => n + k.size, 0),
      bytes: kinds.reduce((n, k) => n + k.bytes, 0),
      evictions: kinds.reduce((n, k) => n + k.evictions, 0),
    };
  }
}

export const podKey = (namespace: string, name: string): string => `${namespace}/${name}`;
export const appCacheKey = (namespace: string, appId: string): string => `${namespace}/${appId}`;
export const slotCacheKey = (namespace: string, appId: string, execId: string): string => `${namespace}/${appId}/${execId}`;
