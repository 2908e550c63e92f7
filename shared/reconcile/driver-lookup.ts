import { BoundedLru } from '../bounded-lru.ts';
import type { Pod } from '../k8s-objects.ts';
import { SPARK_APP_ID_LABEL, SPARK_ROLE_DRIVER, SPARK_ROLE_LABEL } from '../labels.ts';
import { type PodIdentity, isLivePod, isPodFinished, podIdentity } from '../spark-pod.ts';
import type { ReconcileContext } from './context.ts';

export interface DriverState {
  readonly identity: PodIdentity;
  /** The driver pod as read now; undefined when it no longer exists. */
  readonly pod: Pod | undefined;
  readonly alive: boolean;
}

/** Reads the driver named by an ownerReference and says whether that very pod (same UID) still runs. */
export async function readDriver(ctx: ReconcileContext, identity: PodIdentity): Promise<DriverState> {
  const pod = await ctx.client.readPod(identity.namespace, identity.name);
  const alive = isLivePod(pod, identity);
  if (alive && pod !== undefined) ctx.liveDrivers?.remember(identity.uid, pod, ctx.now().getTime());
  else ctx.liveDrivers?.markGone(identity.uid);
  return { identity, pod, alive };
}

/**
 * Like readDriver, but a driver seen alive within the last few seconds is taken as alive without
 * asking again: when an application scales up, hundreds of executor adds name the same driver.
 * Only used where a stale "alive" is harmless (creating or keeping a Service the sweep would
 * remove); decisions to delete always read the driver afresh.
 */
export async function readDriverRecentlyAlive(ctx: ReconcileContext, identity: PodIdentity): Promise<DriverState> {
  const cache = ctx.liveDrivers;
  if (cache?.isGone(identity.uid) === true) return { identity, pod: undefined, alive: false };
  const pod = cache?.recent(identity.uid, ctx.now().getTime());
  if (pod !== undefined) return { identity, pod, alive: true };
  // Adds that arrive together (a scale-up) share one read instead of each sending its own.
  const pending = cache?.readInFlight(identity.uid);
  if (pending !== undefined) return pending;
  const read = readDriver(ctx, identity);
  cache?.trackRead(identity.uid, read);
  return read;
}

/**
 * Driver pods recently read alive, by UID; bounded, and each answer expires after ttlMs.
 * Also the UIDs seen gone: a pod UID that is deleted, replaced or finished never lives again, so
 * that answer never expires, and a read that started before the driver went cannot bring it back.
 */
export class LiveDriverCache {
  private readonly entries: BoundedLru<{ readonly pod: Pod; readonly at: number }>;
  private readonly gone: BoundedLru<true>;
  /** Reads under way, by driver UID; an entry lives only until its read settles. */
  private readonly reads = new Map<string, Promise<DriverState>>();
  private readonly ttlMs: number;

  constructor(capacity = 1024, ttlMs = 10_000) {
    this.entries = new BoundedLru(capacity);
    this.gone = new BoundedLru(capacity);
    this.ttlMs = ttlMs;
  }

  recent(uid: string, nowMs: number): Pod | undefined {
    const entry = this.entries.get(uid);
    if (entry === undefined) return undefined;
    if (nowMs - entry.at >= this.ttlMs || nowMs < entry.at) {
      this.entries.delete(uid);
      return undefined;
    }
    return entry.pod;
  }

  remember(uid: string, pod: Pod, nowMs: number): void {
    if (this.gone.get(uid) === undefined) this.entries.set(uid, { pod, at: nowMs });
  }

  markGone(uid: string): void {
    this.entries.delete(uid);
    this.gone.set(uid, true);
  }

  isGone(uid: string): boolean {
    return this.gone.get(uid) === true;
  }

  readInFlight(uid: string): Promise<DriverState> | undefined {
    return this.reads.get(uid);
  }

  trackRead(uid: string, read: Promise<DriverState>): void {
    this.reads.set(uid, read);
    const done = (): void => {
      if (this.reads.get(uid) === read) this.reads.delete(uid);
    };
    read.then(done, done);
  }

  get size(): number {
    return this.entries.size;
  }
}

/**
 * Without an ownerReference (client mode, or a pod spec written by hand) the driver is found by
 * Spark's labels. More than one live driver for one app id is ambiguous: nothing is guessed.
 */
export async function findDriverByLabels(ctx: ReconcileContext, namespace: string, appId: string): Promise<DriverState | string> {
  const selector = `${SPARK_APP_ID_LABEL}=${appId},${SPARK_ROLE_LABEL}=${SPARK_ROLE_DRIVER}`;
  const page = await ctx.client.listPods(namespace, selector, 10);
  const live = page.items.filter((pod) => !isPodFinished(pod));
  if (live.length > 1) return `${live.length} live driver pods carry ${SPARK_APP_ID_LABEL}=${appId}; refusing to guess the owner`;
  const pod = live[0];
  const identity = pod === undefined ? undefined : podIdentity(pod);
  if (pod === undefined || identity === undefined) {
    return `no live driver pod with ${SPARK_APP_ID_LABEL}=${appId} in namespace ${namespace} (client mode without a driver pod is not supported: a Service needs an owner)`;
  }
  return { identity, pod, alive: true };
}
