/**
 * A pod event: what it names is looked at, by the plan of shared/rules/plan.ts (which remembered
 * facts may stand in, how widely to look); what it claims never justifies a write.
 */
import type { ReconcileContext } from '../engine/context.ts';
import { appCacheKey, podKey } from '../engine/memory.ts';
import { reconcileSlots } from '../engine/reconcile.ts';
import { forEachPage } from '../kube/paging.ts';
import type { Verb } from '../model/events.ts';
import type { Pod } from '../model/k8s-objects.ts';
import { DRIVER_POD_ANNOTATION, EXECUTOR_POD_ANNOTATION, SPARK_EXECUTOR_ID_LABEL } from '../model/labels.ts';
import { executorServiceName } from '../model/naming.ts';
import { OUR_SERVICES_SELECTOR, type ServiceFact, serviceFact } from '../model/service-spec.ts';
import { type PodFact, notAnExecutorSlot, podFact } from '../model/spark-pod.ts';
import type { SlotKey } from '../rules/decide.ts';
import { type EventResult, eventResult, ignored } from '../rules/outcome.ts';
import { driverOptInLook, executorEventLooks, planExecutorEvent } from '../rules/plan.ts';
import { reconcileDriverEnded } from './driver-ended.ts';
import { reconcileDriverOptedIn } from './driver-opted-in.ts';

function isWatched(ctx: ReconcileContext, namespace: string): boolean {
  return ctx.config.namespaces.includes(namespace);
}

/**
 * A pod event. `readNow` is set when the pod was just read from the API (Reference mode); in
 * Resource mode the pod is what the event claims.
 */
export async function reconcilePodEvent(ctx: ReconcileContext, verb: Verb, pod: Pod, readNow: PodFact | undefined): Promise<EventResult> {
  const namespace = pod.metadata.namespace;
  const base = { namespace, pod: pod.metadata.name };
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, base);
  const hint = readNow ?? podFact(pod, ctx.config.defaultBlockManagerPort);
  if (hint === undefined || hint.role === undefined) return ignored('not a Spark driver or executor pod', base);
  if (hint.appId === undefined) return ignored('Spark pod without an application id', base);
  const app = { ...base, app: hint.appId };
  const goneHint = verb === 'delete' || hint.terminal;
  if (hint.role === 'driver') {
    // A driver that runs needs nothing unless it just opted in; one that ended may leave Services behind (finished pods stay).
    if (!goneHint) {
      const optIn = driverOptInLook(hint, ctx.facts.pods.get(podKey(namespace, hint.name))?.value, ctx.config.optInMode);
      if (!optIn.look) return ignored(optIn.why, app);
      const outcomes = await reconcileDriverOptedIn(ctx, namespace, hint.appId);
      if (outcomes.length === 0) return ignored(`${optIn.why}: none runs`, app);
      return eventResult(outcomes, app);
    }
    return eventResult(await reconcileDriverEnded(ctx, namespace, hint.appId), app);
  }
  const notSlot = notAnExecutorSlot(hint, pod.metadata.labels?.[SPARK_EXECUTOR_ID_LABEL]);
  if (notSlot !== undefined) return ignored(notSlot, app);
  const looks = executorEventLooks(hint, goneHint);
  if (!looks.look) return ignored(looks.why, app);
  const slot: SlotKey = { appId: hint.appId, execId: hint.execId! };
  const memory = ctx.facts;
  const plan = planExecutorEvent(
    { hint, slot, goneHint, update: verb === 'update' },
    {
      pod: memory.pods.get(podKey(namespace, hint.name))?.value,
      service: memory.services.get(podKey(namespace, executorServiceName(slot.appId, slot.execId)))?.value,
      lastPeerLook: memory.endedPeers.peek(appCacheKey(namespace, slot.appId)),
      serviceOf: (execId) => memory.services.peek(podKey(namespace, executorServiceName(slot.appId, execId)))?.value,
    },
    ctx.now().getTime(),
  );
  const outcomes = await reconcileSlots(ctx, {
    namespace,
    slots: plan.slots,
    read: readNow === undefined ? undefined : { pods: [readNow] },
    look: plan.look,
  });
  if (plan.peers.length > 0) {
    // How many peers the look found ended: only chooses how widely the next ended executor's event reads.
    const peerNames = new Set(plan.peers.map((s) => executorServiceName(s.appId, s.execId)));
    const ended = outcomes.filter((o) => o.action === 'marked-gone' && peerNames.has(o.service)).length;
    memory.endedPeers.set(appCacheKey(namespace, slot.appId), { value: ended, at: ctx.now().getTime() });
  }
  return eventResult(outcomes, app, executorServiceName(slot.appId, slot.execId));
}

/**
 * Reference mode carries only the pod's namespace and name. The pod is read; if it still exists
 * this is an ordinary pod event with a fresh fact. If it is gone, our Services that name it
 * (annotations) say which slots to look at.
 */
export async function reconcileReference(ctx: ReconcileContext, verb: Verb, namespace: string, name: string): Promise<EventResult> {
  const base = { namespace, pod: name };
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, base);
  const pod = await ctx.client.readPod(namespace, name);
  const fact = pod === undefined ? undefined : podFact(pod, ctx.config.defaultBlockManagerPort);
  if (pod !== undefined && fact !== undefined) return reconcilePodEvent(ctx, verb, pod, fact);
  if (verb !== 'delete') return ignored('pod already gone', base);
  const related = await servicesNamingPod(ctx, namespace, name);
  if (related.length === 0) return ignored('no Service of ours refers to this pod', base);
  const slots = related.flatMap((service) => (service.slot === undefined ? [] : [{ slot: service.slot, service }]));
  const outcomes = await reconcileSlots(ctx, {
    namespace,
    slots: slots.map((s) => s.slot),
    read: { pods: [{ absent: name }], services: slots },
  });
  return eventResult(outcomes, { ...base, app: slots[0]?.slot.appId });
}

/** Our Services whose annotations name this pod as their executor or driver (paged list). */
async function servicesNamingPod(ctx: ReconcileContext, namespace: string, podName: string): Promise<ServiceFact[]> {
  const found: ServiceFact[] = [];
  await forEachPage(
    (token) => ctx.client.listServices(namespace, OUR_SERVICES_SELECTOR, ctx.config.sweepPageSize, token),
    (services) => {
      for (const service of services) {
        const annotations = service.metadata.annotations ?? {};
        if (annotations[EXECUTOR_POD_ANNOTATION] !== podName && annotations[DRIVER_POD_ANNOTATION] !== podName) continue;
        const fact = serviceFact(service);
        if (fact !== undefined) found.push(fact);
      }
    },
  );
  return found;
}
