import type { FunctionEvent, Verb } from '../events.ts';
import type { Pod, Service } from '../k8s-objects.ts';
import { DRIVER_POD_ANNOTATION, EXECUTOR_POD_ANNOTATION, SPARK_APP_ID_LABEL, SPARK_EXECUTOR_ID_LABEL } from '../labels.ts';
import { forEachPage } from '../kube/paging.ts';
import { OUR_SERVICES_SELECTOR, isOurService } from '../service-spec.ts';
import { classifySparkPod, isLivePod, isPodFinished } from '../spark-pod.ts';
import { type EventResult, type ServiceOutcome, headline, ignored } from './context.ts';
import type { ReconcileContext } from './context.ts';
import { driverGone } from './driver.ts';
import { ensureExecutorService, executorGone } from './executor.ts';
import { sweep } from './sweep.ts';

/** Routes one parsed event to the reconciliation it needs. */
export async function reconcileEvent(ctx: ReconcileContext, event: FunctionEvent): Promise<EventResult> {
  switch (event.kind) {
    case 'ignored':
      return ignored(event.reason);
    case 'sweep':
      return sweep(ctx);
    case 'pod':
      return reconcilePod(ctx, event.verb, event.pod);
    case 'pod-ref':
      return reconcileReference(ctx, event.verb, event.namespace, event.name);
  }
}

function isWatched(ctx: ReconcileContext, namespace: string): boolean {
  return ctx.config.namespaces.includes(namespace);
}

export async function reconcilePod(ctx: ReconcileContext, verb: Verb, pod: Pod): Promise<EventResult> {
  const namespace = pod.metadata.namespace;
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, { namespace, pod: pod.metadata.name });
  const spark = classifySparkPod(pod);
  if (spark === undefined) return ignored('not a Spark driver or executor pod', { namespace, pod: pod.metadata.name });
  const finished = verb === 'delete' || isPodFinished(pod);
  if (spark.role === 'executor') {
    if (!finished) return ensureExecutorService(ctx, spark);
    return executorGone(ctx, {
      namespace,
      appId: spark.appId,
      execId: spark.execId,
      executorPodName: pod.metadata.name,
      driver: spark.driver,
      pod,
    });
  }
  const uid = pod.metadata.uid;
  if (uid === undefined) return ignored('driver pod without uid', { namespace, pod: pod.metadata.name });
  // A driver's own add/update is not taken as proof that it lives: under shuffled delivery it may be
  // older than the driver's end. Only fresh reads fill the live-driver cache.
  if (!finished) return ignored('driver running: nothing to do', { namespace, pod: pod.metadata.name, app: spark.appId });
  return driverGone(ctx, { namespace, name: pod.metadata.name, uid }, spark.appId, verb === 'delete');
}

/**
 * Reference mode carries only the pod's namespace and name. For add/update the pod is read;
 * a 404 means it is already gone and a later delete event will follow. For delete, the pod is
 * gone, so our Services that name it (annotations) tell what it was.
 */
async function reconcileReference(ctx: ReconcileContext, verb: Verb, namespace: string, name: string): Promise<EventResult> {
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, { namespace, pod: name });
  const pod = await ctx.client.readPod(namespace, name);
  if (verb !== 'delete') {
    if (pod === undefined) return ignored('pod already gone', { namespace, pod: name });
    return reconcilePod(ctx, verb, pod);
  }
  // A pod of that name that still exists is either still terminating, or a new pod with the same name.
  if (pod !== undefined && isPodFinished(pod)) return reconcilePod(ctx, 'delete', pod);
  const related = await servicesNamingPod(ctx, namespace, name);
  if (related.length === 0) return ignored('no Service of ours refers to this pod', { namespace, pod: name });
  const results: EventResult[] = [];
  const driverHandled = new Set<string>();
  for (const service of related) {
    const appId = service.metadata.labels?.[SPARK_APP_ID_LABEL];
    const execId = service.metadata.labels?.[SPARK_EXECUTOR_ID_LABEL];
    if (appId === undefined || execId === undefined) continue;
    const owner = (service.metadata.ownerReferences ?? [])[0];
    const annotations = service.metadata.annotations ?? {};
    if (annotations[EXECUTOR_POD_ANNOTATION] === name) {
      if (pod !== undefined && pod.metadata.labels?.[SPARK_EXECUTOR_ID_LABEL] === execId && !isPodFinished(pod)) continue; // same executor, alive
      const driver = owner === undefined ? undefined : { namespace, name: owner.name, uid: owner.uid };
      results.push(await executorGone(ctx, { namespace, appId, execId, executorPodName: name, driver, pod: undefined }));
    } else if (annotations[DRIVER_POD_ANNOTATION] === name && !driverHandled.has(appId)) {
      // The uid of the deleted driver is only known from an ownerReference; without one, every Service is a stray.
      const driver = { namespace, name, uid: owner?.name === name ? owner.uid : '' };
      if (pod !== undefined && isLivePod(pod, driver)) continue;
      driverHandled.add(appId); // one driverGone covers every Service of the app
      results.push(await driverGone(ctx, driver, appId, true));
    }
  }
  const outcomes: ServiceOutcome[] = results.flatMap((r) => r.outcomes);
  return { action: headline(outcomes) ?? 'verified', namespace, pod: name, app: results[0]?.app, outcomes };
}

/** Our Services whose annotations name this pod as their executor or driver (paged list). */
async function servicesNamingPod(ctx: ReconcileContext, namespace: string, podName: string): Promise<Service[]> {
  const found: Service[] = [];
  await forEachPage(
    (token) => ctx.client.listServices(namespace, OUR_SERVICES_SELECTOR, ctx.config.sweepPageSize, token),
    (services) => {
      for (const service of services) {
        if (!isOurService(service)) continue;
        const annotations = service.metadata.annotations ?? {};
        if (annotations[EXECUTOR_POD_ANNOTATION] === podName || annotations[DRIVER_POD_ANNOTATION] === podName) found.push(service);
      }
    },
  );
  return found;
}
