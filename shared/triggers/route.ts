/**
 * Events are hints (controller-runtime's Reconcile: "the Request won't contain that a Pod was
 * deleted"): each names what to look at — one executor slot, or one application — and the
 * decision is taken from what the API server says. What an event claims never justifies a
 * write; it only chooses which remembered facts may save a read.
 */
import type { FunctionEvent, Verb } from '../model/events.ts';
import type { Pod } from '../model/k8s-objects.ts';
import { DRIVER_POD_ANNOTATION, EXECUTOR_POD_ANNOTATION, SPARK_EXECUTOR_ID_LABEL } from '../model/labels.ts';
import { executorServiceName } from '../model/naming.ts';
import { forEachPage } from '../kube/paging.ts';
import { OUR_SERVICES_SELECTOR, type ServiceFact, appServicesSelector, serviceFact } from '../model/service-spec.ts';
import { type PodFact, notAnExecutorSlot, podFact } from '../model/spark-pod.ts';
import type { SlotKey } from '../rules/decide.ts';
import type { ReconcileContext } from '../engine/context.ts';
import { type EventResult, type ServiceOutcome, eventResult as result, ignored } from '../rules/outcome.ts';
import { appCacheKey, podKey, slotCacheKey } from '../engine/memory.ts';
import { reconcileServices, reconcileSlots } from '../engine/reconcile.ts';
import { sweep } from './sweep.ts';
import type { SweepCursor } from './sweep-cursor.ts';

/** Executor ids listed after the one an add names: Spark creates executors in batches (spark.kubernetes.allocation.batch.size). */
const CLAIMANT_WINDOW = 31;

/** Routes one parsed event to the reconciliation it needs. */
export async function reconcileEvent(ctx: ReconcileContext, event: FunctionEvent, sweepCursor?: SweepCursor): Promise<EventResult> {
  switch (event.kind) {
    case 'ignored':
      return ignored(event.reason);
    case 'sweep':
      return sweep(ctx, sweepCursor);
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
  // Executors often end together (the application's end, a decommission wave): an ended one's
  // event looks at its peers too, so that their own events find their Services marked already.
  const peers =
    goneHint && serviceAgrees && rememberedService !== undefined && rememberedService.goneAt === undefined ? endedPeerCandidates(ctx, namespace, slot) : undefined;
  // Peers' marks are decided from remembered Services: their driver is read afresh first, so that
  // an application ended by deleting its driver (GC took the Services) costs reads, not writes.
  const peerOwner = peers === undefined || rememberedService?.owner === undefined ? [] : [rememberedService.owner.name];
  const readAfresh = new Set([hint.name, ...(peers?.executors ?? []), ...peerOwner]);
  const outcomes = await reconcileSlots(ctx, {
    namespace,
    slots: [slot, ...(peers?.slots ?? [])],
    read: readNow === undefined ? undefined : { pods: [readNow] },
    remembered: {
      services: serviceAgrees,
      // The peers' executors are read afresh too: only the list of their pods can show them ended.
      pod: (name) => !readAfresh.has(name) || agrees,
      claimants: (s) => agrees && serviceAgrees && s.appId === slot.appId && s.execId === slot.execId && cachedClaimantsInclude(ctx, namespace, s, hint.name),
    },
    claimantWindow: goneHint ? 0 : CLAIMANT_WINDOW,
    shareLists: !goneHint,
    coordinate: true,
  });
  if (peers !== undefined) {
    const peerNames = new Set(peers.slots.map((s) => executorServiceName(s.appId, s.execId)));
    const ended = outcomes.filter((o) => o.action === 'marked-gone' && peerNames.has(o.service)).length;
    ctx.facts.endedPeers.set(appCacheKey(namespace, slot.appId), { value: ended, at: ctx.now().getTime() });
  }
  return result(outcomes, app, executorServiceName(slot.appId, slot.execId));
}

/** Other executors looked at with an ended one: one list of their pods, their marks written in parallel. */
const ENDED_PEERS = 31;
/** How far from the ended executor's id the peers are looked for, each way. */
const ENDED_PEER_REACH = 64n;
/** A look that found no other executor ended is not repeated for this long (dynamic allocation removes executors one by one). */
const QUIET_PEERS_MS = 10_000;

/**
 * Executors of the same application near this one whose Services this process remembers as made
 * for them and unmarked: the ones whose own "ended" events would each cost a list and a patch.
 * Nothing here is believed: they are only added to what is read and decided.
 */
function endedPeerCandidates(ctx: ReconcileContext, namespace: string, slot: SlotKey): { slots: SlotKey[]; executors: string[] } | undefined {
  const last = ctx.facts.endedPeers.peek(appCacheKey(namespace, slot.appId));
  if (last !== undefined && last.value === 0 && ctx.now().getTime() - last.at < QUIET_PEERS_MS) return undefined;
  const slots: SlotKey[] = [];
  const executors: string[] = [];
  const own = BigInt(slot.execId);
  for (let d = 1n; d <= ENDED_PEER_REACH && slots.length < ENDED_PEERS; d++) {
    for (const id of [own - d, own + d]) {
      if (id < 1n || slots.length >= ENDED_PEERS) continue;
      const execId = id.toString();
      const service = ctx.facts.services.peek(podKey(namespace, executorServiceName(slot.appId, execId)))?.value;
      if (service?.identity === undefined || service.goneAt !== undefined) continue;
      slots.push({ appId: slot.appId, execId });
      executors.push(service.identity.executor.name);
    }
  }
  return slots.length === 0 ? undefined : { slots, executors };
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
