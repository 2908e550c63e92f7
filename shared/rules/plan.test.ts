/**
 * The plan of an executor event, as rows: what the event says and what the process remembers →
 * which slots are looked at, which remembered facts may stand in, how widely pods are listed.
 * Expectations come from the specification (README "How it works", docs/reliability.md "Facts,
 * not events" and "Which slots an event looks at"):
 * - an event that says an executor runs lets remembered facts stand in only where they agree with
 *   it; an event that says it went makes the function read that executor's slot afresh;
 * - a remembered Service made for another executor, or marked gone while the event says it runs,
 *   is read afresh;
 * - an add's list of pods covers its slot and the next 31 executor ids;
 * - an ended executor's event also reads up to 31 nearby executors whose Services the process
 *   made (and their driver afresh); a look that finds none ended is not widened again for 10 s.
 * Facts are written here as literals, not produced by the project's parsers.
 */
import { describe, expect, it } from 'vitest';
import type { ServiceFact } from '../model/service-spec.ts';
import type { PodFact } from '../model/spark-pod.ts';
import type { Observation } from './observation.ts';
import {
  type ExecutorPlan,
  type RememberedNearby,
  driverOptInLook,
  executorEventLooks,
  markedButHintedRunning,
  planExecutorEvent,
  rememberedPodStandsIn,
} from './plan.ts';

const APP = 'spark-a1';
const NOW = 1_000_000;
const DRIVER = { name: 'drv', uid: 'uid-drv' };

function executor(execId: string, extra: Partial<PodFact> = {}): PodFact {
  return {
    name: `exec-${execId}`,
    uid: `uid-exec-${execId}`,
    resourceVersion: '1',
    terminal: false,
    running: true,
    deleting: false,
    role: 'executor',
    appId: APP,
    execId,
    controllerPod: DRIVER,
    optIn: true,
    port: { ok: true, port: 7079, source: 'annotation' } as PodFact['port'],
    ...extra,
  };
}

function serviceFor(execId: string, extra: Partial<ServiceFact> = {}): ServiceFact {
  const pod = { name: `exec-${execId}`, uid: `uid-exec-${execId}` };
  return {
    name: `svc-${APP}-${execId}`,
    uid: `uid-svc-${execId}`,
    resourceVersion: '7',
    ours: true,
    slot: { appId: APP, execId },
    executor: pod,
    owner: DRIVER,
    identity: { appId: APP, execId, executor: pod, owner: DRIVER },
    goneAt: undefined,
    shape: 'shape',
    selectorKeys: [],
    port: 7079,
    ...extra,
  };
}

const nothing: RememberedNearby = { serviceOf: () => undefined };

interface Row {
  readonly name: string;
  /** What the event says: 'runs' (add/update of a running pod) or 'went' (delete, or a terminal phase). */
  readonly says: 'runs' | 'went';
  readonly pod?: PodFact;
  readonly remembered?: Partial<RememberedNearby>;
  readonly now?: number;
  readonly want: {
    readonly slots: readonly string[];
    readonly services: boolean;
    /**
     * Of exec-8 (the event's pod: the row's remembered one, else what a list would show — the
     * event's own), exec-7, exec-9 and drv, those whose remembered fact may not stand in
     * ('none' = no remembered pod at all).
     */
    readonly podsReadAfresh: readonly string[] | 'none';
    readonly claimantListTrusted: boolean;
    readonly window: number;
    readonly shareLists: boolean;
  };
}

const eight = serviceFor('8');
const peerServices: Record<string, ServiceFact> = {
  '7': serviceFor('7'),
  '9': serviceFor('9'),
  '11': serviceFor('11', { goneAt: '2026-12-03T11:00:00Z' }),
  '80': serviceFor('80'),
};
const withPeers: Partial<RememberedNearby> = { service: eight, serviceOf: (id) => peerServices[id] };

const ROWS: readonly Row[] = [
  {
    name: 'an add of an executor the process never saw: read, its batch listed with it (31 following ids), lists shared (another event’s list may answer for it where it shows what the event says)',
    says: 'runs',
    want: { slots: ['8'], services: true, podsReadAfresh: [], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'a no-op update that agrees with the remembered pod: remembered pods, Service and list may stand in',
    says: 'runs',
    remembered: { pod: executor('8'), service: eight },
    want: { slots: ['8'], services: true, podsReadAfresh: [], claimantListTrusted: true, window: 31, shareLists: true },
  },
  {
    name: 'status churn, a label Spark adds and the start of a graceful deletion still agree',
    says: 'runs',
    pod: executor('8', { deleting: true, resourceVersion: '9' }),
    remembered: { pod: executor('8'), service: eight },
    want: { slots: ['8'], services: true, podsReadAfresh: [], claimantListTrusted: true, window: 31, shareLists: true },
  },
  {
    name: 'issue 17: the update that says a remembered Pending executor now runs disagrees (only then does it claim its slot): read afresh',
    says: 'runs',
    pod: executor('8'),
    remembered: { pod: executor('8', { running: false }) },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'an update with another UID than remembered (a new pod of that name): the pod is read afresh, its list too',
    says: 'runs',
    pod: executor('8', { uid: 'uid-other' }),
    remembered: { pod: executor('8') },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'an update that changes the port or the driver disagrees: read afresh',
    says: 'runs',
    pod: executor('8', { port: { ok: true, port: 7080, source: 'annotation' } as PodFact['port'] }),
    remembered: { pod: executor('8'), service: eight },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'a remembered Service made for another executor (a new run reusing the app id): the Service is read afresh',
    says: 'runs',
    remembered: { pod: executor('8'), service: serviceFor('8', { executor: { name: 'exec-8', uid: 'uid-old-run' } }) },
    want: { slots: ['8'], services: false, podsReadAfresh: [], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'a remembered Service marked gone while the event says its executor runs: read afresh (only fresh reads can tell a raced mark)',
    says: 'runs',
    remembered: { pod: executor('8'), service: serviceFor('8', { goneAt: '2026-12-03T11:00:00Z' }) },
    want: { slots: ['8'], services: false, podsReadAfresh: [], claimantListTrusted: false, window: 31, shareLists: true },
  },
  {
    name: 'an ended executor the process made no Service for: its slot alone, read afresh, no window, no shared list',
    says: 'went',
    remembered: { pod: executor('8') },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 0, shareLists: false },
  },
  {
    name: 'an ended executor with remembered unmarked peers within ±64: they are looked at too (marked ones and those too far are not), their executors and driver read afresh',
    says: 'went',
    remembered: withPeers,
    want: {
      slots: ['8', '7', '9'],
      services: true,
      podsReadAfresh: ['exec-8', 'exec-7', 'exec-9', 'drv'],
      claimantListTrusted: false,
      window: 0,
      shareLists: false,
    },
  },
  {
    name: 'the last look found no other executor ended less than 10 s ago (dynamic allocation): the slot alone',
    says: 'went',
    remembered: { ...withPeers, lastPeerLook: { value: 0, at: NOW - 9_999 } },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 0, shareLists: false },
  },
  {
    name: 'the quiet period is over after 10 s: peers again',
    says: 'went',
    remembered: { ...withPeers, lastPeerLook: { value: 0, at: NOW - 10_000 } },
    want: {
      slots: ['8', '7', '9'],
      services: true,
      podsReadAfresh: ['exec-8', 'exec-7', 'exec-9', 'drv'],
      claimantListTrusted: false,
      window: 0,
      shareLists: false,
    },
  },
  {
    name: 'a last look that found peers ended does not quiet the next one',
    says: 'went',
    remembered: { ...withPeers, lastPeerLook: { value: 3, at: NOW - 1 } },
    want: {
      slots: ['8', '7', '9'],
      services: true,
      podsReadAfresh: ['exec-8', 'exec-7', 'exec-9', 'drv'],
      claimantListTrusted: false,
      window: 0,
      shareLists: false,
    },
  },
  {
    name: 'an ended executor whose remembered Service is already marked: no peers (its end was seen already)',
    says: 'went',
    remembered: { ...withPeers, service: serviceFor('8', { goneAt: '2026-12-03T11:00:00Z' }) },
    want: { slots: ['8'], services: true, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 0, shareLists: false },
  },
  {
    name: 'an ended executor whose remembered Service records another executor: its Service read afresh, no peers',
    says: 'went',
    remembered: { ...withPeers, service: serviceFor('8', { executor: { name: 'exec-8', uid: 'uid-old-run' } }) },
    want: { slots: ['8'], services: false, podsReadAfresh: ['exec-8'], claimantListTrusted: false, window: 0, shareLists: false },
  },
];

function plan(row: Row): ExecutorPlan {
  const hint = row.pod ?? executor('8', row.says === 'went' ? { terminal: true } : {});
  return planExecutorEvent(
    { hint, slot: { appId: APP, execId: '8' }, goneHint: row.says === 'went' },
    { ...nothing, ...row.remembered },
    row.now ?? NOW,
  );
}

describe('the plan of an executor event', () => {
  it.each(ROWS.map((row) => [row.name, row] as const))('%s', (_name, row) => {
    const p = plan(row);
    const { trust } = p.look;
    expect(p.slots.map((s) => s.execId)).toEqual(row.want.slots);
    expect(trust.services).toBe(row.want.services);
    const hint = row.pod ?? executor('8', row.says === 'went' ? { terminal: true } : {});
    const factOf = (name: string): PodFact =>
      name === 'exec-8'
        ? (row.remembered?.pod ?? hint)
        : name === 'drv'
          ? executor('0', { name: 'drv', role: 'driver' })
          : executor(name.slice(5));
    const notStandingIn = ['exec-8', 'exec-7', 'exec-9', 'drv'].filter((name) => !rememberedPodStandsIn(trust, name, factOf(name)));
    expect(trust.pods.remembered ? notStandingIn : 'none').toEqual(row.want.podsReadAfresh);
    expect(trust.claimantsOf.length > 0).toBe(row.want.claimantListTrusted);
    expect(p.look.claimantWindow).toBe(row.want.window);
    expect(p.look.shareLists).toBe(row.want.shareLists);
    // Every event of a slot takes turns with the others of this process.
    expect(p.look.coordinate).toBe(true);
  });

  it('a trusted claimant list must name the event’s pod (checked when the list is looked up)', () => {
    const p = plan(ROWS[1]!);
    expect(p.look.trust.claimantsOf).toEqual([{ slot: { appId: APP, execId: '8' }, naming: 'exec-8' }]);
  });

  it('at most 31 peers, nearest first, never below id 1', () => {
    const all: Record<string, ServiceFact> = Object.fromEntries(
      Array.from({ length: 200 }, (_, i) => [String(i + 1), serviceFor(String(i + 1))]),
    );
    const p = planExecutorEvent(
      { hint: executor('3', { terminal: true }), slot: { appId: APP, execId: '3' }, goneHint: true },
      { service: all['3'], serviceOf: (id) => all[id] },
      NOW,
    );
    expect(p.peers.map((s) => Number(s.execId))).toEqual([2, 4, 1, 5, ...Array.from({ length: 27 }, (_, i) => i + 6)]);
    expect(p.peers).toHaveLength(31);
  });
});

/**
 * docs/reliability.md, Limitations: "A gone mark on a running executor's Service (only a race could
 * write one) is taken off … during the cool-down too, by the sweep: its pods pass reads the
 * executor a marked Service records when the page shows it running."
 */
describe('a sweep page that shows a marked Service’s executor running', () => {
  const MARK = '2026-12-03T11:00:00Z';
  const read = <T>(value: T): Observation<T> => ({ value, at: NOW, fresh: true, order: 1 });
  const heard = <T>(value: T): Observation<T> => ({ value, at: 0, fresh: false, order: 0 });
  const rows: ReadonlyArray<
    readonly [string, Observation<ServiceFact | 'absent'>, Observation<PodFact | 'absent'> | undefined, readonly string[]]
  > = [
    [
      'marked, read now, the page shows its executor running: read that executor',
      read(serviceFor('8', { goneAt: MARK })),
      heard(executor('8')),
      ['exec-8'],
    ],
    ['not marked: nothing to read first', read(serviceFor('8')), heard(executor('8')), []],
    [
      'the page shows a pod of that name with another UID: not its executor',
      read(serviceFor('8', { goneAt: MARK })),
      heard(executor('8', { uid: 'uid-other' })),
      [],
    ],
    [
      'the page shows its executor ended: the mark is right',
      read(serviceFor('8', { goneAt: MARK })),
      heard(executor('8', { terminal: true })),
      [],
    ],
    ['the page does not show it: the mark stands, unread', read(serviceFor('8', { goneAt: MARK })), undefined, []],
    ['the executor was read now already: nothing more to read', read(serviceFor('8', { goneAt: MARK })), read(executor('8')), []],
    [
      'a remembered (not read now) Service: the rule book reads it first anyway',
      heard(serviceFor('8', { goneAt: MARK })),
      heard(executor('8')),
      [],
    ],
  ];
  it.each(rows)('%s', (_name, service, pod, want) => {
    const pods = new Map(pod === undefined ? [] : [['exec-8', pod] as const]);
    expect(markedButHintedRunning([service], pods)).toEqual(want);
  });
});

/**
 * Issue 17, class 6: opt-in changes are events too. "A driver whose opt-in changes has its
 * application's executors looked at" — judged against what the process remembers of the driver
 * (the event carries only the new object); opting out needs no look (opt-in only gates creating).
 */
describe('a driver event that says it runs: are its executors looked at (a late opt-in)?', () => {
  const driver = (extra: Partial<PodFact> = {}): PodFact =>
    executor('0', { name: 'drv', uid: 'uid-drv', role: 'driver', execId: undefined, controllerPod: undefined, ...extra });
  it.each<[string, PodFact, PodFact | undefined, 'label' | 'all', boolean]>([
    ['opted in now, remembered not opted in (kubectl label … enabled=true) → look', driver(), driver({ optIn: false }), 'label', true],
    ['opted in now, nothing remembered (a new process cannot tell) → look', driver(), undefined, 'label', true],
    ['opted in now, remembered opted in → no look (status churn)', driver(), driver(), 'label', false],
    [
      'opted in now, remembered opted in under another UID (a new driver of that name) → look',
      driver(),
      driver({ uid: 'uid-old' }),
      'label',
      true,
    ],
    ['not opted in now (opted out, or never) → no look', driver({ optIn: false }), driver(), 'label', false],
    [
      'opted in but not running yet (Spark makes executors once the driver runs) → no look',
      driver({ running: false }),
      undefined,
      'label',
      false,
    ],
    ['OPT_IN_MODE=all: labels do not matter → no look', driver(), driver({ optIn: false }), 'all', false],
  ])('%s', (_name, hint, remembered, mode, look) => {
    expect(driverOptInLook(hint, remembered, mode).look).toBe(look);
  });
});

// Only a running executor claims its slot (issue 17): the event of one that has not started can
// change no Service, so it costs no read (issue 18: the first add of each batch listed 32 pods for
// nothing). Whatever says an executor went is looked at, running or not.
describe('which executor events are looked at at all', () => {
  const rows: ReadonlyArray<readonly [string, PodFact, boolean, boolean]> = [
    ['an add of a Pending executor: not looked at', executor('8', { running: false }), false, false],
    ['an executor in phase Unknown (not running, not ended): not looked at', executor('8', { running: false }), false, false],
    ['an add of an executor that already runs (the adapter starting up lists it): looked at', executor('8'), false, true],
    ['an update of a running executor under graceful deletion: looked at', executor('8', { deleting: true }), false, true],
    [
      'a delete of a Pending executor: looked at (its slot may hold a Service of an earlier one)',
      executor('8', { running: false }),
      true,
      true,
    ],
    ['a terminal phase: looked at', executor('8', { running: false, terminal: true }), true, true],
  ];
  it.each(rows)('%s', (_name, hint, goneHint, look) => {
    expect(executorEventLooks(hint, goneHint).look).toBe(look);
  });
});

// What is remembered of the event's own pod — from the process's memory or from a list another
// event began earlier — stands in for a read only while it says what the event says. A list begun
// before the executor started shows it Pending; believed for its "runs" event, no Service is made.
describe('a remembered fact of the event’s pod, taken when the look needs it', () => {
  const runs = executor('8');
  const says = (hint: PodFact, goneHint = false): ExecutorPlan =>
    planExecutorEvent({ hint, slot: { appId: APP, execId: '8' }, goneHint }, nothing, NOW);
  const rows: ReadonlyArray<readonly [string, PodFact, PodFact | 'absent', boolean]> = [
    ['the event says it runs, memory says it runs (same pod): stands in', runs, executor('8'), true],
    ['the event says it runs, memory says Pending: read afresh', runs, executor('8', { running: false }), false],
    ['the event says it runs, memory says absent: read afresh', runs, 'absent', false],
    [
      'the event says it runs, memory holds another pod of that name (new UID): read afresh',
      runs,
      executor('8', { uid: 'uid-other' }),
      false,
    ],
    [
      'the event says Pending, memory says Pending: stands in (an add needs no read)',
      executor('8', { running: false }),
      executor('8', { running: false }),
      true,
    ],
    ['the event says Pending, memory says it runs: read afresh', executor('8', { running: false }), runs, false],
  ];
  it.each(rows)('%s', (_name, hint, fact, want) => {
    expect(rememberedPodStandsIn(says(hint).look.trust, 'exec-8', fact)).toBe(want);
  });
  it('other pods (its driver, its window’s executors) are not judged by the event’s pod', () => {
    expect(rememberedPodStandsIn(says(runs).look.trust, 'exec-9', executor('9', { running: false }))).toBe(true);
    expect(rememberedPodStandsIn(says(runs).look.trust, 'drv', 'absent')).toBe(true);
  });
  it('an event that says the executor went reads it afresh whatever is remembered', () => {
    expect(
      rememberedPodStandsIn(says(executor('8', { terminal: true }), true).look.trust, 'exec-8', executor('8', { terminal: true })),
    ).toBe(false);
  });
});

// Issue 18: a miss costs reads, never a blind create. Which events read the unknown Services of
// the slots a list shows claimed before deciding them.
describe('Services of claimed slots read before deciding', () => {
  const running = executor('8', { running: true });
  const cases: ReadonlyArray<readonly [string, { update?: boolean; goneHint?: boolean; remembered?: Partial<RememberedNearby> }, boolean]> =
    [
      ['an update of a running executor the process remembers nothing of', { update: true }, true],
      [
        'an update of a running executor whose pod is remembered (its window may hold forgotten ones)',
        { update: true, remembered: { pod: running } },
        true,
      ],
      ['the add of an executor: optimistic create (a new executor’s Service rarely exists)', { update: false }, false],
      ['an update that says the executor went: its slot is read afresh anyway', { update: true, goneHint: true }, false],
    ];
  it.each(cases)('%s', (_name, c, want) => {
    const p = planExecutorEvent(
      { hint: running, slot: { appId: APP, execId: '8' }, goneHint: c.goneHint ?? false, update: c.update },
      { ...nothing, ...c.remembered },
      NOW,
    );
    expect(p.look.readClaimedServices === true).toBe(want);
    expect(p.look.readServicesFirst).toBe(false);
  });
});
