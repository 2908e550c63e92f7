/**
 * The rule book: the one place that decides what happens to executor Services. Pure — no I/O,
 * no clock, no cache — and used alike by every event and by the sweep (the shape of Kubernetes'
 * endpointslice controller: read, a pure reconcile() that lists creates/updates/deletes, apply).
 *
 * Events are hints: they only choose which slots to look at. Every decision here is taken from
 * facts read from the API server (`fresh`: read during this reconciliation) or remembered from
 * earlier reads and our own writes (not fresh). A remembered fact may only lead to keeping or
 * creating; anything that could hurt — marking gone, deleting — needs fresh facts, as the
 * garbage collector does a live lookup before each delete (attemptToDeleteItem). When a fact is
 * missing, the decision asks for it (`needs`) instead of guessing.
 *
 * The invariant it keeps: for every live, opted-in executor whose driver lives, its Service
 * exists, carries no gone mark, is owned by that driver and selects that executor.
 */
import type { Config } from '../ops/config.ts';
import { EXECUTOR_GONE_AT_ANNOTATION } from '../model/labels.ts';
import { executorServiceName } from '../model/naming.ts';
import {
  type ServiceBody,
  type ServiceFact,
  type ServiceIdentity,
  desiredExecutorService,
  desiredShape,
  shapePatch,
} from '../model/service-spec.ts';
import type { PodFact, PodRef } from '../model/spark-pod.ts';
import { type Observation, SHARED_CLOCK_UNCERTAINTY_MS, datedAheadOfNow, readAfter } from './observation.ts';
import type { ReportOutcome } from './outcome.ts';

export type { Observation } from './observation.ts';

export type { ReportOutcome } from './outcome.ts';

/** One executor slot: an application's executor id. Its Service's name follows from it. */
export interface SlotKey {
  readonly appId: string;
  readonly execId: string;
}

export interface SlotFacts extends SlotKey {
  /** The Service with this slot's name; 'absent' = a read found none; undefined = not observed. */
  readonly service: Observation<ServiceFact | 'absent'> | undefined;
  /**
   * Names of every executor pod carrying this slot's labels (one complete list, so a pod not in
   * it does not carry them); undefined = not listed.
   */
  readonly claimants: Observation<readonly string[]> | undefined;
}

export interface Facts {
  readonly namespace: string;
  /** Pods by name (executors and owners); 'absent' = a read found no pod of that name. */
  readonly pods: ReadonlyMap<string, Observation<PodFact | 'absent'>>;
  readonly slots: readonly SlotFacts[];
  /** How many of our Services the namespace holds (for the cap); undefined = not counted. */
  readonly ourServiceCount: Observation<number> | undefined;
  /** How many of our Services each application holds (MAX_SERVICES_PER_APPLICATION), by app id; an app not in it is not counted. */
  readonly appServiceCounts?: ReadonlyMap<string, Observation<number>>;
  /**
   * Our gone-marked Services that a count read for this decision listed (oldest mark first), as
   * their slots with what is known of them: the ones that may give way to a live executor at a
   * cap (issue 17, class 4). Undefined or empty: none listed.
   */
  readonly markedServices?: readonly SlotFacts[];
}

/**
 * `now`, a fact's `at` and a gone mark are times on the API server's clock (issue 17, class 8):
 * a mark is written in whole seconds; how far two instances' readings may differ, and what a time
 * dated ahead of now means, is shared/rules/observation.ts's (SHARED_CLOCK_UNCERTAINTY_MS,
 * datedAheadOfNow).
 */
const MARK_PRECISION_MS = 1_000;

const rememberedTooLong = (seen: { readonly at: number; readonly fresh: boolean }, now: number, rules: Rules): boolean =>
  !seen.fresh && (now - seen.at > rules.factTtlMs || datedAheadOfNow(seen.at, now));

const markValue = (now: number): string => new Date(Math.floor(now / MARK_PRECISION_MS) * MARK_PRECISION_MS).toISOString();

export type Rules = Pick<
  Config,
  'optInMode' | 'cooldownSeconds' | 'maxServicesPerNamespace' | 'maxServicesRecountMargin' | 'maxServicesPerApplication' | 'factTtlMs'
>;

export type Action =
  | {
      readonly kind: 'create';
      readonly slot: SlotKey;
      readonly body: ServiceBody;
      readonly identity: ServiceIdentity;
      readonly why: string;
    }
  | {
      readonly kind: 'patch';
      readonly slot: SlotKey;
      readonly service: ServiceFact;
      /** JSON merge patch; applied only to the version decided on (resourceVersion precondition). */
      readonly patch: Record<string, unknown>;
      readonly outcome: 'patched' | 'marked-gone' | 'unmarked';
      readonly why: string;
    }
  /** Applied only to the version decided on (uid and resourceVersion preconditions). */
  | {
      readonly kind: 'delete';
      readonly slot: SlotKey;
      readonly service: ServiceFact;
      readonly why: string;
      /** A running executor waits for the name: decide the slot again once it is free. */
      readonly thenDecideAgain?: boolean;
    }
  | { readonly kind: 'report'; readonly slot: SlotKey; readonly service: string; readonly outcome: ReportOutcome; readonly why: string };

/** A fact the decision needs before it can be taken; always read from the API. */
export type Need =
  | { readonly kind: 'service'; readonly slot: SlotKey }
  | { readonly kind: 'claimants'; readonly slot: SlotKey }
  | { readonly kind: 'pod'; readonly name: string }
  | { readonly kind: 'service-count' }
  | { readonly kind: 'app-service-count'; readonly appId: string };

export interface Decision {
  readonly actions: readonly Action[];
  /** Facts to read before the `waiting` slots can be decided. */
  readonly needs: readonly Need[];
  readonly waiting: readonly SlotKey[];
}

export function decide(facts: Facts, rules: Rules, now: number): Decision {
  const actions: Action[] = [];
  const needs: Need[] = [];
  const waiting: SlotKey[] = [];
  const blocked: Blocked[] = [];
  // Creates decided together count toward the caps, as if each had been made already.
  let created = 0;
  const createdByApp = new Map<string, number>();
  for (const slot of facts.slots) {
    const decided = decideSlot(withCreates(facts, created, createdByApp), slot, rules, now);
    if ('blocked' in decided) {
      blocked.push(decided.blocked);
      continue;
    }
    if ('actions' in decided) {
      for (const action of decided.actions) {
        if (action.kind !== 'create') continue;
        created++;
        createdByApp.set(action.slot.appId, (createdByApp.get(action.slot.appId) ?? 0) + 1);
      }
    }
    if ('needs' in decided) {
      needs.push(...decided.needs);
      waiting.push({ appId: slot.appId, execId: slot.execId });
    } else actions.push(...decided.actions);
  }
  const room = giveWay(facts, blocked, rules, now);
  return { actions: [...actions, ...room.actions], needs: dedupe([...needs, ...room.needs]), waiting: [...waiting, ...room.waiting] };
}

/** The counts as a slot decided after `created` others must see them. */
function withCreates(facts: Facts, created: number, createdByApp: ReadonlyMap<string, number>): Facts {
  if (created === 0) return facts;
  const ns = facts.ourServiceCount;
  const apps = new Map(facts.appServiceCounts ?? []);
  for (const [appId, n] of createdByApp) {
    const counted = apps.get(appId);
    if (counted !== undefined) apps.set(appId, { ...counted, value: counted.value + n });
  }
  return { ...facts, ourServiceCount: ns === undefined ? undefined : { ...ns, value: ns.value + created }, appServiceCounts: apps };
}

/** A create refused at a cap, before anything was looked at to give way. */
interface Blocked {
  readonly slot: SlotKey;
  readonly executor: string;
  readonly why: string;
  /** Set when the application's own cap refused it: only that application's Services may give way. */
  readonly appOnly: string | undefined;
}

/** How a slot is decided: as itself, or as a gone-marked Service asked to give way to `roomFor`. */
interface SlotMode {
  readonly roomFor?: string;
}

type SlotDecision = { readonly actions: readonly Action[] } | { readonly needs: readonly Need[] } | { readonly blocked: Blocked };

/**
 * Is there room for one more Service of `appId`? A cap refuses only on a count read for this
 * decision; a remembered one may only let a create through, and one within the margin of a cap
 * is read again (other instances' creates, garbage collection: issue 17, class 5).
 */
function room(facts: Facts, appId: string, rules: Rules): { needs: Need[] } | { full: string; appOnly: boolean } | 'room' {
  const ns = facts.ourServiceCount;
  const cap = rules.maxServicesPerNamespace;
  const margin = rules.maxServicesRecountMargin;
  if (ns === undefined) return { needs: [{ kind: 'service-count' }] };
  if (!ns.fresh && ns.value + 1 > cap - margin) return { needs: [{ kind: 'service-count' }] };
  if (ns.value >= cap) {
    return {
      full: `namespace ${facts.namespace} holds ${ns.value} Services of ours, the cap is ${cap} (MAX_SERVICES_PER_NAMESPACE)`,
      appOnly: false,
    };
  }
  // An application holds no more Services than its namespace: well below its cap, it is not counted.
  const appCap = rules.maxServicesPerApplication;
  if (appCap >= cap || ns.value + 1 <= appCap - margin) return 'room';
  const app = facts.appServiceCounts?.get(appId);
  if (app === undefined || (!app.fresh && app.value + 1 > appCap - margin)) return { needs: [{ kind: 'app-service-count', appId }] };
  if (app.value >= appCap) {
    return {
      full: `application ${appId} holds ${app.value} Services of ours, its cap is ${appCap} (MAX_SERVICES_PER_APPLICATION)`,
      appOnly: true,
    };
  }
  return 'room';
}

/**
 * Dead executors' Services give way first (issue 17, class 4): a create refused at a cap may take
 * the place of a gone-marked Service whose recorded executor a read made for this decision finds
 * gone, with no running pod of the same driver carrying its labels — the rule that ends a
 * cool-down, without waiting for its end (COOLDOWN_SECONDS=0 included). A live executor's Service
 * never gives way: its executor and its slot's pods are read afresh, and a wrong mark found so is
 * taken off. Oldest marks first (the longest past DNS caches); at an application's own cap, only
 * that application's. The refused slot waits for the delete, then is decided again.
 */
function giveWay(
  facts: Facts,
  blocked: readonly Blocked[],
  rules: Rules,
  now: number,
): { actions: Action[]; needs: Need[]; waiting: SlotKey[] } {
  const out: { actions: Action[]; needs: Need[]; waiting: SlotKey[] } = { actions: [], needs: [], waiting: [] };
  const slotId = (s: SlotKey): string => `${s.appId}/${s.execId}`;
  const taken = new Set(facts.slots.map(slotId));
  const judge = (candidate: SlotFacts, roomFor: string): 'reads' | 'gives-way' | 'stays' => {
    const decided = decideSlot(facts, candidate, rules, now, { roomFor });
    if ('needs' in decided) {
      out.needs.push(...decided.needs, ...readsToGiveWay(facts, candidate));
      return 'reads';
    }
    if (!('actions' in decided)) return 'stays';
    // A wrong mark (its executor runs) is taken off; it makes no room.
    out.actions.push(...decided.actions.filter((a) => a.kind === 'patch' && a.outcome === 'unmarked'));
    const deletes = decided.actions.filter((a) => a.kind === 'delete');
    out.actions.push(...deletes);
    return deletes.length > 0 ? 'gives-way' : 'stays';
  };
  let reading = 0;
  // One candidate per refused create: the first (oldest mark) that gives way, or whose reads may show it does.
  for (const b of blocked) {
    let looked = 0;
    let found = false;
    for (const candidate of facts.markedServices ?? []) {
      const id = slotId(candidate);
      if (taken.has(id) || (b.appOnly !== undefined && candidate.appId !== b.appOnly)) continue;
      taken.add(id);
      looked++;
      const verdict = judge(candidate, b.executor);
      if (verdict === 'stays') continue;
      if (verdict === 'reads') reading++;
      found = true;
      break;
    }
    if (found) out.waiting.push(b.slot);
    else {
      const why = looked > 0 ? `${b.why}; none of the ${looked} gone-marked Service(s) looked at could give way` : b.why;
      out.actions.push({
        kind: 'report',
        slot: b.slot,
        service: executorServiceName(b.slot.appId, b.slot.execId),
        outcome: 'skipped',
        why,
      });
    }
  }
  // Read a few more ahead, so that one that turns out to stay does not cost a round of its own.
  if (reading > 0) {
    let ahead = 0;
    for (const candidate of facts.markedServices ?? []) {
      if (ahead >= READ_AHEAD * reading) break;
      const id = slotId(candidate);
      if (taken.has(id)) continue;
      const decided = decideSlot(facts, candidate, rules, now, { roomFor: '(read ahead)' });
      if (!('needs' in decided)) continue;
      out.needs.push(...decided.needs, ...readsToGiveWay(facts, candidate));
      ahead++;
    }
  }
  return out;
}

/** Gone-marked Services read ahead per one being read for a refused create. */
const READ_AHEAD = 2;

/**
 * What deciding whether a marked Service may give way reads, asked for at once rather than one
 * round each: its driver, its executor and its slot's pods, unless read after the Service was.
 */
function readsToGiveWay(facts: Facts, candidate: SlotFacts): Need[] {
  const seen = candidate.service;
  if (seen === undefined || seen.value === 'absent') return [];
  const service = seen.value;
  const needs: Need[] = readAfter(candidate.claimants, seen.order) ? [] : [{ kind: 'claimants', slot: candidate }];
  const names = [service.owner?.name, typeof service.identity === 'object' ? service.identity.executor.name : undefined];
  for (const name of names) if (name !== undefined && !readAfter(facts.pods.get(name), seen.order)) needs.push({ kind: 'pod', name });
  return needs;
}

type GoneHow = 'absent' | 'replaced' | 'terminal' | 'unlabelled';

const GONE_WORDS: Readonly<Record<GoneHow, string>> = {
  absent: 'no pod of that name',
  replaced: 'its name now belongs to a pod with another UID',
  terminal: 'phase Succeeded or Failed',
  unlabelled: 'no pod carries its labels any more',
};

/** What is known of a pod that a Service or an executor names by name and UID. */
type PodState =
  | { readonly state: 'alive'; readonly fact: PodFact; readonly at: number; readonly fresh: boolean; readonly order: number }
  | { readonly state: 'gone'; readonly how: GoneHow }
  | { readonly state: 'unknown'; readonly need: Need };

/**
 * Alive: a pod of that name with that UID, not terminal (being deleted still counts: it runs and
 * serves until then). Gone only on a fresh read that began after the Service naming the pod was
 * read (`after`): a remembered or earlier "gone" is never trusted.
 */
function podState(facts: Facts, ref: PodRef, after = 0): PodState {
  const seen = facts.pods.get(ref.name);
  if (seen === undefined) return { state: 'unknown', need: { kind: 'pod', name: ref.name } };
  const pod = seen.value;
  if (pod !== 'absent' && pod.uid === ref.uid && !pod.terminal)
    return { state: 'alive', fact: pod, at: seen.at, fresh: seen.fresh, order: seen.order };
  if (!readAfter(seen, after)) return { state: 'unknown', need: { kind: 'pod', name: ref.name } };
  return { state: 'gone', how: pod === 'absent' ? 'absent' : pod.uid !== ref.uid ? 'replaced' : 'terminal' };
}

/**
 * The executor a Service records. A fresh, complete list of the slot's pods also proves it gone
 * when it is not in it (deleted, or relabelled so that the Service cannot select it any more),
 * and overrules anything remembered about it.
 */
function recordedExecutorState(facts: Facts, slot: SlotFacts, executor: PodRef, after: number): PodState {
  const carriesLabels = (pod: PodFact): boolean => pod.appId === slot.appId && pod.execId === slot.execId;
  const seen = facts.pods.get(executor.name);
  if (readAfter(seen, after)) {
    const state = podState(facts, executor, after);
    return state.state === 'alive' && !carriesLabels(state.fact) ? { state: 'gone', how: 'unlabelled' } : state;
  }
  const claimants = slot.claimants;
  const listedAfter = readAfter(claimants, after);
  if (listedAfter && claimants !== undefined && !claimants.value.includes(executor.name)) return { state: 'gone', how: 'unlabelled' };
  const byName = podState(facts, executor, after);
  if (byName.state === 'alive' && !carriesLabels(byName.fact)) return { state: 'unknown', need: { kind: 'pod', name: executor.name } };
  if (byName.state !== 'unknown' || listedAfter) return byName;
  return { state: 'unknown', need: { kind: 'claimants', slot } };
}

interface Claimant {
  readonly pod: PodFact;
  readonly at: number;
  readonly fresh: boolean;
}

/**
 * Running pods carrying the slot's labels: the ones that claim it; undefined when they have not
 * been listed. A Pending pod claims nothing — it neither gets a Service nor keeps anyone from
 * one, nor keeps a gone executor's Service — whoever made it: only the kubelet makes a pod run.
 */
function liveClaimants(facts: Facts, slot: SlotFacts): Claimant[] | { need: Need[] } {
  if (slot.claimants === undefined) return { need: [{ kind: 'claimants', slot }] };
  const live: Claimant[] = [];
  const need: Need[] = [];
  for (const name of slot.claimants.value) {
    const seen = facts.pods.get(name);
    if (seen === undefined) {
      need.push({ kind: 'pod', name });
      continue;
    }
    const pod = seen.value;
    if (pod === 'absent' || pod.terminal || !pod.running || pod.appId !== slot.appId || pod.execId !== slot.execId) continue;
    live.push({ pod, at: seen.at, fresh: seen.fresh });
  }
  return need.length > 0 ? { need } : live;
}

type Eligibility =
  | { readonly eligible: true; readonly identity: ServiceIdentity; readonly port: number }
  /** `optedOut`: the application did not ask for Services (answered as ignored, not as skipped). */
  | { readonly eligible: false; readonly reason: string; readonly optedOut?: boolean }
  | { readonly eligible: 'unknown'; readonly need: Need };

/**
 * May this claimant get a Service? It must be seen running recently (fresh, or remembered for at
 * most factTtlMs: a stale "runs" can only create a Service the executor's end will mark), have a
 * v1 Pod controller owner that runs (its driver, whatever that pod's labels), be opted in, and
 * say its block-manager port.
 */
function eligibility(facts: Facts, claimant: Claimant, rules: Rules, now: number): Eligibility {
  const { pod } = claimant;
  if (rememberedTooLong(claimant, now, rules)) return { eligible: 'unknown', need: { kind: 'pod', name: pod.name } };
  if (!pod.port.ok) return { eligible: false, reason: pod.port.reason };
  const owner = pod.controllerPod;
  if (owner === undefined) {
    return {
      eligible: false,
      reason: 'no driver: the executor has no v1 Pod controller owner (in client mode set spark.kubernetes.driver.pod.name)',
    };
  }
  const ownerState = podState(facts, owner);
  if (ownerState.state === 'unknown') return { eligible: 'unknown', need: ownerState.need };
  if (ownerState.state === 'gone') return { eligible: false, reason: `driver pod ${owner.name} is gone (${ownerState.how})` };
  if (rememberedTooLong(ownerState, now, rules)) return { eligible: 'unknown', need: { kind: 'pod', name: owner.name } };
  if (rules.optInMode === 'label' && !pod.optIn && !ownerState.fact.optIn) {
    return { eligible: false, reason: 'not opted in (executor and driver pod lack spark-exec-svc/enabled=true)', optedOut: true };
  }
  const identity: ServiceIdentity = { appId: pod.appId!, execId: pod.execId!, executor: { name: pod.name, uid: pod.uid }, owner };
  return { eligible: true, identity, port: pod.port.port };
}

function decideSlot(facts: Facts, slot: SlotFacts, rules: Rules, now: number, mode: SlotMode = {}): SlotDecision {
  const name = executorServiceName(slot.appId, slot.execId);
  const report = (outcome: ReportOutcome, why: string): SlotDecision => ({
    actions: [{ kind: 'report', slot, service: name, outcome, why }],
  });
  const service = slot.service?.value;

  if (service === undefined || service === 'absent') {
    const claimants = liveClaimants(facts, slot);
    if ('need' in claimants) return { needs: claimants.need };
    if (claimants.length === 0) {
      const waiting = slot.claimants!.value.filter((name) => {
        const pod = facts.pods.get(name)?.value;
        return pod !== undefined && pod !== 'absent' && !pod.terminal && !pod.running;
      });
      // Not running yet (scheduling, pulling images): nothing to make, and nothing to read — a
      // Service of an earlier executor of this slot is its own event's and the sweep's concern.
      if (waiting.length > 0)
        return report(
          'verified',
          `no running executor: pod(s) ${waiting.slice(0, 3).join(', ')} not running yet (its Service is made when it runs)`,
        );
      // Nothing runs that could use a Service; whether one exists matters only if it does.
      if (service === undefined) return { needs: [{ kind: 'service', slot }] };
      return report('verified', 'no Service and no running executor');
    }
    const decided = claimants.map((c) => eligibility(facts, c, rules, now));
    const unknown = decided.flatMap((d) => (d.eligible === 'unknown' ? [d.need] : []));
    if (unknown.length > 0) return { needs: unknown };
    const eligible = decided.filter((d) => d.eligible === true);
    if (eligible.length === 0) {
      const reasons = [...new Set(decided.map((d) => (d.eligible === false ? d.reason : '')))];
      const optedOut = decided.every((d) => d.eligible === false && d.optedOut === true);
      return report(optedOut ? 'ignored' : 'skipped', reasons.join('; '));
    }
    if (eligible.length > 1) {
      const pods = eligible.map((e) => e.identity.executor.name).join(', ');
      return report(
        'conflict',
        `${eligible.length} running pods claim this executor (${pods}); refusing to guess which one the Service is for`,
      );
    }
    const { identity, port } = eligible[0]!;
    // A remembered count misses other instances' creates (issue 17, class 5: two instances made 19
    // Services under a cap of 10): a create that would bring it within the margin of a cap counts afresh.
    const space = room(facts, identity.appId, rules);
    if (space !== 'room') {
      if ('needs' in space) return { needs: space.needs };
      return {
        blocked: { slot, executor: identity.executor.name, why: space.full, appOnly: space.appOnly ? identity.appId : undefined },
      };
    }
    const body = desiredExecutorService(facts.namespace, identity, port);
    return { actions: [{ kind: 'create', slot, body, identity, why: `executor ${identity.executor.name} runs; port ${port}` }] };
  }

  if (!service.ours) return report('conflict', 'a Service with this name exists and is not managed by spark-exec-svc; left untouched');
  const sameSlot = service.slot?.appId === slot.appId && service.slot.execId === slot.execId;
  // Anything "gone" about what this Service names must come from a read that began after it was read.
  const after = slot.service!.order;

  // Whose it is decides everything: first, does its owner still run?
  if (service.owner === undefined) return ownerless(facts, slot, service, sameSlot, after);
  const ownerRef = service.owner;
  const owner = podState(facts, ownerRef, after);
  if (owner.state === 'unknown') return { needs: [owner.need] };
  if (owner.state === 'gone') return ownerGone(facts, slot, service, ownerRef, owner.how, rules, now);

  // A running pod of the slot with another driver: the Service's driver may have ended without
  // our knowing (its events lost). Only a fresh read of it tells whether the Service is in the way.
  if (!owner.fresh && slot.claimants !== undefined) {
    const live = liveClaimants(facts, slot);
    if (!('need' in live) && live.some((c) => c.pod.controllerPod?.uid !== ownerRef.uid))
      return { needs: [{ kind: 'pod', name: ownerRef.name }] };
  }

  const identity = service.identity;
  if (identity === undefined || !sameSlot) {
    return report('conflict', 'our Service of this name records another or an incomplete identity, and its driver runs; left untouched');
  }

  const markedAt = service.goneAt === undefined ? undefined : Date.parse(service.goneAt);
  // A mark is only ever written on a fresh read that found its executor gone, and a pod UID never
  // comes back: while the cool-down runs, only evidence read now can overrule it (a copy of the
  // executor carrying its labels, seen by the sweep). Without any, the mark stands, unread.
  // Asked to give way to a live executor at a cap, a marked Service is decided as if its cool-down were over.
  const coolingDown =
    mode.roomFor === undefined &&
    markedAt !== undefined &&
    !Number.isNaN(markedAt) &&
    (rules.cooldownSeconds === 0 || now < markedAt + rules.cooldownSeconds * 1000);
  if (coolingDown && facts.pods.get(identity.executor.name)?.fresh !== true && slot.claimants?.fresh !== true) {
    return report('verified', 'executor gone; cool-down running');
  }

  const recorded = recordedExecutorState(facts, slot, identity.executor, after);
  if (recorded.state === 'unknown') return { needs: [recorded.need] };

  if (recorded.state === 'alive') {
    // Evidence older than the mark cannot overrule it: the mark was put on a fresh read. Only a
    // read begun after this Service was read, or one begun surely after the mark was written, can
    // (one dated ahead of now was dated before the clock was set back: it is not after anything).
    const readAfterService = readAfter(recorded, after);
    const surelyAfterMark =
      markedAt !== undefined && recorded.at > markedAt + SHARED_CLOCK_UNCERTAINTY_MS && !datedAheadOfNow(recorded.at, now);
    const markStands = markedAt !== undefined && !readAfterService && !surelyAfterMark;
    if (markStands) return { needs: [{ kind: 'pod', name: identity.executor.name }] };
    return upkeep(facts, slot, service, identity, recorded);
  }

  // The executor the Service was made for is gone (fresh). Marking and ending the cool-down
  // also need a fresh, complete list of the slot's pods: a running pod with the same driver
  // (only a tenant's copy can be one: Spark never reuses an executor id) still uses it.
  const claimants = slot.claimants;
  if (claimants === undefined || !readAfter(claimants, after)) return { needs: [{ kind: 'claimants', slot }] };
  const live = liveClaimants(facts, slot);
  if ('need' in live) return { needs: live.need };
  // Only a copy that the Service still reaches keeps it: same driver, and its port is the
  // Service's (a copy with another port would leave the slot unreachable for good).
  const sameOwner = live.filter((c) => c.pod.controllerPod?.uid === ownerRef.uid && c.pod.port.ok && c.pod.port.port === service.port);
  if (sameOwner.length > 0) {
    const names = sameOwner.map((c) => c.pod.name).join(', ');
    if (service.goneAt !== undefined) {
      return {
        actions: [
          unmark(
            slot,
            service,
            `executor ${identity.executor.name} is gone but running pod(s) ${names} with the same driver carry its labels`,
          ),
        ],
      };
    }
    return report(
      'conflict',
      `executor ${identity.executor.name} is gone; running pod(s) ${names} with the same driver carry its labels, so the Service stays`,
    );
  }
  if (markedAt === undefined || Number.isNaN(markedAt)) {
    return {
      actions: [
        {
          kind: 'patch',
          slot,
          service,
          patch: { metadata: { annotations: { [EXECUTOR_GONE_AT_ANNOTATION]: markValue(now) } } },
          outcome: 'marked-gone',
          why: `executor ${identity.executor.name} is gone (${GONE_WORDS[recorded.how]}); cool-down started`,
        },
      ],
    };
  }
  if (rules.cooldownSeconds > 0 && now >= markedAt + rules.cooldownSeconds * 1000) {
    return { actions: [{ kind: 'delete', slot, service, why: `cool-down of ${rules.cooldownSeconds} s over` }] };
  }
  if (mode.roomFor !== undefined) {
    const why = `executor ${identity.executor.name} is gone (${GONE_WORDS[recorded.how]}): its Service gives way to live executor ${mode.roomFor} at the cap`;
    return { actions: [{ kind: 'delete', slot, service, why }] };
  }
  return report(
    'verified',
    rules.cooldownSeconds > 0 ? 'executor gone; cool-down running' : 'executor gone; kept until the driver goes (COOLDOWN_SECONDS=0)',
  );
}

/** The Service's own owner is verified gone: its Service has no one left to serve. */
function ownerGone(
  facts: Facts,
  slot: SlotFacts,
  service: ServiceFact,
  owner: PodRef,
  how: GoneHow,
  rules: Rules,
  now: number,
): SlotDecision {
  // A running executor of another run may be waiting for the name (a new run reusing a custom app id).
  const claimants = slot.claimants === undefined ? [] : liveClaimants(facts, slot);
  const waiting = 'need' in claimants ? [] : claimants.filter((c) => eligibility(facts, c, rules, now).eligible === true);
  const waitingWhy = waiting.length > 0 ? `; executor ${waiting[0]!.pod.name} needs the name` : '';
  // Spark leaves finished driver pods in place, so garbage collection never runs for them.
  if (how === 'terminal') {
    return {
      actions: [
        { kind: 'delete', slot, service, why: `driver pod ${owner.name} finished${waitingWhy}`, thenDecideAgain: waiting.length > 0 },
      ],
    };
  }
  // The owner object is gone: Kubernetes' garbage collector deletes the Service; we only do not
  // wait for it when a running executor needs the name now.
  if (waiting.length > 0) {
    return {
      actions: [{ kind: 'delete', slot, service, why: `stray: driver pod ${owner.name} is gone${waitingWhy}`, thenDecideAgain: true }],
    };
  }
  return {
    actions: [
      {
        kind: 'report',
        slot,
        service: service.name,
        outcome: 'collected',
        why: `driver pod ${owner.name} is gone (${GONE_WORDS[how]}): garbage collection removes it`,
      },
    ],
  };
}

/**
 * Ours, but without an owner (someone orphaned it): garbage collection will never remove it.
 * It is removed once nothing could use it — its recorded executor is verified gone and no
 * running pod carries its labels — and otherwise left alone.
 */
function ownerless(facts: Facts, slot: SlotFacts, service: ServiceFact, sameSlot: boolean, after: number): SlotDecision {
  const report = (outcome: ReportOutcome, why: string): SlotDecision => ({
    actions: [{ kind: 'report', slot, service: service.name, outcome, why }],
  });
  if (!sameSlot) return report('conflict', 'our label, no owner, and labels that do not name this slot; left untouched');
  if (service.executor !== undefined) {
    const recorded = recordedExecutorState(facts, slot, service.executor, after);
    if (recorded.state === 'unknown') return { needs: [recorded.need] };
    if (recorded.state === 'alive') return report('conflict', `no owner, but its executor ${service.executor.name} runs; left untouched`);
  }
  if (!readAfter(slot.claimants, after)) return { needs: [{ kind: 'claimants', slot }] };
  const live = liveClaimants(facts, slot);
  if ('need' in live) return { needs: live.need };
  if (live.length > 0)
    return report('conflict', `no owner, but pod(s) ${live.map((c) => c.pod.name).join(', ')} carry its labels; left untouched`);
  return { actions: [{ kind: 'delete', slot, service, why: 'stray: no owner and no running executor' }] };
}

/**
 * Same identity, executor running: keep the managed part right and the mark off. Rewriting the
 * selector or ports could point a live executor's Service elsewhere, so only a fresh read of
 * the executor may justify it; a remembered one only keeps.
 */
function upkeep(
  facts: Facts,
  slot: SlotFacts,
  service: ServiceFact,
  identity: ServiceIdentity,
  executor: Extract<PodState, { state: 'alive' }>,
): SlotDecision {
  const marked = service.goneAt !== undefined;
  const report = (why: string): SlotDecision => ({ actions: [{ kind: 'report', slot, service: service.name, outcome: 'verified', why }] });
  const { port } = executor.fact;
  if (!port.ok) return marked ? { actions: [unmark(slot, service, 'executor runs')] } : report(`executor runs; ${port.reason}`);
  // One port per executor incarnation (issue 17): a port this instance only knows from its own
  // BLOCK_MANAGER_PORT is configuration, not a fact of the pod — during a rollout another
  // instance has another — so the Service made for this very executor (same UID) keeps its own.
  // A port the pod states (annotation, Spark's option) is a fact and is kept right.
  const keptPort = port.source === 'default' && service.port !== undefined ? service.port : port.port;
  const desired = desiredExecutorService(facts.namespace, identity, keptPort);
  if (desiredShape(desired) === service.shape)
    return marked ? { actions: [unmark(slot, service, 'executor runs')] } : report('executor runs; Service is right');
  if (!executor.fresh) return { needs: [{ kind: 'pod', name: identity.executor.name }] };
  const patch = shapePatch(desired, service.selectorKeys);
  if (marked) (patch['metadata'] as { annotations: Record<string, string | null> }).annotations[EXECUTOR_GONE_AT_ANNOTATION] = null;
  return {
    actions: [
      {
        kind: 'patch',
        slot,
        service,
        patch,
        outcome: 'patched',
        why: 'executor runs; type, selector, ports, labels or annotations had drifted',
      },
    ],
  };
}

function unmark(slot: SlotKey, service: ServiceFact, why: string): Action {
  return {
    kind: 'patch',
    slot,
    service,
    patch: { metadata: { annotations: { [EXECUTOR_GONE_AT_ANNOTATION]: null } } },
    outcome: 'unmarked',
    why: `${why}: gone mark removed`,
  };
}

function dedupe(needs: Need[]): Need[] {
  const seen = new Set<string>();
  return needs.filter((need) => {
    const key =
      need.kind === 'pod'
        ? `pod/${need.name}`
        : need.kind === 'service-count'
          ? 'count'
          : need.kind === 'app-service-count'
            ? `count/${need.appId}`
            : `${need.kind}/${need.slot.appId}/${need.slot.execId}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
