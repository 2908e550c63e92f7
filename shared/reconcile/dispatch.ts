/**
 * Events are hints (controller-runtime's Reconcile: "the Request won't contain that a Pod was
 * deleted"): each names what to look at — one executor slot, or one application — and the
 * decision is taken from what the API server says. What an event claims never justifies a
 * write; it only chooses which remembered facts may save a read.
 */
import type { FunctionEvent, Verb } from '../events.ts';
import type { Pod } from '../k8s-objects.ts';
import { DRIVER_POD_ANNOTATION, EXECUTOR_POD_ANNOTATION, SPARK_EXECUTOR_ID_LABEL } from '../labels.ts';
import { executorServiceName } from '../naming.ts';
import { forEachPage } from '../kube/paging.ts';
import { OUR_SERVICES_SELECTOR, type ServiceFact, appServicesSelector, serviceFact } from '../service-spec.ts';
import { type PodFact, notAnExecutorSlot, podFact } from '../spark-pod.ts';
import type { SlotKey } from '../decide.ts';
import { type EventResult, type ServiceOutcome, headline, ignored } from './context.ts';
import type { ReconcileContext } from './context.ts';
import { podKey, slotCacheKey } from './fact-cache.ts';
import { reconcileServices, reconcileSlots } from './reconcile.ts';
import { sweep } from './sweep.ts';

/** Executor ids listed after the one an add names: Spark creates executors in batches (spark.kubernetes.allocation.batch.size). */
const CLAIMANT_WINDOW = 31;

/** Routes one parsed event to the reconciliation it needs. */
export async function reconcileEvent(ctx: ReconcileContext, event: FunctionEvent): Promise<EventResult> {
  switch (event.kind) {
    case 'ignored':
      return ignored(event.reason);
    case 'sweep':
      return sweep(ctx);
    case 'pod':
      return reconcilePodHint(ctx, event.verb, event.pod, undefined);
    case 'pod-ref':
      return reconcileReference(ctx, event.verb, event.namespace, event.name);
  }
}

function isWatched(ctx: ReconcileContext, namespace: string): boolean {
  return ctx.config.namespaces.includes(namespace);
}

/**
 * A pod event. `readNow` is set when the pod was just read from the API (Reference mode); in
 * Resource mode the pod is what the event claims.
 */
async function reconcilePodHint(ctx: ReconcileContext, verb: Verb, pod: Pod, readNow: PodFact | undefined): Promise<EventResult> {
  const namespace = pod.metadata.namespace;
  const base = { namespace, pod: pod.metadata.name };
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, base);
  const hint = readNow ?? podFact(pod, ctx.config.defaultBlockManagerPort);
  if (hint === undefined || hint.role === undefined) return ignored('not a Spark driver or executor pod', base);
  if (hint.appId === undefined) return ignored('Spark pod without an application id', base);
  const app = { ...base, app: hint.appId };
  const goneHint = verb === 'delete' || hint.terminal;
  if (hint.role === 'driver') {
    // A driver that runs needs nothing; one that ended may leave Services behind (finished pods stay).
    if (!goneHint) return ignored('driver running: nothing to do', app);
    return result(await reconcileApp(ctx, namespace, hint.appId), app);
  }
  const notSlot = notAnExecutorSlot(hint, pod.metadata.labels?.[SPARK_EXECUTOR_ID_LABEL]);
  if (notSlot !== undefined) return ignored(notSlot, app);
  const slot: SlotKey = { appId: hint.appId, execId: hint.execId! };
  const remembered = ctx.facts.pods.get(podKey(namespace, hint.name))?.value;
  // What the event says may only spare reads that could never lead to a write that hurts: for
  // an executor it says runs, remembered facts stand in as long as they agree with it; for one it
  // says went, that executor and its slot are read afresh.
  const agrees = !goneHint && remembered !== undefined && samePodFact(remembered, hint);
  // A remembered Service made for another executor than the one the event names says nothing
  // about this one (a new run reusing the app id, a copy): read the slot afresh.
  const rememberedService = ctx.facts.services.get(podKey(namespace, executorServiceName(slot.appId, slot.execId)))?.value;
  // Nor does one marked gone while the event says its executor runs: read it afresh (the mark can
  // only be wrong if something raced it, and only fresh reads can tell).
  const serviceAgrees =
    rememberedService === undefined || (rememberedService.executor?.uid === hint.uid && (goneHint || rememberedService.goneAt === undefined));
  const outcomes = await reconcileSlots(ctx, {
    namespace,
    slots: [slot],
    read: readNow === undefined ? undefined : { pods: [readNow] },
    remembered: {
      services: serviceAgrees,
      pod: (name) => name !== hint.name || agrees,
      claimants: (s) => agrees && serviceAgrees && s.appId === slot.appId && s.execId === slot.execId && cachedClaimantsInclude(ctx, namespace, s, hint.name),
    },
    claimantWindow: goneHint ? 0 : CLAIMANT_WINDOW,
  });
  return result(outcomes, app);
}

function cachedClaimantsInclude(ctx: ReconcileContext, namespace: string, slot: SlotKey, name: string): boolean {
  return ctx.facts.claimants.get(slotCacheKey(namespace, slot.appId, slot.execId))?.value.includes(name) === true;
}

/**
 * Same pod, and nothing the rules read differs: status churn, Spark's own label updates and the
 * start of a graceful deletion (a pod being deleted still runs) do not count.
 */
function samePodFact(a: PodFact, b: PodFact): boolean {
  return (
    a.uid === b.uid &&
    a.terminal === b.terminal &&
    a.appId === b.appId &&
    a.execId === b.execId &&
    a.optIn === b.optIn &&
    a.controllerPod?.name === b.controllerPod?.name &&
    a.controllerPod?.uid === b.controllerPod?.uid &&
    JSON.stringify(a.port) === JSON.stringify(b.port)
  );
}

/** Services of an application decided per page on a driver event: at most this many writes between budget checks. */
const APP_PAGE = 50;

/**
 * Every Service of one application, page by page, decided afresh (a driver ended: finished
 * drivers' Services are deleted, deleted drivers' are left to garbage collection). The work is
 * bounded per event — the sender waits for this answer before it sends the namespace's next
 * event: past half the event's budget the rest is left to the next sweep.
 */
async function reconcileApp(ctx: ReconcileContext, namespace: string, appId: string): Promise<ServiceOutcome[]> {
  const outcomes: ServiceOutcome[] = [];
  const started = Date.now();
  let token: string | undefined;
  do {
    const page = await ctx.client.listServices(namespace, appServicesSelector(appId), Math.min(APP_PAGE, ctx.config.sweepPageSize), token);
    outcomes.push(...(await reconcileServices(ctx, namespace, page.items.flatMap((s) => serviceFact(s) ?? []))));
    token = page.continueToken;
  } while (token !== undefined && Date.now() - started < ctx.config.eventDeadlineMs / 2);
  return outcomes;
}

/**
 * Reference mode carries only the pod's namespace and name. The pod is read; if it still exists
 * this is an ordinary pod event with a fresh fact. If it is gone, our Services that name it
 * (annotations) say which slots to look at.
 */
async function reconcileReference(ctx: ReconcileContext, verb: Verb, namespace: string, name: string): Promise<EventResult> {
  const base = { namespace, pod: name };
  if (!isWatched(ctx, namespace)) return ignored(`namespace ${namespace} is not watched`, base);
  const pod = await ctx.client.readPod(namespace, name);
  const fact = pod === undefined ? undefined : podFact(pod, ctx.config.defaultBlockManagerPort);
  if (pod !== undefined && fact !== undefined) return reconcilePodHint(ctx, verb, pod, fact);
  if (verb !== 'delete') return ignored('pod already gone', base);
  const related = await servicesNamingPod(ctx, namespace, name);
  if (related.length === 0) return ignored('no Service of ours refers to this pod', base);
  const slots = related.flatMap((service) => (service.slot === undefined ? [] : [{ slot: service.slot, service }]));
  const outcomes = await reconcileSlots(ctx, { namespace, slots: slots.map((s) => s.slot), read: { pods: [{ absent: name }], services: slots } });
  return result(outcomes, { ...base, app: slots[0]?.slot.appId });
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

function result(outcomes: readonly ServiceOutcome[], base: { namespace: string; pod: string; app?: string | undefined }): EventResult {
  const action = headline(outcomes) ?? 'verified';
  const reason =
    action === 'skipped' || action === 'conflict' || action === 'ignored' ? outcomes.find((o) => o.action === action)?.detail : outcomes.length === 0 ? 'no Services' : undefined;
  return { action, ...base, reason, outcomes };
}

