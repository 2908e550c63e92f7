import { BoundedLru, estimateBytes, stringBytes } from '../ops/bounded-lru.ts';
import type { ServiceFact } from '../model/service-spec.ts';
import type { PodFact } from '../model/spark-pod.ts';
import { type CountRead, ServiceCounts } from './service-count.ts';
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
  /** Entries of each kind (pods, Services, claimant lists). */
  readonly entries: number;
  /** Bytes of the three kinds together (estimated as shared/ops/bounded-lru.ts estimateBytes), shared in proportion to EXECUTOR_FACT_BYTES. */
  readonly bytes: number;
}

/**
 * Bytes one executor's facts take, each kind with room for names longer than usual (measured on
 * the live heap by test/unit/fact-sizes.test.ts for names as Spark makes them, with the entry's
 * key and bookkeeping: pod ≈ 780, Service ≈ 1,440, claimant list ≈ 350 bytes; Node 22, x64).
 */
export const EXECUTOR_FACT_BYTES = { pods: 1024, services: 2048, claimants: 512 } as const;
export const PER_EXECUTOR_BYTES = EXECUTOR_FACT_BYTES.pods + EXECUTOR_FACT_BYTES.services + EXECUTOR_FACT_BYTES.claimants;
/** Bookkeeping of one remembered entry beyond its key and value (Map slot, wrappers, the key's concatenation nodes), measured with them. */
export const ENTRY_OVERHEAD_BYTES = 200;
/** The share of the container's memory the facts may take: the rest is Node itself (≈ 90 MiB idle), requests in flight and garbage. */
export const FACT_MEMORY_SHARE = 1 / 3;
/** Entries beyond one per executor the cap allows: drivers, Pending copies, executors that just ended. */
const HEADROOM = 1.25;

export const factCacheLimitsFor = (executors: number): FactCacheLimits => {
  const entries = Math.max(64, Math.ceil(executors * HEADROOM));
  return { entries, bytes: entries * PER_EXECUTOR_BYTES };
};

/** What a process remembers when nothing sizes it (tests, tools): 4,096 executors' facts, ≈ 17.5 MiB. */
export const DEFAULT_FACT_CACHE_LIMITS: FactCacheLimits = factCacheLimitsFor(4096);

export interface FactCacheSizing {
  readonly limits: FactCacheLimits;
  /** Executors whose facts the configuration allows at once: the Service cap in every watched namespace. */
  readonly wanted: number;
  /** Executors whose facts fit (fewer than wanted when the memory limit is too small: events then cost reads). */
  readonly held: number;
  /** The facts' share of the memory limit, when there is one. */
  readonly budgetBytes: number | undefined;
}

/**
 * Sized by what the memory must hold — every Service the configuration allows (the cap times the
 * watched namespaces), so that an executor's events find its facts from scale-up to teardown —
 * within the share of the container's memory limit (when known) that facts may take.
 */
export function sizeFactCache(
  config: { readonly maxServicesPerNamespace: number; readonly namespaces: readonly string[] },
  memoryLimitBytes: number | undefined,
): FactCacheSizing {
  const wanted = config.maxServicesPerNamespace * config.namespaces.length;
  const budgetBytes = memoryLimitBytes === undefined ? undefined : Math.floor(memoryLimitBytes * FACT_MEMORY_SHARE);
  const fits = budgetBytes === undefined ? wanted : Math.floor(budgetBytes / (PER_EXECUTOR_BYTES * HEADROOM));
  const held = Math.min(wanted, fits);
  return { limits: factCacheLimitsFor(held), wanted, held, budgetBytes };
}

/** Applications whose last look around an ended executor is remembered: a number each, keyed by namespace/app id (label values, ≤ 63 chars each). */
const ENDED_PEER_APPS = 1024;

const sized = <T>(key: string, value: Remembered<T>): number => ENTRY_OVERHEAD_BYTES + stringBytes(key) + estimateBytes(value.value);
const share = (limits: FactCacheLimits, kind: keyof typeof EXECUTOR_FACT_BYTES): number =>
  Math.floor((limits.bytes * EXECUTOR_FACT_BYTES[kind]) / PER_EXECUTOR_BYTES);

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
    this.pods = new BoundedLru(limits.entries, share(limits, 'pods'), sized);
    this.services = new BoundedLru(limits.entries, share(limits, 'services'), sized);
    this.claimants = new BoundedLru(limits.entries, share(limits, 'claimants'), sized);
    this.endedPeers = new BoundedLru(ENDED_PEER_APPS, Number.POSITIVE_INFINITY, (key) => ENTRY_OVERHEAD_BYTES + stringBytes(key));
  }

  /** Counts of our Services under way, by namespace. */
  get countReads(): SingleFlight<string, CountRead> {
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
