import { BoundedLru } from '../bounded-lru.ts';
import { isCooldownExpired } from '../cooldown.ts';
import { forEachPage } from '../kube/paging.ts';
import { appServicesSelector, isOurService } from '../service-spec.ts';
import type { ReconcileContext, ServiceOutcome } from './context.ts';
import { deleteOurs } from './delete.ts';


/**
 * Deletes the app's Services whose cool-down is over. Without a long-running controller,
 * this runs on events that touch the app and in the periodic sweep.
 */
export async function expireCooledDown(
  ctx: ReconcileContext,
  namespace: string,
  appId: string,
  alreadyHandled: readonly string[] = [],
): Promise<ServiceOutcome[]> {
  if (ctx.config.cooldownSeconds <= 0) return [];
  ctx.expiryThrottle?.noteScanned(namespace, appId, ctx.now().getTime());
  const outcomes: ServiceOutcome[] = [];
  await forEachPage(
    (token) => ctx.client.listServices(namespace, appServicesSelector(appId), ctx.config.sweepPageSize, token),
    async (services) => {
      for (const service of services) {
        if (alreadyHandled.includes(service.metadata.name) || !isOurService(service)) continue;
        if (isCooldownExpired(service, ctx.now(), ctx.config.cooldownSeconds)) outcomes.push(await deleteOurs(ctx, service, 'cool-down over'));
      }
    },
  );
  return outcomes;
}

/** On executor events, scan at most once per interval per app, so that busy apps stay cheap. */
export async function expireCooledDownThrottled(ctx: ReconcileContext, namespace: string, appId: string): Promise<ServiceOutcome[]> {
  const throttle = ctx.expiryThrottle;
  if (throttle === undefined || ctx.config.cooldownSeconds <= 0) return [];
  if (!throttle.isDue(namespace, appId, ctx.now().getTime(), ctx.config.cooldownSeconds)) return [];
  return expireCooledDown(ctx, namespace, appId);
}

/**
 * Remembers when each app was last scanned for expired Services. Bounded: the oldest entries
 * are forgotten first (a forgotten app is merely scanned again), so memory does not grow with N.
 */
export class ExpiryThrottle {
  private readonly lastScan: BoundedLru<number>;

  constructor(maxApps = 1024) {
    this.lastScan = new BoundedLru(maxApps);
  }

  /**
   * Due when a quarter of the cool-down (at most a minute) has passed since the last scan.
   * An app seen for the first time starts its clock now: nothing of it can have expired in
   * this process's view yet, and the sweep covers what happened before the process started.
   */
  isDue(namespace: string, appId: string, nowMs: number, cooldownSeconds: number): boolean {
    const last = this.lastScan.get(`${namespace}/${appId}`);
    if (last === undefined) {
      this.noteScanned(namespace, appId, nowMs);
      return false;
    }
    return nowMs - last >= Math.min(60_000, (cooldownSeconds * 1000) / 4);
  }

  noteScanned(namespace: string, appId: string, nowMs: number): void {
    this.lastScan.set(`${namespace}/${appId}`, nowMs);
  }

  get size(): number {
    return this.lastScan.size;
  }
}
