import { BoundedLru, estimateBytes } from '../ops/bounded-lru.ts';
import type { ServiceFact } from '../model/service-spec.ts';
import type { PodFact } from '../model/spark-pod.ts';
import { ServiceCounts } from './service-count.ts';
import { SingleFlight } from './single-flight.ts';
import { SlotLocks } from './slot-locks.ts';

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

/**
 * The process's memory: the facts above (the rules read them), and beside them the registers of
 * work under way that events of this process share — the service count and its reservations,
 * the reads in flight, the slots being decided. Those registers hold no fact and no decision:
 * they only make concurrent events share reads and wait for each other.
 */
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
  /** How many Services of ours each namespace holds, with the creates under way (shared/engine/service-count.ts). */
  readonly counts = new ServiceCounts();
  /** Pod reads under way, by namespace/name: concurrent events share one read (a scale-up names one driver many times). */
  readonly podReads = new SingleFlight<string, PodFact | 'absent'>();
  /** Lists of an application's executor pods under way, by namespace/app, with the exec ids each covers. */
  readonly claimantReads = new SingleFlight<string, void, ReadonlySet<string>>();
  /** Slots events of this process are deciding now (shared/engine/slot-locks.ts). */
  readonly slotsUnderWay = new SlotLocks();

  constructor(limits: FactCacheLimits = DEFAULT_FACT_CACHE_LIMITS) {
    this.pods = new BoundedLru(limits.entries, limits.bytes, sized);
    this.services = new BoundedLru(limits.entries, limits.bytes, sized);
    this.claimants = new BoundedLru(limits.entries, limits.bytes, sized);
    this.endedPeers = new BoundedLru(ENDED_PEER_APPS, Number.POSITIVE_INFINITY, (key) => 64 + 2 * key.length);
  }

  /** Counts of our Services under way, by namespace. */
  get countReads(): SingleFlight<string, number> {
    return this.counts.reads;
  }

  serviceCount(namespace: string): Remembered<number> | undefined {
    return this.counts.get(namespace);
  }

  setServiceCount(namespace: string, count: number, at: number): void {
    this.counts.set(namespace, count, at);
  }

  createsUnderWay(namespace: string): number {
    return this.counts.underWay(namespace);
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
