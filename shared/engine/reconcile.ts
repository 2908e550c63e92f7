/**
 * The I/O around the rule book, for a batch of slots in one namespace: gather facts (what the
 * caller already read, what the process remembers where the caller allows it), let `decide`
 * choose, read what it asks for, apply what it decided with preconditions, and decide again
 * for the slots whose Service changed under us. Events, Reference-mode deletes, driver ends and
 * the sweep all come through here.
 */
import { type Action, type Facts, type Need, type Observation, type SlotFacts, type SlotKey, decide } from '../rules/decide.ts';
import { forEachPage } from '../kube/paging.ts';
import { SPARK_APP_ID_LABEL, SPARK_EXECUTOR_ID_LABEL, SPARK_ROLE_EXECUTOR, SPARK_ROLE_LABEL } from '../model/labels.ts';
import { executorServiceName } from '../model/naming.ts';
import { OUR_SERVICES_SELECTOR, type ServiceFact, appServicesSelector, serviceFact } from '../model/service-spec.ts';
import { type PodFact, podFact } from '../model/spark-pod.ts';
import type { ServiceOutcome } from '../rules/outcome.ts';
import type { ReconcileContext } from './context.ts';
import { appCacheKey, podKey, slotCacheKey } from './memory.ts';

/** Rounds of decide → read → decide per batch (a cold add takes four: its pods, its driver, the count, the create); a slot still undecided after them is a retryable failure (503). */
const MAX_ROUNDS = 10;
/** API requests one batch runs at once. */
const CONCURRENCY = 8;
/** Slot ids per list call (`spark-exec-id in (…)`), keeping the URL short. */
const IDS_PER_LIST = 100;
/** A counted number of our Services is trusted this long, kept current by our own creates and deletes meanwhile. */
const COUNT_MAX_AGE_MS = 60_000;

export interface ReconcileRequest {
  readonly namespace: string;
  readonly slots: readonly SlotKey[];
  /** Facts the caller read for this request (fresh). */
  readonly read?: {
    readonly pods?: ReadonlyArray<PodFact | { readonly absent: string }>;
    readonly services?: ReadonlyArray<{ readonly slot: SlotKey; readonly service: ServiceFact | 'absent' }>;
  };
  /**
   * Which remembered facts may stand in for reads. Events whose pod looks alive use them (a
   * wrong "runs" only keeps or creates); events that say an executor went do not, for that
   * executor and its slot.
   */
  readonly remembered?: {
    readonly pod: (name: string) => boolean;
    readonly claimants: (slot: SlotKey) => boolean;
    readonly services: boolean;
  };
  /**
   * May wait for another event's list of the same slots' pods and take its answers as remembered
   * (enough to keep or create). Events whose pod runs; never one that says its executor went.
   */
  readonly shareLists?: boolean;
  /** Pods the caller only heard of (a sweep page, perhaps from an old list snapshot): they prompt reads, never prove anything. */
  readonly hintPods?: readonly PodFact[];
  /**
   * When listing a slot's pods, list this many following exec ids too, and decide every one of
   * them that a listed pod claims: Spark creates executors in batches
   * (spark.kubernetes.allocation.batch.size), so the first add of a batch serves the whole batch.
   */
  readonly claimantWindow?: number;
  /**
   * An event's: wait for other events of this process deciding the same slots, and leave window
   * slots they are deciding to them. (The sweep and a driver's end neither wait nor hold: an
   * event must not queue behind a sweep's chunk.)
   */
  readonly coordinate?: boolean;
  /** Read every slot's Service before deciding (when most of them are expected to exist). */
  readonly readServicesFirst?: boolean;
}

export class FactsKeptChangingError extends Error {
  override readonly name = 'FactsKeptChangingError';
}

export async function reconcileSlots(ctx: ReconcileContext, request: ReconcileRequest): Promise<ServiceOutcome[]> {
  if (request.coordinate !== true) return reconcileSlotsUnderWay(ctx, request, undefined);
  const underWay = new SlotsUnderWay(ctx, request.namespace);
  try {
    await underWay.waitForOthers(request.slots);
    underWay.hold(request.slots);
    return await reconcileSlotsUnderWay(ctx, request, underWay);
  } finally {
    underWay.release();
  }
}

/**
 * One event's entry in the process-wide register of slots being decided. An event waits for the
 * others at its slots before it holds anything itself, so that no two ever wait for each other.
 */
class SlotsUnderWay {
  private readonly keys: string[] = [];
  private readonly ctx: ReconcileContext;
  private readonly namespace: string;
  private readonly finished: Promise<void>;
  private finish: () => void = () => undefined;
  constructor(ctx: ReconcileContext, namespace: string) {
    this.ctx = ctx;
    this.namespace = namespace;
    this.finished = new Promise((resolve) => (this.finish = resolve));
  }

  private key(slot: SlotKey): string {
    return slotCacheKey(this.namespace, slot.appId, slot.execId);
  }

  async waitForOthers(slots: readonly SlotKey[]): Promise<void> {
    const others = slots.flatMap((slot) => [...(this.ctx.facts.slotsUnderWay.get(this.key(slot)) ?? [])]);
    if (others.length > 0) await Promise.all(others);
  }

  hold(slots: readonly SlotKey[]): void {
    const register = this.ctx.facts.slotsUnderWay;
    for (const slot of slots) {
      const key = this.key(slot);
      let holders = register.get(key);
      if (holders === undefined) register.set(key, (holders = new Set()));
      holders.add(this.finished);
      this.keys.push(key);
    }
  }

  /** Those of `slots` no event of this process is deciding, now held by this one. */
  holdFree(slots: readonly SlotKey[]): SlotKey[] {
    const free = slots.filter((slot) => !this.ctx.facts.slotsUnderWay.has(this.key(slot)));
    this.hold(free);
    return free;
  }

  release(): void {
    const register = this.ctx.facts.slotsUnderWay;
    for (const key of this.keys.splice(0)) {
      const holders = register.get(key);
      holders?.delete(this.finished);
      if (holders?.size === 0) register.delete(key);
    }
    this.finish();
  }
}

async function reconcileSlotsUnderWay(ctx: ReconcileContext, request: ReconcileRequest, underWay: SlotsUnderWay | undefined): Promise<ServiceOutcome[]> {
  const view = new FactView(ctx, request);
  const outcomes: ServiceOutcome[] = [];
  let pending: SlotKey[] = uniqueSlots(request.slots);
  if (request.readServicesFirst === true) {
    await view.read(pending.map((slot): Need => ({ kind: 'service', slot })), []);
    // A marked Service whose recorded executor the caller's list showed running (a sweep page):
    // read that executor, or the cool-down's "the mark stands, unread" would keep a wrong mark.
    await view.read(view.markedButHintedRunning().map((name): Need => ({ kind: 'pod', name })), []);
  }
  for (let round = 0; round < MAX_ROUNDS && pending.length > 0; round++) {
    const decision = decide(view.facts(pending), ctx.config, ctx.now().getTime());
    const redo: SlotKey[] = [];
    const again: SlotKey[] = [];
    // Reserved before anything is awaited, so that a concurrent decision counts them; each create
    // drops its own reservation as it settles (into the count if it succeeded), those never sent at the end.
    const creates = decision.actions.filter((a) => a.kind === 'create').length;
    let sent = 0;
    ctx.facts.reserveCreates(request.namespace, creates);
    try {
      await inParallel(decision.actions, CONCURRENCY, async (action) => {
        if (action.kind === 'create') sent++;
        const outcome = await apply(ctx, view, action);
        if (outcome === 'redo') redo.push(action.slot);
        else if ('decideAgain' in outcome) {
          outcomes.push(outcome.outcome);
          again.push(action.slot);
        } else outcomes.push(outcome);
      });
    } finally {
      ctx.facts.reserveCreates(request.namespace, -(creates - sent));
    }
    pending = uniqueSlots([...decision.waiting, ...redo, ...again]);
    if (pending.length === 0) break;
    await view.read([...decision.needs, ...redo.map((slot): Need => ({ kind: 'service', slot }))], redo);
    // The window's slots that the list found claimed are decided with the rest, once — except
    // those another event of this process is deciding (concurrent deliveries: Broker, sweep).
    const claimed = view.takeClaimedWindowSlots();
    pending = uniqueSlots([...pending, ...(underWay === undefined ? claimed : underWay.holdFree(claimed))]);
  }
  if (pending.length > 0) {
    throw new FactsKeptChangingError(
      `${pending.length} executor slot(s) in ${request.namespace} could not be decided: their Services or pods kept changing (${pending
        .slice(0, 3)
        .map((s) => executorServiceName(s.appId, s.execId))
        .join(', ')})`,
    );
  }
  return outcomes;
}

/** Decides the slots of Services already read (fresh); what else the rules need is read. */
export async function reconcileServices(ctx: ReconcileContext, namespace: string, services: readonly ServiceFact[]): Promise<ServiceOutcome[]> {
  const slots = services.flatMap((service) => (service.slot === undefined ? [] : [{ slot: service.slot, service }]));
  if (slots.length === 0) return [];
  return reconcileSlots(ctx, { namespace, slots: slots.map((s) => s.slot), read: { services: slots } });
}

/**
 * Carries one decided action out. 'redo' = the Service was not what the decision saw: read it
 * and decide again; `decideAgain` = done, and the slot is to be decided once more (its name is free now).
 */
async function apply(ctx: ReconcileContext, view: FactView, action: Action): Promise<ServiceOutcome | 'redo' | { outcome: ServiceOutcome; decideAgain: true }> {
  const namespace = view.namespace;
  const done = (service: string, outcome: ServiceOutcome['action'], detail: string): ServiceOutcome => ({ namespace, service, action: outcome, detail });
  switch (action.kind) {
    case 'report':
      return done(action.service, action.outcome, action.why);
    case 'create': {
      let created;
      try {
        created = await ctx.client.createService(action.body);
      } finally {
        // Its reservation ends here; a success enters the count below, in the same step.
        ctx.facts.reserveCreates(namespace, -1);
      }
      if (created.outcome === 'exists') {
        view.forgetService(action.slot);
        return 'redo';
      }
      const fact = serviceFact(created.service);
      if (fact !== undefined) view.rememberService(action.slot, fact);
      ctx.facts.adjustServiceCount(namespace, +1);
      return done(action.body.metadata.name, 'created', action.why);
    }
    case 'patch': {
      const { service } = action;
      const metadata = { ...(action.patch['metadata'] as Record<string, unknown> | undefined), resourceVersion: service.resourceVersion, uid: service.uid };
      const patched = await ctx.client.patchService(namespace, service.name, { ...action.patch, metadata });
      if (patched === 'not-found' || patched === 'conflict') {
        view.forgetService(action.slot);
        return 'redo';
      }
      const fact = serviceFact(patched);
      if (fact !== undefined) view.rememberService(action.slot, fact);
      return done(service.name, action.outcome, action.why);
    }
    case 'delete': {
      const { service } = action;
      const result = await ctx.client.deleteService(namespace, service.name, service.uid, service.resourceVersion);
      view.forgetService(action.slot);
      if (result === 'precondition-failed') return 'redo';
      if (result === 'deleted') ctx.facts.adjustServiceCount(namespace, -1);
      const outcome = done(service.name, 'deleted', result === 'deleted' ? action.why : `${action.why}; already gone`);
      if (action.thenDecideAgain === true) {
        view.noteServiceAbsent(action.slot);
        return { outcome, decideAgain: true };
      }
      return outcome;
    }
  }
}

/** The facts of one request: fresh reads, plus the remembered facts the request allows. */
class FactView {
  readonly namespace: string;
  private readonly ctx: ReconcileContext;
  private readonly request: ReconcileRequest;
  private readonly pods = new Map<string, Observation<PodFact | 'absent'>>();
  private readonly services = new Map<string, Observation<ServiceFact | 'absent'>>();
  private readonly claimants = new Map<string, Observation<readonly string[]>>();
  private count: Observation<number> | undefined;
  /** When the count this view uses began (the process's count entry of that epoch). */
  private countEpoch: number | undefined;
  private windowOpened = false;
  /** Slots of a claimant window (beyond the requested ones) that a listed pod claims, not yet handed out. */
  private claimedWindowSlots: SlotKey[] = [];
  /** When the current round's reads began: a shared read started earlier is not fresh for it. */
  private roundStart = 0;
  /**
   * Orders this view's reads (Observation.order): a pod or list read gets the number of its
   * start, a Service read the number of its end, so that "began after the Service was read" is
   * a comparison. Remembered facts are 0: before everything.
   */
  private seq = 0;
  private roundSeq = 0;
  private nextOrder(): number {
    return ++this.seq;
  }

  constructor(ctx: ReconcileContext, request: ReconcileRequest) {
    this.ctx = ctx;
    this.request = request;
    this.namespace = request.namespace;
    const at = this.now();
    // The caller read its pods before its Services (Reference mode: the pod, then the Services
    // naming it); pods given only as hints (a sweep page, possibly from an old snapshot) count as
    // remembered from long ago: they may justify nothing but a read.
    for (const pod of request.read?.pods ?? []) {
      if ('absent' in pod) this.pods.set(pod.absent, { value: 'absent', at, fresh: true, order: this.nextOrder() });
      else this.notePod(pod, at, this.nextOrder());
    }
    for (const pod of request.hintPods ?? []) this.pods.set(pod.name, { value: pod, at: 0, fresh: false, order: 0 });
    for (const { slot, service } of request.read?.services ?? []) {
      this.services.set(slotKey(slot), { value: service, at, fresh: true, order: this.nextOrder() });
      if (service !== 'absent') this.cacheService(slot, service, at);
    }
  }

  private now(): number {
    return this.ctx.now().getTime();
  }

  facts(slots: readonly SlotKey[]): Facts {
    const remembered = this.request.remembered;
    const ns = this.namespace;
    const slotFacts: SlotFacts[] = slots.map((slot) => {
      const key = slotKey(slot);
      let service = this.services.get(key);
      if (service === undefined && remembered?.services === true) {
        const cached = this.ctx.facts.services.get(podKey(ns, executorServiceName(slot.appId, slot.execId)));
        if (cached !== undefined) {
          // Kept for the rest of this view, and ordered as if read now: other events refresh the
          // cache meanwhile, and a version taken later must not count as read before this view's
          // earlier lists (a "gone" read before a Service proves nothing about it). A newer version
          // than the one kept makes the write's precondition fail: then it is read afresh.
          service = { value: cached.value, at: cached.at, fresh: false, order: this.nextOrder() };
          this.services.set(key, service);
        }
      }
      let claimants = this.claimants.get(key);
      if (claimants === undefined && remembered?.claimants(slot) === true) {
        const cached = this.ctx.facts.claimants.get(slotCacheKey(ns, slot.appId, slot.execId));
        if (cached !== undefined) {
          claimants = { value: cached.value, at: cached.at, fresh: false, order: 0 };
          for (const name of cached.value) this.rememberedPod(name);
        }
      }
      return { appId: slot.appId, execId: slot.execId, service, claimants };
    });
    // Owners and recorded executors the rules will look up by name.
    for (const slot of slotFacts) {
      const service = slot.service?.value;
      if (service !== undefined && service !== 'absent') {
        if (service.owner !== undefined) this.rememberedPod(service.owner.name);
        if (typeof service.identity === 'object') this.rememberedPod(service.identity.executor.name);
      }
      for (const name of slot.claimants?.value ?? []) {
        const owner = this.pods.get(name)?.value;
        if (owner !== undefined && owner !== 'absent' && owner.controllerPod !== undefined) this.rememberedPod(owner.controllerPod.name);
      }
    }
    return { namespace: ns, pods: this.pods, slots: slotFacts, ourServiceCount: this.countNow() };
  }

  /**
   * The count as this decision must see it: what was counted, our creates since (the process's
   * count of the same epoch or a newer one), and the creates other decisions of this process are
   * about to make.
   */
  private countNow(): Observation<number> | undefined {
    if (this.count === undefined) return undefined;
    const known = this.ctx.facts.serviceCount(this.namespace);
    const counted = known !== undefined && this.countEpoch !== undefined && known.at >= this.countEpoch ? Math.max(this.count.value, known.value) : this.count.value;
    return { ...this.count, value: counted + this.ctx.facts.createsUnderWay(this.namespace) };
  }

  /** Puts a remembered pod into view when the request allows it and no read of this request knows better. */
  private rememberedPod(name: string): void {
    if (this.pods.has(name) || this.request.remembered?.pod(name) !== true) return;
    const cached = this.ctx.facts.pods.get(podKey(this.namespace, name));
    if (cached !== undefined) this.pods.set(name, { value: cached.value, at: cached.at, fresh: false, order: 0 });
  }

  /** Executors that fresh Services of this view record as gone while a hint pod shows them running. */
  markedButHintedRunning(): string[] {
    const names: string[] = [];
    for (const seen of this.services.values()) {
      const service = seen.value;
      if (!seen.fresh || service === 'absent' || service.goneAt === undefined || typeof service.identity !== 'object') continue;
      const { name, uid } = service.identity.executor;
      const hinted = this.pods.get(name);
      if (hinted !== undefined && !hinted.fresh && hinted.value !== 'absent' && hinted.value.uid === uid && !hinted.value.terminal) names.push(name);
    }
    return names;
  }

  takeClaimedWindowSlots(): SlotKey[] {
    return this.claimedWindowSlots.splice(0);
  }

  forgetService(slot: SlotKey): void {
    this.services.delete(slotKey(slot));
    this.ctx.facts.services.delete(podKey(this.namespace, executorServiceName(slot.appId, slot.execId)));
  }

  /** Our own delete just succeeded: nothing of that name is left. */
  noteServiceAbsent(slot: SlotKey): void {
    this.services.set(slotKey(slot), { value: 'absent', at: this.now(), fresh: true, order: this.nextOrder() });
  }

  rememberService(slot: SlotKey, service: ServiceFact): void {
    const at = this.now();
    this.services.set(slotKey(slot), { value: service, at, fresh: true, order: this.nextOrder() });
    this.cacheService(slot, service, at);
  }

  private cacheService(slot: SlotKey, service: ServiceFact, at: number): void {
    if (service.identity !== undefined) this.ctx.facts.services.set(podKey(this.namespace, executorServiceName(slot.appId, slot.execId)), { value: service, at });
  }

  private notePod(pod: PodFact, at: number, order: number): void {
    this.pods.set(pod.name, { value: pod, at, fresh: true, order });
    this.ctx.facts.pods.set(podKey(this.namespace, pod.name), { value: pod, at });
  }

  /** Reads what the decision needs: Services and claimants batched per application, pods one by one. */
  async read(needs: readonly Need[], forceGet: readonly SlotKey[]): Promise<void> {
    this.roundStart = this.now();
    this.roundSeq = this.nextOrder();
    const byName = new Set(forceGet.map(slotKey));
    const serviceSlots = needs.flatMap((n) => (n.kind === 'service' ? [n.slot] : []));
    const claimantSlots = needs.flatMap((n) => (n.kind === 'claimants' ? [n.slot] : []));
    const podNames = [...new Set(needs.flatMap((n) => (n.kind === 'pod' ? [n.name] : [])))];
    const tasks: Array<() => Promise<void>> = [];
    for (const [appId, slots] of groupByApp(serviceSlots)) {
      const listed = slots.filter((s) => !byName.has(slotKey(s)));
      if (listed.length > 2) {
        for (const chunk of chunks(listed, IDS_PER_LIST)) tasks.push(() => this.listServices(appId, chunk));
        for (const slot of slots.filter((s) => byName.has(slotKey(s)))) tasks.push(() => this.getService(slot));
      } else for (const slot of slots) tasks.push(() => this.getService(slot));
    }
    for (const [appId, slots] of groupByApp(claimantSlots)) {
      for (const chunk of chunks(slots, IDS_PER_LIST)) tasks.push(() => this.listClaimants(appId, chunk));
    }
    for (const name of podNames) tasks.push(() => this.getPod(name));
    if (needs.some((n) => n.kind === 'service-count')) tasks.push(() => this.countServices());
    await inParallel(tasks, CONCURRENCY, (task) => task());
  }

  private async getService(slot: SlotKey): Promise<void> {
    const name = executorServiceName(slot.appId, slot.execId);
    const read = await this.ctx.client.readService(this.namespace, name);
    const fact = read === undefined ? undefined : serviceFact(read);
    const at = this.now();
    this.services.set(slotKey(slot), { value: fact ?? 'absent', at, fresh: true, order: this.nextOrder() });
    if (fact !== undefined) this.cacheService(slot, fact, at);
    else this.ctx.facts.services.delete(podKey(this.namespace, name));
  }

  private async listServices(appId: string, slots: readonly SlotKey[]): Promise<void> {
    const found = new Map<string, ServiceFact>();
    await forEachPage(
      (token) => this.ctx.client.listServices(this.namespace, appServicesSelector(appId, slots.map((s) => s.execId)), this.ctx.config.sweepPageSize, token),
      (items) => {
        for (const item of items) {
          const fact = serviceFact(item);
          if (fact !== undefined) found.set(fact.name, fact);
        }
      },
    );
    const at = this.now();
    for (const slot of slots) {
      // The list finds Services by our labels only; one of this name without them is seen on create (409) and then read by name.
      const fact = found.get(executorServiceName(slot.appId, slot.execId));
      this.services.set(slotKey(slot), { value: fact ?? 'absent', at, fresh: true, order: this.nextOrder() });
      if (fact !== undefined) this.cacheService(slot, fact, at);
    }
  }

  /** One list of every executor pod of the app with these ids (and the window after them): complete for each id. */
  private async listClaimants(appId: string, slots: readonly SlotKey[]): Promise<void> {
    // Adds that arrive together (a scale-up) wait for one list that covers them; its answers
    // count as remembered (they may predate this round), which is enough to create.
    const readKey = appCacheKey(this.namespace, appId);
    const shared = this.ctx.facts.claimantReads.get(readKey);
    // An event that says an executor ended lists its slots itself: a list begun earlier may predate the end.
    if (shared !== undefined && this.request.shareLists === true && slots.every((s) => shared.ids.has(s.execId))) {
      await shared.done.catch(() => undefined);
      const remaining = slots.filter((slot) => {
        const cached = this.ctx.facts.claimants.get(slotCacheKey(this.namespace, slot.appId, slot.execId));
        if (cached === undefined) return true;
        this.claimants.set(slotKey(slot), { value: cached.value, at: shared.startedAt, fresh: false, order: 0 });
        for (const name of cached.value) {
          const pod = this.ctx.facts.pods.get(podKey(this.namespace, name));
          if (pod !== undefined && !this.pods.has(name)) this.pods.set(name, { value: pod.value, at: shared.startedAt, fresh: false, order: 0 });
        }
        return false;
      });
      if (remaining.length === 0) return;
      slots = remaining;
    }
    const ids = new Set(slots.map((s) => s.execId));
    const requested = new Set(ids);
    // The window once per view: a slot listed again (its Service read after the first list) does
    // not open another window, which would chain list after list across an application.
    const window = this.windowOpened ? 0 : (this.request.claimantWindow ?? 0);
    if (window > 0 && slots.length === 1) {
      this.windowOpened = true;
      const first = BigInt(slots[0]!.execId);
      for (let i = 1n; i <= BigInt(window); i++) ids.add((first + i).toString());
    }
    const entry = { ids, startedAt: this.now(), done: this.listClaimantIds(appId, ids, requested) };
    this.ctx.facts.claimantReads.set(readKey, entry);
    try {
      await entry.done;
    } finally {
      if (this.ctx.facts.claimantReads.get(readKey) === entry) this.ctx.facts.claimantReads.delete(readKey);
    }
  }

  private async listClaimantIds(appId: string, ids: ReadonlySet<string>, requested: ReadonlySet<string>): Promise<void> {
    const selector = `${SPARK_APP_ID_LABEL}=${appId},${SPARK_ROLE_LABEL}=${SPARK_ROLE_EXECUTOR},${SPARK_EXECUTOR_ID_LABEL} in (${[...ids].join(',')})`;
    const byExec = new Map<string, string[]>([...ids].map((id) => [id, []]));
    const order = this.nextOrder();
    // What a list shows held at some moment after it began: that moment is all it proves.
    const at = this.now();
    await forEachPage(
      (token) => this.ctx.client.listPods(this.namespace, selector, this.ctx.config.sweepPageSize, token),
      (items) => {
        for (const item of items) {
          const fact = podFact(item, this.ctx.config.defaultBlockManagerPort);
          if (fact?.execId === undefined) continue;
          this.notePod(fact, at, order);
          byExec.get(fact.execId)?.push(fact.name);
        }
      },
    );
    for (const [execId, names] of byExec) {
      this.claimants.set(slotKey({ appId, execId }), { value: names, at, fresh: true, order });
      // An empty list is a negative fact: never remembered.
      if (names.length > 0) this.ctx.facts.claimants.set(slotCacheKey(this.namespace, appId, execId), { value: names, at });
      else this.ctx.facts.claimants.delete(slotCacheKey(this.namespace, appId, execId));
      if (names.length > 0 && !requested.has(execId)) this.claimedWindowSlots.push({ appId, execId });
    }
  }

  private async getPod(name: string): Promise<void> {
    // Concurrent events share one read of a pod (a scale-up names one driver many times). A read
    // that began before this round may predate the facts it would be compared with, so its
    // answer counts as remembered, not fresh: good for "runs", never for "gone".
    const key = podKey(this.namespace, name);
    const shared = this.ctx.facts.podReads.get(key);
    let read = shared;
    // Our own read is ordered at its start; a shared one that began in this round at the round's
    // start (before anything read in this round, so never after a Service read alongside it).
    let order = this.roundSeq;
    if (read === undefined) {
      order = this.nextOrder();
      const entry = {
        startedAt: this.now(),
        read: this.ctx.client.readPod(this.namespace, name).then((pod) => (pod === undefined ? 'absent' : (podFact(pod, this.ctx.config.defaultBlockManagerPort) ?? 'absent'))),
      };
      this.ctx.facts.podReads.set(key, entry);
      const settle = (): void => {
        if (this.ctx.facts.podReads.get(key) === entry) this.ctx.facts.podReads.delete(key);
      };
      entry.read.then(settle, settle);
      read = entry;
    }
    const value = await read.read;
    const fresh = read === shared ? read.startedAt > this.roundStart : true;
    // A read shows what held at some moment after it began.
    const at = read.startedAt;
    if (value === 'absent') {
      this.pods.set(name, { value, at, fresh, order: fresh ? order : 0 });
      if (fresh) this.ctx.facts.pods.delete(key);
    } else {
      this.pods.set(name, { value, at, fresh, order: fresh ? order : 0 });
      this.ctx.facts.pods.set(key, { value, at });
    }
  }

  /**
   * A count remembered for up to a minute (kept current by our own creates and deletes) unless the
   * decision asks again: it does when the remembered count says the cap is reached, because
   * garbage collection and other instances change the count without telling this process.
   */
  private async countServices(): Promise<void> {
    const known = this.ctx.facts.serviceCount(this.namespace);
    if (this.count === undefined && known !== undefined && this.now() - known.at <= COUNT_MAX_AGE_MS) {
      this.count = { value: known.value, at: known.at, fresh: false, order: 0 };
      this.countEpoch = known.at;
      return;
    }
    let counting = this.ctx.facts.countReads.get(this.namespace);
    if (counting === undefined) {
      const started = this.now();
      counting = (async () => {
        let count = 0;
        await forEachPage(
          (token) => this.ctx.client.listServices(this.namespace, OUR_SERVICES_SELECTOR, this.ctx.config.sweepPageSize, token),
          (items) => {
            count += items.length;
          },
        );
        this.ctx.facts.setServiceCount(this.namespace, count, started);
        return count;
      })();
      this.ctx.facts.countReads.set(this.namespace, counting);
      const settle = (): void => {
        this.ctx.facts.countReads.delete(this.namespace);
      };
      counting.then(settle, settle);
    }
    const count = await counting;
    // Our own creates since the count began are added to it as they happen (adjustServiceCount).
    const current = this.ctx.facts.serviceCount(this.namespace);
    this.count = { value: Math.max(count, current?.value ?? 0), at: this.now(), fresh: true, order: this.nextOrder() };
    this.countEpoch = current?.at;
  }
}

const slotKey = (slot: SlotKey): string => `${slot.appId}\u0000${slot.execId}`;

function uniqueSlots(slots: readonly SlotKey[]): SlotKey[] {
  const seen = new Map<string, SlotKey>();
  for (const slot of slots) seen.set(slotKey(slot), { appId: slot.appId, execId: slot.execId });
  return [...seen.values()];
}

function groupByApp(slots: readonly SlotKey[]): Map<string, SlotKey[]> {
  const groups = new Map<string, SlotKey[]>();
  for (const slot of uniqueSlots(slots)) groups.set(slot.appId, [...(groups.get(slot.appId) ?? []), slot]);
  return groups;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Runs `work` over `items` with at most `limit` at once. The first failure fails the whole, once
 * the work already started has settled (nothing of an answered event is left running) and
 * without starting more.
 */
export async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && failure === undefined) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
}
