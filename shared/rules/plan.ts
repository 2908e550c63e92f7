/**
 * What an event makes the engine look at, and what it may believe without reading: the trust and
 * cost rules of the event path, as data (controller-runtime's MapFunc: an event becomes requests
 * by a plain function). Events are hints — what one claims never justifies a write; it only
 * chooses which remembered facts may spare a read, and how widely to look. Pure: the caller hands
 * in what the process remembers, the plan says what to do with it.
 *
 * A new trust or cost rule is a field or a row here and a row in plan.test.ts.
 */
import type { PodFact } from '../model/spark-pod.ts';
import type { ServiceFact } from '../model/service-spec.ts';
import type { SlotKey } from './decide.ts';
import { type Observation, datedAheadOfNow } from './observation.ts';

/** The cost rules: how widely an event looks (each one a number with its reason). */
export const LOOK = {
  /** Executor ids listed after the one an add names: Spark creates executors in batches (spark.kubernetes.allocation.batch.size). */
  claimantWindow: 31,
  /** Other executors looked at with an ended one: one list of their pods, their marks written in parallel. */
  endedPeers: 31,
  /** How far from the ended executor's id the peers are looked for, each way. */
  endedPeerReach: 64,
  /** A look that found no other executor ended is not repeated for this long (dynamic allocation removes executors one by one). */
  quietPeersMs: 10_000,
} as const;

/** Which remembered facts may stand in for reads. */
export interface Trust {
  /** Remembered Services of the looked-at slots. */
  readonly services: boolean;
  /** Remembered pods: none, or all but these names (read afresh). */
  readonly pods: { readonly remembered: false } | { readonly remembered: true; readonly except: readonly string[] };
  /** Slots whose remembered complete list of pods may stand in for a list, when it names this pod (checked when the list is looked up). */
  readonly claimantsOf: ReadonlyArray<{ readonly slot: SlotKey; readonly naming: string }>;
  /**
   * The event's pod as the event says it is (an event that says it runs). Whatever is remembered
   * of it — including a list another event began earlier and this one waits for — stands in only
   * while it says the same (samePodFact), and a remembered list of its slot only if it names it:
   * checked when the fact is taken, not only when the plan is made, because other events change
   * what is remembered meanwhile. A list begun before the executor started shows it Pending; taken
   * for its own "runs" event, that would leave a live executor without its Service.
   */
  readonly hint?: { readonly pod: PodFact; readonly slot: SlotKey };
}

export const TRUST_NOTHING: Trust = { services: false, pods: { remembered: false }, claimantsOf: [] };

/** May this remembered fact of a pod stand in for a read, under this trust? */
export function rememberedPodStandsIn(trust: Trust, name: string, fact: PodFact | 'absent'): boolean {
  if (!trust.pods.remembered || trust.pods.except.includes(name)) return false;
  if (trust.hint === undefined || trust.hint.pod.name !== name) return true;
  return fact !== 'absent' && samePodFact(fact, trust.hint.pod);
}

/** The exec ids after a slot that its claimant list covers too (Spark numbers executors in order). */
export function claimantWindowSlots(slot: SlotKey, window: number): SlotKey[] {
  const first = BigInt(slot.execId);
  return Array.from({ length: window }, (_, i) => ({ appId: slot.appId, execId: (first + BigInt(i + 1)).toString() }));
}

/** How the engine looks at one request's slots. */
export interface Look {
  readonly trust: Trust;
  /**
   * When listing a slot's pods, list this many following exec ids too, and decide every one of
   * them that a listed pod claims: the first add of a batch serves the whole batch.
   */
  readonly claimantWindow: number;
  /** May wait for another event's list of the same slots' pods and take its answers as remembered (enough to keep or create). */
  readonly shareLists: boolean;
  /**
   * Wait for other events of this process deciding the same slots, and leave window slots they
   * are deciding to them. (The sweep and a driver's end neither wait nor hold: an event must not
   * queue behind a sweep's chunk.)
   */
  readonly coordinate: boolean;
  /** Read every slot's Service before deciding (when most of them are expected to exist). */
  readonly readServicesFirst: boolean;
  /**
   * Slots a listed pod claims whose Services this process does not know are read before they are
   * decided (an update: its executor and the window's ran before, so their Services most likely exist).
   */
  readonly readClaimedServices?: boolean;
}

/** A sweep page, a driver's end, a Reference-mode delete: everything read, nothing shared, nobody waited for. */
export const LOOK_AFRESH: Look = {
  trust: TRUST_NOTHING,
  claimantWindow: 0,
  shareLists: false,
  coordinate: false,
  readServicesFirst: false,
};

/** What the process remembers around the executor an event names (all of it optional: a new process remembers nothing). */
export interface RememberedNearby {
  /** The event's pod, as last read. */
  readonly pod?: PodFact | undefined;
  /** The Service of the event's slot, as last read or written. */
  readonly service?: ServiceFact | undefined;
  /** The last look around an ended executor of this application: how many it found ended, when. */
  readonly lastPeerLook?: { readonly value: number; readonly at: number } | undefined;
  /** The Service remembered for another executor id of the same application. */
  readonly serviceOf: (execId: string) => ServiceFact | undefined;
}

export interface ExecutorEvent {
  /** What the event says of the executor (Resource mode: as claimed; Reference mode: as just read). */
  readonly hint: PodFact;
  readonly slot: SlotKey;
  /** The event says the executor went: a delete, or a terminal phase. */
  readonly goneHint: boolean;
  /** An update (of a pod that existed before): not the add of a new executor, whose Service rarely exists yet. */
  readonly update?: boolean;
}

export interface ExecutorPlan {
  readonly slots: readonly SlotKey[];
  readonly look: Look;
  /** The ended executor's peers looked at with it (their count of marks is remembered after). */
  readonly peers: readonly SlotKey[];
}

/**
 * An executor event. For an executor it says runs, remembered facts stand in as long as they
 * agree with it (a wrong "runs" only keeps or creates); for one it says went, that executor and
 * its slot are read afresh.
 */
export function planExecutorEvent(event: ExecutorEvent, remembered: RememberedNearby, now: number): ExecutorPlan {
  const { hint, slot, goneHint } = event;
  const agrees = !goneHint && remembered.pod !== undefined && samePodFact(remembered.pod, hint);
  const service = remembered.service;
  // A remembered Service made for another executor than the one the event names says nothing
  // about this one (a new run reusing the app id, a copy); nor does one marked gone while the
  // event says its executor runs (the mark can only be wrong if something raced it, and only
  // fresh reads can tell).
  const serviceAgrees = service === undefined || (service.executor?.uid === hint.uid && (goneHint || service.goneAt === undefined));
  // Executors often end together (the application's end, a decommission wave): an ended one's
  // event looks at its peers too, so that their own events find their Services marked already.
  const peers =
    goneHint && serviceAgrees && service !== undefined && service.goneAt === undefined ? endedPeers(slot, remembered, now) : undefined;
  // Peers' marks are decided from remembered Services: their driver is read afresh first, so that
  // an application ended by deleting its driver (GC took the Services) costs reads, not writes.
  const peerOwner = peers === undefined || service?.owner === undefined ? [] : [service.owner.name];
  // The peers' executors are read afresh too: only the list of their pods can show them ended.
  const readAfresh = [...new Set([hint.name, ...(peers?.executors ?? []), ...peerOwner])];
  const claimantsTrusted = agrees && serviceAgrees;
  return {
    slots: [slot, ...(peers?.slots ?? [])],
    peers: peers?.slots ?? [],
    look: {
      trust: {
        services: serviceAgrees,
        // An event that says its executor runs: what is remembered of it is judged against the
        // event when it is taken (`hint`); one that says it went reads it and its peers afresh.
        pods: { remembered: true, except: goneHint ? readAfresh : [] },
        claimantsOf: claimantsTrusted ? [{ slot, naming: hint.name }] : [],
        ...(goneHint ? {} : { hint: { pod: hint, slot } }),
      },
      claimantWindow: goneHint ? 0 : LOOK.claimantWindow,
      shareLists: !goneHint,
      coordinate: true,
      readServicesFirst: false,
      // An update names an executor that existed before, and its window executors that ran before
      // it: a Service of theirs the process forgot (its memory held fewer executors than run) is
      // read once a list shows them, never created blind — a miss costs a read, not a create that
      // fails (409) and a read (issue 18). An add keeps the optimistic create (a new executor's
      // Service rarely exists), and a forged update of a pod that does not exist costs no more.
      readClaimedServices: event.update === true && !goneHint,
    },
  };
}

/**
 * Whether an executor event needs a look at all. An executor that has not started (phase Pending,
 * or Unknown) claims nothing (shared/rules/decide.ts: only a running executor claims its slot, a
 * Pending copy neither gets a Service nor blocks one), so nothing its event could show changes a
 * Service: the event that says it runs follows on the same stream, and the sweep repairs one the
 * adapter dropped. An event that says it went is always looked at. The first add of each batch used
 * to list 32 executors' pods here to decide nothing: ≈ 15 % of a scale-up at 20 ms per API call
 * (issue 18's profile). Like a controller-runtime predicate, this filters what to reconcile; it
 * never writes, so a forged "Pending" can only leave work to the next event or the sweep.
 */
export function executorEventLooks(hint: PodFact, goneHint: boolean): { readonly look: boolean; readonly why: string } {
  if (goneHint) return { look: true, why: 'executor went: its slot is read' };
  if (!hint.running) return { look: false, why: 'executor not running yet: it claims nothing until it runs' };
  return { look: true, why: 'executor runs: its slot is looked at' };
}

/**
 * Executors of the same application near this one whose Services this process remembers as made
 * for them and unmarked: the ones whose own "ended" events would each cost a list and a patch.
 * Nothing here is believed: they are only added to what is read and decided.
 */
function endedPeers(slot: SlotKey, remembered: RememberedNearby, now: number): { slots: SlotKey[]; executors: string[] } | undefined {
  const last = remembered.lastPeerLook;
  // A look dated ahead of now (before the clock was set back) is of unknown age: it quiets nothing.
  if (last !== undefined && last.value === 0 && now - last.at < LOOK.quietPeersMs && !datedAheadOfNow(last.at, now)) return undefined;
  const slots: SlotKey[] = [];
  const executors: string[] = [];
  const own = BigInt(slot.execId);
  for (let d = 1n; d <= BigInt(LOOK.endedPeerReach) && slots.length < LOOK.endedPeers; d++) {
    for (const id of [own - d, own + d]) {
      if (id < 1n || slots.length >= LOOK.endedPeers) continue;
      const execId = id.toString();
      const service = remembered.serviceOf(execId);
      if (service?.identity === undefined || service.goneAt !== undefined) continue;
      slots.push({ appId: slot.appId, execId });
      executors.push(service.identity.executor.name);
    }
  }
  return slots.length === 0 ? undefined : { slots, executors };
}

/**
 * Same pod, and nothing the rules read differs: status churn, Spark's own label updates and the
 * start of a graceful deletion (a pod being deleted still runs) do not count; the start of its
 * containers (Pending → Running: only then does it claim its slot) does (kubernetes'
 * endpointslice util PodChanged asks the same question for endpoints).
 */
export function samePodFact(a: PodFact, b: PodFact): boolean {
  return (
    a.uid === b.uid &&
    a.terminal === b.terminal &&
    a.running === b.running &&
    a.appId === b.appId &&
    a.execId === b.execId &&
    a.optIn === b.optIn &&
    a.controllerPod?.name === b.controllerPod?.name &&
    a.controllerPod?.uid === b.controllerPod?.uid &&
    JSON.stringify(a.port) === JSON.stringify(b.port)
  );
}

/**
 * The other half of the cool-down rule ("the mark stands, unread", shared/rules/decide.ts): a
 * Service read now that records its executor gone, while a page of pods the caller only heard of
 * (a sweep page) shows that executor running. Its executor is read before deciding, or a wrong
 * mark would stand for the whole cool-down.
 */
export function markedButHintedRunning(
  services: Iterable<Observation<ServiceFact | 'absent'>>,
  pods: ReadonlyMap<string, Observation<PodFact | 'absent'>>,
): string[] {
  const names: string[] = [];
  for (const seen of services) {
    const service = seen.value;
    if (!seen.fresh || service === 'absent' || service.goneAt === undefined || typeof service.identity !== 'object') continue;
    const { name, uid } = service.identity.executor;
    const hinted = pods.get(name);
    if (hinted !== undefined && !hinted.fresh && hinted.value !== 'absent' && hinted.value.uid === uid && !hinted.value.terminal)
      names.push(name);
  }
  return names;
}

/**
 * A driver event that says the driver runs. Its executors are looked at when it may have just
 * opted in (`kubectl label pod <driver> spark-exec-svc/enabled=true`): running executors send no
 * more events, so without a look they would wait for the sweep. The event carries only the new
 * object, so "just opted in" is judged against what the process remembers of the driver (read,
 * never heard): opted in now, and not remembered opted in under this UID. A process that
 * remembers nothing looks (its look reads the driver, which it then remembers). Opting out needs
 * no look: opt-in only gates creating. With OPT_IN_MODE=all labels do not matter.
 */
export function driverOptInLook(
  hint: PodFact,
  remembered: PodFact | undefined,
  optInMode: 'label' | 'all',
): { readonly look: boolean; readonly why: string } {
  if (optInMode === 'all') return { look: false, why: 'driver running: nothing to do (OPT_IN_MODE=all)' };
  if (!hint.optIn) return { look: false, why: 'driver running, not opted in: nothing to do' };
  // Spark asks for executors once its driver runs: a driver not running yet has none that run.
  if (!hint.running) return { look: false, why: 'driver not running yet: nothing to do' };
  if (remembered !== undefined && remembered.uid === hint.uid && remembered.optIn && !remembered.terminal) {
    return { look: false, why: 'driver running, opted in as remembered: nothing to do' };
  }
  return { look: true, why: 'driver opted in (not remembered so): its running executors are looked at' };
}
