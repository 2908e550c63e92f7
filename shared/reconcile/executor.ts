import { resolveBlockManagerPort } from '../block-manager-port.ts';
import { isCooldownExpired } from '../cooldown.ts';
import type { Pod, Service } from '../k8s-objects.ts';
import { EXECUTOR_GONE_AT_ANNOTATION } from '../labels.ts';
import { executorServiceName } from '../naming.ts';
import { desiredExecutorService, executorGoneAt, isOurService, isOwnedBy, serviceDriftPatch } from '../service-spec.ts';
import { type PodIdentity, type SparkExecutor, hasOptIn } from '../spark-pod.ts';
import { type EventResult, type ServiceOutcome, headline, ignored, skipped } from './context.ts';
import type { ReconcileContext } from './context.ts';
import { type DriverState, findDriverByLabels, readDriver, readDriverRecentlyAlive } from './driver-lookup.ts';
import { deleteOurs } from './delete.ts';
import { ensuredKey } from './ensured-cache.ts';
import { expireCooledDownThrottled } from './expiry.ts';

const NOT_OPTED_IN = 'not-opted-in:';
const NOT_OPTED_IN_REASON = 'not opted in (executor and driver pod lack spark-exec-svc/enabled=true)';

/** Attempts at create-or-read when the Service disappears between our calls (a concurrent delete). */
const MAX_ENSURE_ATTEMPTS = 3;

/** An executor that runs (add/update): its Service must exist, be ours, and be right. */
export async function ensureExecutorService(ctx: ReconcileContext, executor: SparkExecutor): Promise<EventResult> {
  const { pod, appId, execId } = executor;
  const base = { namespace: pod.metadata.namespace, pod: pod.metadata.name, app: appId };
  const port = resolveBlockManagerPort(pod, ctx.config.defaultBlockManagerPort);
  if (!port.ok) return skipped(port.reason, base);

  // An update that changes nothing we use costs no API call (see EnsuredCache).
  const name = executorServiceName(appId, execId);
  const key = ensuredKey(base.namespace, name);
  const fingerprint = JSON.stringify([pod.metadata.name, executor.driver?.uid, port.port, hasOptIn(pod)]);
  const remembered = ctx.ensuredCache?.lookup(key);
  if (remembered === fingerprint) {
    return { action: 'verified', ...base, outcomes: [{ namespace: base.namespace, service: name, action: 'verified', detail: 'unchanged since last ensured' }] };
  }
  if (remembered === `${NOT_OPTED_IN}${fingerprint}`) return ignored(NOT_OPTED_IN_REASON, base);

  const driver = executor.driver !== undefined ? undefined : await findDriverByLabels(ctx, pod.metadata.namespace, appId);
  if (typeof driver === 'string') return skipped(driver, base);
  const driverIdentity = executor.driver ?? driver!.identity;
  // The owner must still run. A late or redelivered add/update for an app whose driver has finished
  // (Spark keeps completed driver pods, so garbage collection never runs) would otherwise create a
  // Service that only the sweep could remove. A deleted driver would have it collected at once.
  const driverState = driver ?? (await readDriverRecentlyAlive(ctx, driverIdentity));
  if (!driverState.alive) return ignored('driver pod is gone or finished: no Service', base);

  if (ctx.config.optInMode === 'label' && !hasOptIn(pod)) {
    const driverPod = driverState.pod;
    if (driverPod === undefined || !hasOptIn(driverPod)) {
      // Spark cannot relabel a running driver, so this answer holds for this executor.
      ctx.ensuredCache?.remember(key, `${NOT_OPTED_IN}${fingerprint}`);
      return ignored(NOT_OPTED_IN_REASON, base);
    }
  }

  const desired = desiredExecutorService({
    namespace: pod.metadata.namespace,
    appId,
    execId,
    executorPodName: pod.metadata.name,
    driver: driverIdentity,
    port: port.port,
  });

  let outcome: ServiceOutcome | undefined;
  for (let attempt = 0; attempt < MAX_ENSURE_ATTEMPTS && outcome === undefined; attempt++) {
    const created = await ctx.client.createService(desired);
    if (created.outcome === 'created') {
      outcome = { namespace: base.namespace, service: desired.metadata.name, action: 'created', detail: `port ${port.port} (${port.source})` };
      break;
    }
    const existing = await ctx.client.readService(desired.metadata.namespace, desired.metadata.name);
    if (existing === undefined) continue; // deleted between create and read: create again
    outcome = await reconcileExisting(ctx, existing, desired);
  }
  if (outcome === undefined) throw new Error(`service ${desired.metadata.name} kept disappearing while being ensured`);
  if (outcome.action === 'created' || outcome.action === 'patched' || (outcome.action === 'verified' && outcome.detail === undefined)) {
    ctx.ensuredCache?.remember(key, fingerprint);
  }
  const outcomes = [outcome, ...(await expireCooledDownThrottled(ctx, base.namespace, appId))];
  return { action: outcome.action, ...base, outcomes };
}

/**
 * A Service of that name already exists. Someone else's: leave it. Ours and already marked gone:
 * this add/update is stale (Spark never reuses an executor id), so it must not be revived.
 * Otherwise fix drift with a merge patch.
 */
async function reconcileExisting(
  ctx: ReconcileContext,
  existing: Service,
  desired: ReturnType<typeof desiredExecutorService>,
): Promise<ServiceOutcome | undefined> {
  const { namespace, name } = desired.metadata;
  if (!isOurService(existing)) {
    return { namespace, service: name, action: 'conflict', detail: 'a Service with this name exists and is not managed by spark-exec-svc; left untouched' };
  }
  if (executorGoneAt(existing) !== undefined) {
    if (isCooldownExpired(existing, ctx.now(), ctx.config.cooldownSeconds)) return deleteOurs(ctx, existing, 'cool-down over');
    return { namespace, service: name, action: 'verified', detail: 'executor already gone; stale event' };
  }
  const patch = serviceDriftPatch(existing, desired);
  if (patch === undefined) return { namespace, service: name, action: 'verified' };
  const patched = await ctx.client.patchService(namespace, name, patch);
  if (patched === undefined) return undefined; // deleted under us: the caller creates it again
  return { namespace, service: name, action: 'patched', detail: `fixed ${Object.keys(flatten(patch)).join(', ')}` };
}

/** What is known about an executor that went: from its pod (Resource mode) or from its Service (Reference mode). */
export interface GoneExecutor {
  readonly namespace: string;
  readonly appId: string;
  readonly execId: string;
  readonly executorPodName: string;
  readonly driver: PodIdentity | undefined;
  /** The last known pod, when the event carried it; needed to recreate a missing Service. */
  readonly pod: Pod | undefined;
}

/**
 * An executor went (delete, terminal phase, or being deleted). Its Service must outlive it so that
 * peers get "connection refused": verify it exists and is owned by the live driver, start its
 * cool-down, and end it only when the driver is gone or the cool-down is over.
 */
export async function executorGone(ctx: ReconcileContext, gone: GoneExecutor): Promise<EventResult> {
  const base = { namespace: gone.namespace, pod: gone.executorPodName, app: gone.appId };
  const name = executorServiceName(gone.appId, gone.execId);
  ctx.ensuredCache?.forget(ensuredKey(gone.namespace, name));
  const existing = await ctx.client.readService(gone.namespace, name);
  if (existing !== undefined && !isOurService(existing)) {
    return { action: 'conflict', ...base, outcomes: [{ namespace: gone.namespace, service: name, action: 'conflict', detail: 'not managed by spark-exec-svc; left untouched' }] };
  }

  let driver: DriverState | string;
  if (gone.driver !== undefined) driver = await readDriver(ctx, gone.driver);
  else driver = await findDriverByLabels(ctx, gone.namespace, gone.appId);

  const optedIn =
    ctx.config.optInMode === 'all' ||
    (gone.pod !== undefined && hasOptIn(gone.pod)) ||
    (typeof driver !== 'string' && driver.pod !== undefined && hasOptIn(driver.pod));
  if (existing === undefined && !optedIn) return ignored('not opted in and no Service exists', base);

  const outcomes: ServiceOutcome[] = [];
  if (typeof driver === 'string' || !driver.alive) {
    // Owner-driven cleanup: with the driver gone nothing can fetch from this executor any more.
    if (existing !== undefined) outcomes.push(await deleteOurs(ctx, existing, 'driver gone'));
    else return { action: 'verified', ...base, reason: 'driver gone and no Service left', outcomes };
  } else if (existing === undefined) {
    outcomes.push(await recreateGone(ctx, gone, driver.identity, name));
  } else if (isCooldownExpired(existing, ctx.now(), ctx.config.cooldownSeconds)) {
    outcomes.push(await deleteOurs(ctx, existing, 'cool-down over'));
  } else {
    outcomes.push(await markGone(ctx, existing, gone, driver.identity));
  }
  if (typeof driver !== 'string' && driver.alive) outcomes.push(...(await expireCooledDownThrottled(ctx, gone.namespace, gone.appId)));
  return { action: headline(outcomes) ?? 'verified', ...base, outcomes };
}

/** The Service vanished while the driver lives: create it again, already marked gone. */
async function recreateGone(ctx: ReconcileContext, gone: GoneExecutor, driver: PodIdentity, name: string, attempt = 0): Promise<ServiceOutcome> {
  const port = gone.pod === undefined ? undefined : resolveBlockManagerPort(gone.pod, ctx.config.defaultBlockManagerPort);
  const portNumber = port?.ok === true ? port.port : ctx.config.defaultBlockManagerPort;
  if (portNumber === undefined) {
    return { namespace: gone.namespace, service: name, action: 'verified', detail: 'missing, and its port is unknown: cannot recreate' };
  }
  const body = desiredExecutorService({
    namespace: gone.namespace,
    appId: gone.appId,
    execId: gone.execId,
    executorPodName: gone.executorPodName,
    driver,
    port: portNumber,
    executorGoneAt: ctx.now().toISOString(),
  });
  const created = await ctx.client.createService(body);
  if (created.outcome === 'created') {
    return { namespace: gone.namespace, service: name, action: 'recreated', detail: 'executor gone, Service was missing; cool-down started' };
  }
  // Created concurrently, typically by a late add on another instance: that copy has no cool-down mark.
  const existing = await ctx.client.readService(gone.namespace, name);
  if (existing !== undefined && !isOurService(existing)) {
    return { namespace: gone.namespace, service: name, action: 'conflict', detail: 'not managed by spark-exec-svc; left untouched' };
  }
  if (attempt + 1 >= MAX_ENSURE_ATTEMPTS) throw new Error(`service ${name} kept changing while its cool-down was being started`);
  if (existing === undefined) return recreateGone(ctx, gone, driver, name, attempt + 1);
  return markGone(ctx, existing, gone, driver, attempt + 1);
}

/** Start the cool-down (once: the first mark wins) and make sure the live driver owns the Service. */
async function markGone(ctx: ReconcileContext, existing: Service, gone: GoneExecutor, driver: PodIdentity, attempt = 0): Promise<ServiceOutcome> {
  const { namespace, name } = existing.metadata;
  const ownerFix = isOwnedBy(existing, driver) ? undefined : [{ apiVersion: 'v1', kind: 'Pod', name: driver.name, uid: driver.uid, controller: true }];
  const alreadyMarked = executorGoneAt(existing) !== undefined;
  if (alreadyMarked && ownerFix === undefined) return { namespace, service: name, action: 'verified', detail: 'cool-down already running' };
  const metadata: Record<string, unknown> = {};
  if (!alreadyMarked) metadata['annotations'] = { [EXECUTOR_GONE_AT_ANNOTATION]: ctx.now().toISOString() };
  if (ownerFix !== undefined) metadata['ownerReferences'] = ownerFix;
  const patched = await ctx.client.patchService(namespace, name, { metadata });
  if (patched === undefined) return recreateGone(ctx, gone, driver, name, attempt + 1);
  return {
    namespace,
    service: name,
    action: alreadyMarked ? 'patched' : 'marked-gone',
    detail: [alreadyMarked ? undefined : 'cool-down started', ownerFix === undefined ? undefined : 'owner set to the live driver'].filter(Boolean).join('; '),
  };
}

function flatten(value: Record<string, unknown>, prefix = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (inner !== null && typeof inner === 'object' && !Array.isArray(inner) && (prefix === '' || key === 'labels' || key === 'annotations')) {
      Object.assign(out, flatten(inner as Record<string, unknown>, path));
    } else out[path] = inner;
  }
  return out;
}
