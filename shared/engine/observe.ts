/**
 * The facts of one request (what FactView is): fresh reads, plus the remembered facts the
 * request's plan trusts, each stamped with when it was observed and where its read stands
 * (shared/rules/observation.ts). It carries out the rule book's needs: Services and claimant
 * lists batched per application, pods one by one, the count once; reads shared with other events
 * through the process's single-flight registers. It decides nothing.
 */
import { forEachPage } from '../kube/paging.ts';
import {
  EXECUTOR_GONE_AT_ANNOTATION,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
  SPARK_ROLE_EXECUTOR,
  SPARK_ROLE_LABEL,
} from '../model/labels.ts';
import { executorServiceName } from '../model/naming.ts';
import { OUR_SERVICES_SELECTOR, type ServiceFact, appServicesSelector, serviceFact } from '../model/service-spec.ts';
import { type PodFact, podFact } from '../model/spark-pod.ts';
import type { Facts, Need, SlotFacts, SlotKey } from '../rules/decide.ts';
import { type Observation, ReadOrder, remembered, sharedReadIsFresh } from '../rules/observation.ts';
import { LOOK_AFRESH, type Look, claimantWindowSlots, markedButHintedRunning, rememberedPodStandsIn } from '../rules/plan.ts';
import type { ReconcileContext } from './context.ts';
import { type CountRead, OldestMarks, appCountKey } from './service-count.ts';
import { appCacheKey, podKey, slotCacheKey } from './memory.ts';
import { chunks, groupByApp, inParallel, slotKey } from './batching.ts';
import type { ReconcileRequest } from './request.ts';

/** API requests one batch runs at once. */
export const CONCURRENCY = 8;
/** Slot ids per list call (`spark-exec-id in (…)`), keeping the URL short. */
const IDS_PER_LIST = 100;
/** More Services of one application than this are listed by label, fewer read by name. */
const GET_AT_MOST = 2;

export class FactView {
  readonly namespace: string;
  private readonly ctx: ReconcileContext;
  private readonly look: Look;
  private readonly pods = new Map<string, Observation<PodFact | 'absent'>>();
  private readonly services = new Map<string, Observation<ServiceFact | 'absent'>>();
  private readonly claimants = new Map<string, Observation<readonly string[]>>();
  private count: Observation<number> | undefined;
  /** When the count this view uses began (the process's count entry of that epoch). */
  private countEpoch: number | undefined;
  /** Applications' counts this view uses, by app id, with their epochs. */
  private readonly appCounts = new Map<string, { observation: Observation<number>; epoch: number | undefined }>();
  /** Gone-marked Services the counts read for this view listed, by slot: what may give way at a cap. */
  private readonly marked = new Map<string, { slot: SlotKey; seen: Observation<ServiceFact> }>();
  private windowOpened = false;
  /** Slots of a claimant window (beyond the requested ones) that a listed pod claims, not yet handed out. */
  private claimedWindowSlots: SlotKey[] = [];
  private readonly order = new ReadOrder();

  constructor(ctx: ReconcileContext, request: ReconcileRequest) {
    this.ctx = ctx;
    this.look = request.look ?? LOOK_AFRESH;
    this.namespace = request.namespace;
    const at = this.now();
    // The caller read its pods before its Services (Reference mode: the pod, then the Services
    // naming it); pods given only as hints (a sweep page, possibly from an old snapshot) count as
    // remembered from long ago: they may justify nothing but a read.
    for (const pod of request.read?.pods ?? []) {
      if ('absent' in pod) this.pods.set(pod.absent, { value: 'absent', at, fresh: true, order: this.order.next() });
      else this.notePod(pod, at, this.order.next());
    }
    for (const pod of request.hintPods ?? []) this.pods.set(pod.name, remembered(pod, 0));
    for (const { slot, service } of request.read?.services ?? []) {
      this.services.set(slotKey(slot), { value: service, at, fresh: true, order: this.order.next() });
      if (service !== 'absent') this.cacheService(slot, service, at);
    }
  }

  private now(): number {
    return this.ctx.now().getTime();
  }

  private serviceKey(slot: SlotKey): string {
    return podKey(this.namespace, executorServiceName(slot.appId, slot.execId));
  }

  facts(slots: readonly SlotKey[]): Facts {
    const { trust } = this.look;
    const slotFacts: SlotFacts[] = slots.map((slot) => {
      const key = slotKey(slot);
      let service = this.services.get(key);
      if (service === undefined && trust.services) {
        const cached = this.ctx.facts.services.get(this.serviceKey(slot));
        if (cached !== undefined) {
          // Kept for the rest of this view, and ordered as if read now: other events refresh the
          // cache meanwhile, and a version taken later must not count as read before this view's
          // earlier lists (a "gone" read before a Service proves nothing about it). A newer version
          // than the one kept makes the write's precondition fail: then it is read afresh.
          service = { value: cached.value, at: cached.at, fresh: false, order: this.order.next() };
          this.services.set(key, service);
        }
      }
      let claimants = this.claimants.get(key);
      const trusted =
        claimants === undefined ? trust.claimantsOf.find((t) => t.slot.appId === slot.appId && t.slot.execId === slot.execId) : undefined;
      if (trusted !== undefined) {
        const cached = this.ctx.facts.claimants.get(slotCacheKey(this.namespace, slot.appId, slot.execId));
        if (cached?.value.includes(trusted.naming)) {
          claimants = remembered(cached.value, cached.at);
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
    const counts = this.ctx.facts.counts;
    const count = this.count === undefined ? undefined : counts.now(this.namespace, this.count, this.countEpoch);
    const appServiceCounts = new Map<string, Observation<number>>();
    for (const [appId, c] of this.appCounts)
      appServiceCounts.set(appId, counts.now(appCountKey(this.namespace, appId), c.observation, c.epoch));
    return {
      namespace: this.namespace,
      pods: this.pods,
      slots: slotFacts,
      ourServiceCount: count,
      appServiceCounts,
      markedServices: this.markedServices(),
    };
  }

  /** The marked Services listed, as this view knows them now (one it wrote or read since counts as it is now), oldest mark first. */
  private markedServices(): SlotFacts[] {
    const candidates: SlotFacts[] = [];
    for (const [key, { slot, seen }] of this.marked) {
      // The view's own version only when read or written after the count listed it: a window list
      // sent with a claimant list (listClaimants) may be older than the count, and take back a mark.
      const mine = this.services.get(key);
      const service = mine !== undefined && mine.order > seen.order ? mine : seen;
      if (service.value === 'absent' || service.value.goneAt === undefined || service.value.uid !== seen.value.uid) continue;
      candidates.push({ appId: slot.appId, execId: slot.execId, service, claimants: this.claimants.get(key) });
      if (service.value.owner !== undefined) this.rememberedPod(service.value.owner.name);
      if (typeof service.value.identity === 'object') this.rememberedPod(service.value.identity.executor.name);
    }
    const markedAt = (s: SlotFacts): number => Date.parse((s.service!.value as ServiceFact).goneAt!);
    return candidates.sort((a, b) => markedAt(a) - markedAt(b));
  }

  /** Puts a remembered pod into view when the plan trusts it and no read of this request knows better. */
  private rememberedPod(name: string, at?: number): void {
    if (this.pods.has(name)) return;
    const cached = this.ctx.facts.pods.get(podKey(this.namespace, name));
    if (cached !== undefined && rememberedPodStandsIn(this.look.trust, name, cached.value))
      this.pods.set(name, remembered(cached.value, at ?? cached.at));
  }

  /** Executors to read before deciding a sweep page (shared/rules/plan.ts). */
  markedButHintedRunning(): string[] {
    return markedButHintedRunning(this.services.values(), this.pods);
  }

  /** Slots a listed pod claims whose Service this view has not read and the process does not remember. */
  claimedUnknownServices(slots: readonly SlotKey[]): SlotKey[] {
    return slots.filter(
      (slot) =>
        (this.claimants.get(slotKey(slot))?.value.length ?? 0) > 0 && !this.services.has(slotKey(slot)) && !this.remembersService(slot),
    );
  }

  private remembersService(slot: SlotKey): boolean {
    return this.ctx.facts.services.peek(this.serviceKey(slot)) !== undefined;
  }

  takeClaimedWindowSlots(): SlotKey[] {
    return this.claimedWindowSlots.splice(0);
  }

  // ---- own writes (apply.ts): what this process wrote is what it remembers

  forgetService(slot: SlotKey): void {
    this.services.delete(slotKey(slot));
    this.marked.delete(slotKey(slot));
    this.ctx.facts.services.delete(this.serviceKey(slot));
  }

  /** Our own delete of the slot's Service succeeded: the counts this view uses hold one fewer. */
  noteServiceDeleted(slot: SlotKey): void {
    if (this.count !== undefined) this.count = { ...this.count, value: Math.max(0, this.count.value - 1) };
    const app = this.appCounts.get(slot.appId);
    if (app !== undefined)
      this.appCounts.set(slot.appId, { ...app, observation: { ...app.observation, value: Math.max(0, app.observation.value - 1) } });
  }

  /** Our own delete just succeeded: nothing of that name is left. */
  noteServiceAbsent(slot: SlotKey): void {
    this.services.set(slotKey(slot), { value: 'absent', at: this.now(), fresh: true, order: this.order.next() });
  }

  rememberService(slot: SlotKey, service: ServiceFact): void {
    const at = this.now();
    this.services.set(slotKey(slot), { value: service, at, fresh: true, order: this.order.next() });
    this.cacheService(slot, service, at);
  }

  private cacheService(slot: SlotKey, service: ServiceFact, at: number): void {
    if (service.identity !== undefined) this.ctx.facts.services.set(this.serviceKey(slot), { value: service, at });
  }

  private notePod(pod: PodFact, at: number, order: number): void {
    this.pods.set(pod.name, { value: pod, at, fresh: true, order });
    this.ctx.facts.pods.set(podKey(this.namespace, pod.name), { value: pod, at });
  }

  // ---- reads

  /** Reads what the decision needs: Services and claimants batched per application, pods one by one. */
  async read(needs: readonly Need[], forceGet: readonly SlotKey[]): Promise<void> {
    // Ordered on the monotonic clock, as shared reads are (single-flight.ts begunAt).
    this.order.beginRound(performance.now());
    const byName = new Set(forceGet.map(slotKey));
    const serviceSlots = needs.flatMap((n) => (n.kind === 'service' ? [n.slot] : []));
    const claimantSlots = needs.flatMap((n) => (n.kind === 'claimants' ? [n.slot] : []));
    const podNames = [...new Set(needs.flatMap((n) => (n.kind === 'pod' ? [n.name] : [])))];
    const tasks: Array<() => Promise<void>> = [];
    for (const [appId, slots] of groupByApp(serviceSlots)) {
      const listed = slots.filter((s) => !byName.has(slotKey(s)));
      if (listed.length > GET_AT_MOST) {
        for (const chunk of chunks(listed, IDS_PER_LIST)) tasks.push(() => this.listServices(appId, chunk));
        for (const slot of slots.filter((s) => byName.has(slotKey(s)))) tasks.push(() => this.getService(slot));
      } else for (const slot of slots) tasks.push(() => this.getService(slot));
    }
    for (const [appId, slots] of groupByApp(claimantSlots)) {
      for (const chunk of chunks(slots, IDS_PER_LIST)) tasks.push(() => this.listClaimants(appId, chunk));
    }
    for (const name of podNames) tasks.push(() => this.getPod(name));
    if (needs.some((n) => n.kind === 'service-count')) tasks.push(() => this.countServices());
    for (const appId of new Set(needs.flatMap((n) => (n.kind === 'app-service-count' ? [n.appId] : []))))
      tasks.push(() => this.countAppServices(appId));
    await inParallel(tasks, CONCURRENCY, (task) => task());
  }

  private async getService(slot: SlotKey): Promise<void> {
    const name = executorServiceName(slot.appId, slot.execId);
    const read = await this.ctx.client.readService(this.namespace, name);
    const fact = read === undefined ? undefined : serviceFact(read);
    const at = this.now();
    this.services.set(slotKey(slot), { value: fact ?? 'absent', at, fresh: true, order: this.order.next() });
    if (fact !== undefined) this.cacheService(slot, fact, at);
    else this.ctx.facts.services.delete(podKey(this.namespace, name));
  }

  private async listServices(appId: string, slots: readonly SlotKey[]): Promise<void> {
    const found = new Map<string, ServiceFact>();
    await forEachPage(
      (token) =>
        this.ctx.client.listServices(
          this.namespace,
          appServicesSelector(
            appId,
            slots.map((s) => s.execId),
          ),
          this.ctx.config.sweepPageSize,
          token,
        ),
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
      this.services.set(slotKey(slot), { value: fact ?? 'absent', at, fresh: true, order: this.order.next() });
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
    if (shared !== undefined && this.look.shareLists && slots.every((s) => shared.meta.has(s.execId))) {
      await shared.result.catch(() => undefined);
      const hint = this.look.trust.hint;
      const remaining = slots.filter((slot) => {
        const cached = this.ctx.facts.claimants.get(slotCacheKey(this.namespace, slot.appId, slot.execId));
        if (cached === undefined) return true;
        // A list begun before the event's executor existed does not name it: listed again.
        if (hint !== undefined && slotKey(hint.slot) === slotKey(slot) && !cached.value.includes(hint.pod.name)) return true;
        // Dated as the list that wrote it was answered (answeredAt), not by the shared read's start:
        // begun before the clock's first answer, that start may be on a clock ahead of the server's.
        this.claimants.set(slotKey(slot), remembered(cached.value, cached.at));
        for (const name of cached.value) this.rememberedPod(name, cached.at);
        return false;
      });
      if (remaining.length === 0) return;
      slots = remaining;
    }
    const ids = new Set(slots.map((s) => s.execId));
    const requested = new Set(ids);
    // The window once per view: a slot listed again (its Service read after the first list) does
    // not open another window, which would chain list after list across an application.
    const window = this.windowOpened ? 0 : this.look.claimantWindow;
    let servicesToo = false;
    if (window > 0 && slots.length === 1) {
      this.windowOpened = true;
      for (const slot of claimantWindowSlots(slots[0]!, window)) ids.add(slot.execId);
      // An update that misses its Service reads the Services of the slots the list finds claimed
      // before it decides (plan.ts readClaimedServices). A list of them by exec id needs no pod:
      // it goes with the claimant list — the same one call, one round trip fewer per batch
      // (issue 18: the scale-up's second list at each batch's first running update).
      servicesToo = this.look.readClaimedServices === true && !this.services.has(slotKey(slots[0]!)) && !this.remembersService(slots[0]!);
    }
    const listing = this.ctx.facts.claimantReads.start(readKey, this.now(), ids, () => this.listClaimantIds(appId, ids, requested)).result;
    const windowSlots = [...ids].map((execId): SlotKey => ({ appId, execId }));
    await Promise.all([listing, servicesToo ? this.listServices(appId, windowSlots) : undefined]);
  }

  private async listClaimantIds(appId: string, ids: ReadonlySet<string>, requested: ReadonlySet<string>): Promise<void> {
    const selector = `${SPARK_APP_ID_LABEL}=${appId},${SPARK_ROLE_LABEL}=${SPARK_ROLE_EXECUTOR},${SPARK_EXECUTOR_ID_LABEL} in (${[...ids].join(',')})`;
    const byExec = new Map<string, string[]>([...ids].map((id) => [id, []]));
    const order = this.order.next();
    // What a list shows held at some moment after it began: that moment is all it proves.
    const startedAt = this.now();
    let complete = true;
    const listed: PodFact[] = [];
    await forEachPage(
      (token) => this.ctx.client.listPods(this.namespace, selector, this.ctx.config.sweepPageSize, token),
      (items, page) => {
        // An item it could not read may be any of these slots' pods: such a list proves nothing absent.
        if (page.skipped.length > 0) complete = false;
        for (const item of items) {
          const fact = podFact(item, this.ctx.config.defaultBlockManagerPort);
          if (fact?.execId === undefined) continue;
          listed.push(fact);
          byExec.get(fact.execId)?.push(fact.name);
        }
      },
    );
    const at = answeredAt(startedAt, this.now());
    for (const fact of listed) this.notePod(fact, at, order);
    for (const [execId, names] of byExec) {
      this.claimants.set(slotKey({ appId, execId }), complete ? { value: names, at, fresh: true, order } : remembered(names, at));
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
    const read = (): Promise<PodFact | 'absent'> =>
      this.ctx.client
        .readPod(this.namespace, name)
        .then((pod) => (pod === undefined ? 'absent' : (podFact(pod, this.ctx.config.defaultBlockManagerPort) ?? 'absent')));
    const shared = this.ctx.facts.podReads.get(key);
    // Our own read is ordered at its start; a shared one at the round's start.
    let order = shared === undefined ? this.order.next() : this.order.roundStamp;
    let entry = this.ctx.facts.podReads.join(key, this.now(), undefined, read).entry;
    let value = await entry.result;
    let fresh = shared === undefined || sharedReadIsFresh(entry.begunAt, this.order.roundStart);
    if (!fresh && !rememberedPodStandsIn(this.look.trust, name, value)) {
      // An earlier read that says otherwise than this event about its own pod: read it ourselves.
      order = this.order.next();
      entry = this.ctx.facts.podReads.start(key, this.now(), undefined, read);
      value = await entry.result;
      fresh = true;
    }
    // A read shows what held at some moment after it began.
    const at = answeredAt(entry.startedAt, this.now());
    this.pods.set(name, { value, at, fresh, order: fresh ? order : 0 });
    if (value !== 'absent') this.ctx.facts.pods.set(key, { value, at });
    else if (fresh) this.ctx.facts.pods.delete(key);
  }

  /**
   * A count remembered for up to a minute (kept current by our own creates and deletes) unless the
   * decision asks again: it does when the remembered count says the cap is reached, because
   * garbage collection and other instances change the count without telling this process.
   */
  private async countServices(): Promise<void> {
    const counted = await this.countOurs(this.namespace, OUR_SERVICES_SELECTOR, this.count === undefined);
    this.count = counted.observation;
    this.countEpoch = counted.epoch;
  }

  /** An application's Services of ours (MAX_SERVICES_PER_APPLICATION), remembered or counted as the namespace's are. */
  private async countAppServices(appId: string): Promise<void> {
    const counted = await this.countOurs(appCountKey(this.namespace, appId), appServicesSelector(appId), !this.appCounts.has(appId));
    this.appCounts.set(appId, counted);
  }

  private async countOurs(
    key: string,
    selector: string,
    mayRemember: boolean,
  ): Promise<{ observation: Observation<number>; epoch: number | undefined }> {
    const counts = this.ctx.facts.counts;
    const known = mayRemember ? counts.remembered(key, this.now()) : undefined;
    if (known !== undefined) return known;
    const counted = await counts.count(key, this.now(), async (): Promise<CountRead> => {
      let count = 0;
      const marks = new OldestMarks();
      await forEachPage(
        (token) => this.ctx.client.listServices(this.namespace, selector, this.ctx.config.sweepPageSize, token),
        (items, page) => {
          count += items.length + page.skipped.length;
          for (const item of items) {
            // Only marked ones are kept: the rest are counted, not parsed.
            if (item.metadata.annotations?.[EXECUTOR_GONE_AT_ANNOTATION] === undefined) continue;
            const fact = serviceFact(item);
            if (fact !== undefined) marks.offer(fact);
          }
        },
      );
      return { count, marked: marks.value };
    });
    const at = this.now();
    for (const service of counted.marked) {
      if (service.slot === undefined) continue;
      this.marked.set(slotKey(service.slot), { slot: service.slot, seen: { value: service, at, fresh: true, order: this.order.next() } });
    }
    return { observation: { value: counted.value, at, fresh: true, order: this.order.next() }, epoch: counted.epoch };
  }
}

/**
 * When a read shows what held: its start on the clock, unless the clock, set by this very answer,
 * now says earlier — a process's first reads are stamped by its own clock before any answer set it
 * (shared/kube/server-clock.ts), and one ahead of the API server's would date a "runs" after a
 * gone mark written later (decide.ts: a remembered "runs" overrules a mark read > 2.5 s before it).
 */
const answeredAt = (startedAt: number, now: number): number => Math.min(startedAt, now);
