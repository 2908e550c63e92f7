/**
 * The rule book, one row per rule, written from the specification (issue "Never harm a live
 * executor") — the expected actions are literal, not computed with the code under test. Inputs
 * are Kubernetes objects as the API server returns them, reduced by the same parsers the
 * function uses.
 */
import { describe, expect, it } from 'vitest';
import { type Facts, type Observation, type Rules, type SlotFacts, decide } from './decide.ts';
import { Pod, Service } from '../model/k8s-objects.ts';
import { type ServiceFact, serviceFact } from '../model/service-spec.ts';
import { type PodFact, podFact } from '../model/spark-pod.ts';

const NS = 'spark';
const APP = 'spark-0123456789abcdef0123456789abcdef';
const SVC = `svc-${APP}-exec-1`;
const NOW = Date.parse('2026-12-03T12:00:00Z');
const HOUR_MS = 60 * 60_000;
const RULES: Rules = {
  optInMode: 'label',
  cooldownSeconds: 300,
  maxServicesPerNamespace: 100,
  maxServicesRecountMargin: 10,
  maxServicesPerApplication: 100,
  factTtlMs: 10_000,
};
const DRIVER = { name: 'pi-driver', uid: 'driver-uid' };
const EXEC = { name: 'pi-exec-1', uid: 'exec-uid' };

interface PodSpec {
  name: string;
  uid: string;
  role?: 'driver' | 'executor' | 'none';
  app?: string;
  exec?: string;
  phase?: string;
  deleting?: boolean;
  owner?: { name: string; uid: string } | null;
  optIn?: boolean;
  port?: number | null;
}

function pod(spec: PodSpec): PodFact {
  const role = spec.role ?? 'executor';
  const labels: Record<string, string> = {};
  if (role !== 'none') labels['spark-role'] = role;
  if (role !== 'none') labels['spark-app-selector'] = spec.app ?? APP;
  if (role === 'executor') labels['spark-exec-id'] = spec.exec ?? '1';
  if (spec.optIn === true) labels['spark-exec-svc/enabled'] = 'true';
  const owner = spec.owner === undefined ? (role === 'executor' ? DRIVER : null) : spec.owner;
  const port = spec.port === undefined ? 7079 : spec.port;
  const body = {
    metadata: {
      name: spec.name,
      namespace: NS,
      uid: spec.uid,
      resourceVersion: '1',
      labels,
      ...(owner === null
        ? {}
        : { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: owner.name, uid: owner.uid, controller: true }] }),
      ...(spec.deleting === true ? { deletionTimestamp: '2026-12-03T11:59:00Z' } : {}),
    },
    spec: {
      containers: [{ name: 'c', env: port === null ? [] : [{ name: 'SPARK_JAVA_OPT_1', value: `-Dspark.blockManager.port=${port}` }] }],
    },
    status: { phase: spec.phase ?? 'Running' },
  };
  return podFact(Pod.parse(body), undefined)!;
}

const runningExecutor = (extra: Partial<PodSpec> = {}): PodFact => pod({ ...EXEC, ...extra });
const optedInDriver = (extra: Partial<PodSpec> = {}): PodFact => pod({ ...DRIVER, role: 'driver', optIn: true, ...extra });

interface SvcSpec {
  exec?: string;
  app?: string;
  executor?: { name: string; uid: string } | null;
  owner?: { name: string; uid: string } | null;
  port?: number;
  goneAt?: string;
  selector?: Record<string, string>;
  managed?: boolean;
  name?: string;
}

/** A Service as the API server returns one of ours (written out by hand from the spec). */
function svc(spec: SvcSpec = {}): ServiceFact {
  const app = spec.app ?? APP;
  const exec = spec.exec ?? '1';
  const executor = spec.executor === undefined ? EXEC : spec.executor;
  const owner = spec.owner === undefined ? DRIVER : spec.owner;
  const port = spec.port ?? 7079;
  const annotations: Record<string, string> = { 'spark-exec-svc/driver-pod': DRIVER.name };
  if (executor !== null)
    Object.assign(annotations, { 'spark-exec-svc/executor-pod': executor.name, 'spark-exec-svc/executor-uid': executor.uid });
  if (spec.goneAt !== undefined) annotations['spark-exec-svc/executor-gone-at'] = spec.goneAt;
  const body = {
    metadata: {
      name: spec.name ?? `svc-${app}-exec-${exec}`,
      namespace: NS,
      uid: 'svc-uid',
      resourceVersion: '42',
      labels:
        spec.managed === false
          ? { team: 'web' }
          : { 'app.kubernetes.io/managed-by': 'spark-exec-svc', 'spark-app-selector': app, 'spark-exec-id': exec },
      annotations,
      ...(owner === null
        ? {}
        : { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: owner.name, uid: owner.uid, controller: true }] }),
    },
    spec: {
      type: 'ClusterIP',
      selector: spec.selector ?? { 'spark-app-selector': app, 'spark-exec-id': exec },
      ports: [{ name: 'spark-block-manager', protocol: 'TCP', port, targetPort: port }],
    },
  };
  return serviceFact(Service.parse(body))!;
}

/** Read now, after the Service was read (order 10 > the Service's 1), unless a row says otherwise. */
const fresh = <T>(value: T, order = 10): Observation<T> => ({ value, at: NOW, fresh: true, order });
const remembered = <T>(value: T, ageMs = 1_000): Observation<T> => ({ value, at: NOW - ageMs, fresh: false, order: 0 });

interface World {
  pods?: Array<Observation<PodFact | 'absent'> & { name?: string }>;
  service?: Observation<ServiceFact | 'absent'> | undefined;
  claimants?: Observation<readonly string[]> | undefined;
  count?: number | undefined;
  /** The order of the Service's read among this reconciliation's reads (default 1: first). */
  serviceOrder?: number;
  countRemembered?: boolean;
  rules?: Partial<Rules>;
  now?: number;
}

function run(world: World) {
  const pods = new Map<string, Observation<PodFact | 'absent'>>();
  for (const p of world.pods ?? []) pods.set(p.value === 'absent' ? p.name! : p.value.name, p);
  // The Service is read first in every row (order 1); rows that read it later say so with their own orders.
  const service =
    world.service === undefined ? undefined : { ...world.service, order: world.service.fresh ? (world.serviceOrder ?? 1) : 0 };
  const slot: SlotFacts = { appId: APP, execId: '1', service, claimants: world.claimants };
  const count = world.count === undefined ? undefined : world.countRemembered === true ? remembered(world.count) : fresh(world.count);
  const facts: Facts = { namespace: NS, pods, slots: [slot], ourServiceCount: count };
  return decide(facts, { ...RULES, ...world.rules }, world.now ?? NOW);
}

const absentPod = (name: string): Observation<'absent'> & { name: string } => ({ ...fresh('absent' as const), name });

/** The one action of a decision, or its needs. */
function outcome(world: World): string {
  const d = run(world);
  if (d.needs.length > 0) return `need ${d.needs.map((n) => (n.kind === 'pod' ? `pod:${n.name}` : n.kind)).join(',')}`;
  return d.actions.map((a) => (a.kind === 'report' ? `${a.outcome}` : a.kind === 'patch' ? a.outcome : a.kind)).join(',');
}

/** Running, opted-in executors of the driver, freshly listed and read, whose Services do not exist yet. */
function executorsWaitingForServices(ids: readonly string[]): { pods: Map<string, Observation<PodFact | 'absent'>>; slots: SlotFacts[] } {
  const execs = ids.map((id) => runningExecutor({ name: `pi-exec-${id}`, uid: `exec-uid-${id}`, exec: id }));
  const pods = new Map<string, Observation<PodFact | 'absent'>>([
    [DRIVER.name, fresh(optedInDriver())],
    ...execs.map((e): [string, Observation<PodFact>] => [e.name, fresh(e)]),
  ]);
  const slots: SlotFacts[] = execs.map((e) => ({
    appId: APP,
    execId: e.execId!,
    service: fresh('absent' as const, 1),
    claimants: fresh([e.name]),
  }));
  return { pods, slots };
}

describe('creating: only for an executor the API server shows running, with a running driver', () => {
  const base: World = {
    pods: [fresh(runningExecutor()), fresh(optedInDriver())],
    service: fresh('absent'),
    claimants: fresh([EXEC.name]),
    count: 0,
  };
  it.each<[string, World, string]>([
    ['running, opted in through the driver, no Service → create', base, 'create'],
    ['Service not read yet → create anyway (the create fails if one exists)', { ...base, service: undefined }, 'create'],
    [
      'opted in on the executor only',
      { ...base, pods: [fresh(runningExecutor({ optIn: true })), fresh(optedInDriver({ optIn: false }))] },
      'create',
    ],
    ['neither opted in → ignored', { ...base, pods: [fresh(runningExecutor()), fresh(optedInDriver({ optIn: false }))] }, 'ignored'],
    [
      'OPT_IN_MODE=all',
      { ...base, pods: [fresh(runningExecutor()), fresh(optedInDriver({ optIn: false }))], rules: { optInMode: 'all' } },
      'create',
    ],
    ['no block-manager port → skipped', { ...base, pods: [fresh(runningExecutor({ port: null })), fresh(optedInDriver())] }, 'skipped'],
    [
      'no controller owner (client mode without a driver pod) → skipped',
      { ...base, pods: [fresh(runningExecutor({ owner: null, optIn: true }))] },
      'skipped',
    ],
    [
      'owner is a notebook pod without Spark labels (client mode) → create',
      {
        ...base,
        pods: [
          fresh(runningExecutor({ owner: { name: 'notebook', uid: 'nb' } })),
          fresh(pod({ name: 'notebook', uid: 'nb', role: 'none', optIn: true })),
        ],
      },
      'create',
    ],
    ['driver absent → skipped', { ...base, pods: [fresh(runningExecutor()), absentPod(DRIVER.name)] }, 'skipped'],
    ['driver finished → skipped', { ...base, pods: [fresh(runningExecutor()), fresh(optedInDriver({ phase: 'Succeeded' }))] }, 'skipped'],
    [
      'driver replaced (same name, other UID) → skipped',
      { ...base, pods: [fresh(runningExecutor()), fresh(optedInDriver({ uid: 'other' }))] },
      'skipped',
    ],
    [
      'executor terminal → nothing to create',
      { ...base, pods: [fresh(runningExecutor({ phase: 'Failed' })), fresh(optedInDriver())] },
      'verified',
    ],
    [
      'executor terminal, Service not read → read it',
      { ...base, service: undefined, pods: [fresh(runningExecutor({ phase: 'Failed' })), fresh(optedInDriver())] },
      'need service',
    ],
    [
      'executor being deleted but running → create',
      { ...base, pods: [fresh(runningExecutor({ deleting: true })), fresh(optedInDriver())] },
      'create',
    ],
    [
      'two running pods claim the slot → conflict, nothing created',
      {
        ...base,
        pods: [fresh(runningExecutor()), fresh(runningExecutor({ name: 'copy', uid: 'copy' })), fresh(optedInDriver())],
        claimants: fresh([EXEC.name, 'copy']),
      },
      'conflict',
    ],
    // Issue 17 class 2: only a running executor claims its slot.
    [
      'executor Pending (not running yet) → nothing created',
      { ...base, pods: [fresh(runningExecutor({ phase: 'Pending' })), fresh(optedInDriver())] },
      'verified',
    ],
    [
      'executor Pending, Service not read → nothing to read either (its Service is made when it runs)',
      { ...base, service: undefined, pods: [fresh(runningExecutor({ phase: 'Pending' })), fresh(optedInDriver())] },
      'verified',
    ],
    [
      'a running executor and a Pending copy claim the slot → the running one gets its Service',
      {
        ...base,
        pods: [fresh(runningExecutor()), fresh(runningExecutor({ name: 'copy', uid: 'copy', phase: 'Pending' })), fresh(optedInDriver())],
        claimants: fresh([EXEC.name, 'copy']),
      },
      'create',
    ],
    [
      'a running executor and Pending copies owned by another pod → the running one gets its Service',
      {
        ...base,
        pods: [
          fresh(runningExecutor()),
          fresh(runningExecutor({ name: 'copy-1', uid: 'c1', phase: 'Pending', owner: { name: 'tenant', uid: 't' } })),
          fresh(runningExecutor({ name: 'copy-2', uid: 'c2', phase: 'Pending' })),
          fresh(optedInDriver()),
          fresh(pod({ name: 'tenant', uid: 't', role: 'driver', optIn: true })),
        ],
        claimants: fresh([EXEC.name, 'copy-1', 'copy-2']),
      },
      'create',
    ],
    [
      'executor phase Unknown (node lost) → nothing created (a Service made before stays: marking rows)',
      { ...base, pods: [fresh(runningExecutor({ phase: 'Unknown' })), fresh(optedInDriver())] },
      'verified',
    ],
    [
      'executor remembered for longer than the TTL → read it',
      { ...base, pods: [remembered(runningExecutor(), 20_000), fresh(optedInDriver())] },
      `need pod:${EXEC.name}`,
    ],
    [
      'executor remembered within the TTL → create',
      { ...base, pods: [remembered(runningExecutor(), 5_000), remembered(optedInDriver(), 5_000)] },
      'create',
    ],
    // Issue 17, class 8: the API server's clock was set back (NTP restored) after these were read:
    // a fact dated ahead of now has no known age.
    [
      'executor remembered, dated an hour ahead of now (the clock was set back since) → read it',
      { ...base, pods: [remembered(runningExecutor(), -HOUR_MS), fresh(optedInDriver())] },
      `need pod:${EXEC.name}`,
    ],
    [
      'driver remembered, dated an hour ahead of now → read it',
      { ...base, pods: [fresh(runningExecutor()), remembered(optedInDriver(), -HOUR_MS)] },
      `need pod:${DRIVER.name}`,
    ],
    [
      'driver remembered for longer than the TTL → read it',
      { ...base, pods: [fresh(runningExecutor()), remembered(optedInDriver(), 20_000)] },
      `need pod:${DRIVER.name}`,
    ],
    ['driver not known → read it', { ...base, pods: [fresh(runningExecutor())] }, `need pod:${DRIVER.name}`],
    ['claimants not listed → list them', { ...base, claimants: undefined }, 'need claimants'],
    ['Services of ours not counted → count them', { ...base, count: undefined }, 'need service-count'],
    ['namespace at the cap (counted now) → skipped', { ...base, count: 100 }, 'skipped'],
    [
      'namespace at the cap by a remembered count → count again (GC and other instances lower it unseen)',
      { ...base, count: 100, countRemembered: true },
      'need service-count',
    ],
    // Issue 17, class 5: a remembered count misses other instances' creates. Cap 100, margin 10.
    [
      'remembered count 89: this create stays under cap − margin → created without a count',
      { ...base, count: 89, countRemembered: true },
      'create',
    ],
    [
      'remembered count 90: this create would cross cap − margin → count again first',
      { ...base, count: 90, countRemembered: true },
      'need service-count',
    ],
    ['counted now 99, within the margin → created', { ...base, count: 99 }, 'create'],
  ])('%s', (_name, world, expected) => {
    expect(outcome(world)).toBe(expected);
  });

  it('records the executor incarnation and its driver on the Service it creates', () => {
    const [action] = run(base).actions;
    expect(action).toMatchObject({
      kind: 'create',
      body: {
        metadata: {
          name: SVC,
          annotations: {
            'spark-exec-svc/executor-pod': EXEC.name,
            'spark-exec-svc/executor-uid': EXEC.uid,
            'spark-exec-svc/driver-pod': DRIVER.name,
          },
          ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: DRIVER.name, uid: DRIVER.uid, controller: true }],
        },
        spec: {
          type: 'ClusterIP',
          selector: { 'spark-app-selector': APP, 'spark-exec-id': '1' },
          ports: [{ port: 7079, targetPort: 7079 }],
        },
      },
    });
  });

  it('creates decided together count toward the cap: 97 Services and 5 executors waiting → 3 created, 2 skipped', () => {
    const { pods, slots } = executorsWaitingForServices(['1', '2', '3', '4', '5']);
    const decision = decide({ namespace: NS, pods, slots, ourServiceCount: fresh(97) }, RULES, NOW);
    const kinds = decision.actions.map((a) => (a.kind === 'report' ? a.outcome : a.kind));
    expect(kinds.filter((k) => k === 'create')).toHaveLength(3);
    expect(kinds.filter((k) => k === 'skipped')).toHaveLength(2);
  });
});

describe('keeping: a running executor’s Service stays its own', () => {
  const base: World = { pods: [fresh(runningExecutor()), fresh(optedInDriver())], service: fresh(svc()), claimants: fresh([EXEC.name]) };
  it.each<[string, World, string]>([
    ['not ours → conflict, untouched', { ...base, service: fresh(svc({ managed: false })) }, 'conflict'],
    ['ours, right → verified', base, 'verified'],
    [
      'ours, right, everything remembered → verified without a read',
      { ...base, pods: [remembered(runningExecutor()), remembered(optedInDriver())], claimants: undefined, service: remembered(svc()) },
      'verified',
    ],
    ['drifted port, executor read now → patched', { ...base, service: fresh(svc({ port: 7000 })) }, 'patched'],
    // Issue 17, class 7: one port per executor incarnation, whatever each instance's BLOCK_MANAGER_PORT.
    [
      'port known only from this instance’s BLOCK_MANAGER_PORT (7080), the Service made with 7079 for this same executor → verified, never patched',
      {
        ...base,
        pods: [fresh({ ...runningExecutor({ port: null }), port: { ok: true, port: 7080, source: 'default' } }), fresh(optedInDriver())],
      },
      'verified',
    ],
    [
      '… and a marked one is only unmarked, its port kept',
      {
        ...base,
        pods: [fresh({ ...runningExecutor({ port: null }), port: { ok: true, port: 7080, source: 'default' } }), fresh(optedInDriver())],
        service: fresh(svc({ goneAt: '2026-12-03T11:58:00Z' })),
      },
      'unmarked',
    ],
    [
      'drifted port, executor only remembered → read it first',
      { ...base, pods: [remembered(runningExecutor()), fresh(optedInDriver())], service: fresh(svc({ port: 7000 })) },
      `need pod:${EXEC.name}`,
    ],
    ['marked gone, executor runs (read now) → unmarked', { ...base, service: fresh(svc({ goneAt: '2026-12-03T11:58:00Z' })) }, 'unmarked'],
    [
      'marked gone, executor remembered alive from before the mark → read it',
      {
        ...base,
        pods: [remembered(runningExecutor(), 10 * 60_000), fresh(optedInDriver())],
        service: fresh(svc({ goneAt: '2026-12-03T11:58:00Z' })),
      },
      `need pod:${EXEC.name}`,
    ],
    [
      'marked gone, executor remembered alive dated an hour ahead of now (read before the clock was set back, so before the mark) → read it',
      {
        ...base,
        pods: [remembered(runningExecutor(), -HOUR_MS), fresh(optedInDriver())],
        service: fresh(svc({ goneAt: '2026-12-03T11:58:00Z' })),
      },
      `need pod:${EXEC.name}`,
    ],
    [
      'marked gone, executor seen running by a read begun before the Service was read and before the mark → read it (the mark may be newer)',
      {
        ...base,
        pods: [{ ...fresh(runningExecutor(), 5), at: NOW - 5_000 }, fresh(optedInDriver())],
        claimants: fresh([EXEC.name], 5),
        service: fresh(svc({ goneAt: new Date(NOW - 2_000).toISOString() })),
        serviceOrder: 20,
      },
      `need pod:${EXEC.name}`,
    ],
    ['owner not known → read it (the only thing needed)', { ...base, pods: [fresh(runningExecutor())] }, `need pod:${DRIVER.name}`],
    [
      'a tenant pod claims the slot while the recorded executor runs → verified, nothing rewritten',
      {
        ...base,
        pods: [
          fresh(runningExecutor()),
          fresh(runningExecutor({ name: 'tenant', uid: 't', owner: { name: 'tenant-owner', uid: 'to' } })),
          fresh(optedInDriver()),
        ],
        claimants: fresh([EXEC.name, 'tenant']),
      },
      'verified',
    ],
    ['our label but no executor recorded, driver runs → conflict', { ...base, service: fresh(svc({ executor: null })) }, 'conflict'],
    ['labels name another slot (name collision) → conflict', { ...base, service: fresh(svc({ name: SVC, exec: '2' })) }, 'conflict'],
    [
      'records another executor of the same slot that runs → verified (not re-pointed)',
      {
        ...base,
        pods: [fresh(runningExecutor({ name: 'other', uid: 'o' })), fresh(runningExecutor()), fresh(optedInDriver())],
        service: fresh(svc({ executor: { name: 'other', uid: 'o' } })),
        claimants: fresh(['other', EXEC.name]),
      },
      'verified',
    ],
  ])('%s', (_name, world, expected) => {
    expect(outcome(world)).toBe(expected);
  });

  it('patches within the identity only: the selector is replaced (extra keys nulled), never the owner', () => {
    const [action] = run({
      ...base,
      service: fresh(svc({ selector: { 'spark-app-selector': APP, 'spark-exec-id': '9', extra: 'x' } })),
    }).actions;
    expect(action).toMatchObject({ kind: 'patch', outcome: 'patched' });
    const patch = (action as unknown as { patch: { metadata: Record<string, unknown>; spec: Record<string, unknown> } }).patch;
    expect(patch.spec['selector']).toEqual({ 'spark-app-selector': APP, 'spark-exec-id': '1', extra: null });
    expect(patch.metadata['ownerReferences']).toBeUndefined();
  });
});

describe('marking and ending: only for an executor verified gone', () => {
  const gone: World = { pods: [absentPod(EXEC.name), fresh(optedInDriver())], service: fresh(svc()), claimants: fresh([]) };
  it.each<[string, World, string]>([
    ['recorded executor absent (read now) → marked gone', gone, 'marked-gone'],
    ['absent from a fresh list of the slot’s pods → marked gone', { ...gone, pods: [fresh(optedInDriver())] }, 'marked-gone'],
    [
      'terminal → marked gone',
      { ...gone, pods: [fresh(runningExecutor({ phase: 'Succeeded' })), fresh(optedInDriver())], claimants: fresh([EXEC.name]) },
      'marked-gone',
    ],
    [
      'replaced (same name, other UID, another owner) → marked gone',
      {
        ...gone,
        pods: [fresh(runningExecutor({ uid: 'new', owner: { name: 'x', uid: 'x' } })), fresh(optedInDriver())],
        claimants: fresh([EXEC.name]),
      },
      'marked-gone',
    ],
    [
      'replaced by a running pod with the same driver → kept (it carries the labels and the owner)',
      { ...gone, pods: [fresh(runningExecutor({ uid: 'new' })), fresh(optedInDriver())], claimants: fresh([EXEC.name]) },
      'conflict',
    ],
    [
      'replaced by a running pod with the same driver but another port → marked (the Service cannot reach it)',
      { ...gone, pods: [fresh(runningExecutor({ uid: 'new', port: 9999 })), fresh(optedInDriver())], claimants: fresh([EXEC.name]) },
      'marked-gone',
    ],
    [
      'being deleted but running → kept unmarked',
      { ...gone, pods: [fresh(runningExecutor({ deleting: true })), fresh(optedInDriver())], claimants: fresh([EXEC.name]) },
      'verified',
    ],
    [
      'remembered terminal (not read now) → read again, never marked on memory',
      { ...gone, pods: [remembered(runningExecutor({ phase: 'Failed' })), fresh(optedInDriver())], claimants: remembered([EXEC.name]) },
      'need claimants',
    ],
    [
      'remembered running, but a fresh list of the slot’s pods lacks it (deleted or relabelled) → marked gone',
      { ...gone, pods: [remembered(runningExecutor()), fresh(optedInDriver())], claimants: fresh([]) },
      'marked-gone',
    ],
    ['recorded gone but the slot’s pods only remembered → list them', { ...gone, claimants: remembered([]) }, 'need claimants'],
    ['recorded gone but the slot’s pods not listed → list them', { ...gone, claimants: undefined }, 'need claimants'],
    [
      'the slot’s pods were listed BEFORE the Service was read (its executor may have started in between) → list again',
      { ...gone, pods: [fresh(optedInDriver())], claimants: fresh([], 1), serviceOrder: 5 },
      'need claimants',
    ],
    [
      'the recorded executor was read absent BEFORE the Service was read → read again',
      {
        ...gone,
        pods: [{ ...fresh('absent' as const, 1), name: EXEC.name }, fresh(optedInDriver())],
        claimants: undefined,
        serviceOrder: 5,
      },
      'need claimants',
    ],
    [
      'the driver was read replaced BEFORE the Service was read → read it again before calling the Service a stray',
      { ...gone, pods: [fresh(optedInDriver({ uid: 'new-driver' }), 1)], serviceOrder: 5 },
      `need pod:${DRIVER.name}`,
    ],
    [
      'a running pod with the same driver carries the labels (tenant copy) → kept, conflict reported',
      {
        ...gone,
        pods: [absentPod(EXEC.name), fresh(runningExecutor({ name: 'copy', uid: 'c' })), fresh(optedInDriver())],
        claimants: fresh(['copy']),
      },
      'conflict',
    ],
    [
      'issue 17: a Pending pod with the same driver carries the labels → it keeps nothing: marked gone',
      {
        ...gone,
        pods: [absentPod(EXEC.name), fresh(runningExecutor({ name: 'copy', uid: 'c', phase: 'Pending' })), fresh(optedInDriver())],
        claimants: fresh(['copy']),
      },
      'marked-gone',
    ],
    [
      'issue 17: the recorded executor itself is Pending (never gone: not terminal) → kept, never marked',
      { ...gone, pods: [fresh(runningExecutor({ phase: 'Pending' })), fresh(optedInDriver())], claimants: fresh([EXEC.name]) },
      'verified',
    ],
    [
      '… and a mark already there is removed',
      {
        ...gone,
        service: fresh(svc({ goneAt: '2026-12-03T11:00:00Z' })),
        pods: [absentPod(EXEC.name), fresh(runningExecutor({ name: 'copy', uid: 'c' })), fresh(optedInDriver())],
        claimants: fresh(['copy']),
      },
      'unmarked',
    ],
    [
      'a running pod with another owner carries the labels → marked anyway',
      {
        ...gone,
        pods: [
          absentPod(EXEC.name),
          fresh(runningExecutor({ name: 'copy', uid: 'c', owner: { name: 'x', uid: 'x' } })),
          fresh(optedInDriver()),
        ],
        claimants: fresh(['copy']),
      },
      'marked-gone',
    ],
    ['marked, cool-down over → deleted', { ...gone, service: fresh(svc({ goneAt: '2026-12-03T11:54:59Z' })) }, 'delete'],
    ['marked, cool-down running → verified', { ...gone, service: fresh(svc({ goneAt: '2026-12-03T11:55:01Z' })) }, 'verified'],
    [
      'marked, cool-down running, nothing read now → verified without a read (the mark was put on a fresh read; a UID never returns)',
      {
        service: remembered(svc({ goneAt: '2026-12-03T11:58:00Z' })),
        pods: [remembered(optedInDriver()), remembered(runningExecutor())],
        claimants: undefined,
      },
      'verified',
    ],
    [
      'marked, cool-down over, nothing read now → read before ending it',
      { service: remembered(svc({ goneAt: '2026-12-03T11:50:00Z' })), pods: [remembered(optedInDriver())], claimants: undefined },
      'need claimants',
    ],
    [
      'marked, COOLDOWN_SECONDS=0 → kept until the driver goes',
      { ...gone, service: fresh(svc({ goneAt: '2020-01-01T00:00:00Z' })), rules: { cooldownSeconds: 0 } },
      'verified',
    ],
    [
      'marked long ago but the executor runs again?? (same UID never returns) — runs means unmark',
      {
        ...gone,
        pods: [fresh(runningExecutor()), fresh(optedInDriver())],
        service: fresh(svc({ goneAt: '2020-01-01T00:00:00Z' })),
        claimants: fresh([EXEC.name]),
      },
      'unmarked',
    ],
    [
      'recorded executor runs but no longer carries the slot’s labels (read now) → marked gone, as the list says',
      { ...gone, pods: [fresh(runningExecutor({ exec: '9' })), fresh(optedInDriver())], claimants: fresh([]) },
      'marked-gone',
    ],
    [
      '… read by name alone it is gone too; the slot’s pods are listed before the mark',
      { ...gone, pods: [fresh(runningExecutor({ exec: '9' })), fresh(optedInDriver())], claimants: undefined },
      'need claimants',
    ],
    ['unparseable mark, executor gone → marked again', { ...gone, service: fresh(svc({ goneAt: 'garbage' })) }, 'marked-gone'],
  ])('%s', (_name, world, expected) => {
    expect(outcome(world)).toBe(expected);
  });

  it('the mark records the time of the decision', () => {
    const [action] = run(gone).actions;
    expect(action).toMatchObject({
      kind: 'patch',
      patch: { metadata: { annotations: { 'spark-exec-svc/executor-gone-at': '2026-12-03T12:00:00.000Z' } } },
    });
  });
});

describe('the driver: a Service goes with its own owner only', () => {
  const base: World = { pods: [fresh(runningExecutor())], service: fresh(svc()), claimants: undefined };
  it.each<[string, World, string]>([
    ['own owner absent (read now) → left to garbage collection', { ...base, pods: [absentPod(DRIVER.name)] }, 'collected'],
    ['own owner finished (pod kept) → deleted', { ...base, pods: [fresh(optedInDriver({ phase: 'Failed' }))] }, 'delete'],
    [
      'own owner remembered finished → read it first',
      { ...base, pods: [remembered(optedInDriver({ phase: 'Failed' }))] },
      `need pod:${DRIVER.name}`,
    ],
    [
      'own owner replaced, nobody waits for the name → collected',
      { ...base, pods: [fresh(optedInDriver({ uid: 'new-driver' }))] },
      'collected',
    ],
    [
      'own owner replaced, a new run’s running executor needs the name → stray deleted',
      {
        ...base,
        pods: [
          fresh(optedInDriver({ uid: 'new-driver' })),
          fresh(runningExecutor({ name: 'new-exec', uid: 'ne', owner: { name: DRIVER.name, uid: 'new-driver' } })),
        ],
        claimants: fresh(['new-exec']),
      },
      'delete',
    ],
    [
      'another live driver pod claims the app id: the Service’s own owner runs → verified',
      { ...base, pods: [fresh(runningExecutor()), fresh(optedInDriver()), fresh(pod({ name: 'imposter', uid: 'i', role: 'driver' }))] },
      'verified',
    ],
    [
      'no owner, recorded executor gone, no pod carries the labels → stray deleted',
      { ...base, service: fresh(svc({ owner: null })), pods: [absentPod(EXEC.name)], claimants: fresh([]) },
      'delete',
    ],
    [
      'no owner, recorded executor runs → left alone',
      { ...base, service: fresh(svc({ owner: null })), pods: [fresh(runningExecutor())], claimants: fresh([EXEC.name]) },
      'conflict',
    ],
  ])('%s', (_name, world, expected) => {
    expect(outcome(world)).toBe(expected);
  });
});

describe('every destructive action is justified by fresh facts', () => {
  it('no mark or delete is ever decided from remembered facts alone (exhaustive over small worlds)', () => {
    const executors = [
      runningExecutor(),
      runningExecutor({ phase: 'Failed' }),
      runningExecutor({ uid: 'other' }),
      runningExecutor({ deleting: true }),
    ];
    const drivers = [optedInDriver(), optedInDriver({ phase: 'Succeeded' }), optedInDriver({ uid: 'other' })];
    const services = [svc(), svc({ goneAt: '2026-12-03T11:00:00Z' }), svc({ goneAt: '2026-12-03T11:59:00Z' }), svc({ owner: null })];
    let checked = 0;
    for (const e of [...executors, 'absent' as const]) {
      for (const d of [...drivers, 'absent' as const]) {
        for (const s of services) {
          for (const claimants of [[EXEC.name], []]) {
            const pods = [
              e === 'absent' ? { ...remembered('absent' as const), name: EXEC.name } : remembered(e),
              d === 'absent' ? { ...remembered('absent' as const), name: DRIVER.name } : remembered(d),
            ];
            const decision = run({ pods, service: remembered(s), claimants: remembered(claimants) });
            for (const action of decision.actions) {
              expect(action.kind === 'delete' || (action.kind === 'patch' && action.outcome === 'marked-gone')).toBe(false);
            }
            checked++;
          }
        }
      }
    }
    expect(checked).toBe(5 * 4 * 4 * 2);
  });
});

/**
 * Issue 17, classes 3 and 4: caps that cannot be turned against users. One application holds at
 * most MAX_SERVICES_PER_APPLICATION Services; a create refused at a cap takes the place of a
 * gone-marked Service whose executor a read made for this decision finds gone — never of a live
 * executor's. Here: exec 1 runs and wants its Service; exec 9's (and exec 8's) Service is marked.
 */
describe('caps: dead executors’ Services give way, one application cannot take the namespace', () => {
  const DEAD = { name: 'pi-exec-9', uid: 'exec-uid-9' };
  const DEAD2 = { name: 'pi-exec-8', uid: 'exec-uid-8' };
  /** Listed by the count that found the cap (order 5: after the executor's own reads, before the candidates' reads at 10). */
  const marked = (who: { name: string; uid: string }, exec: string, goneAt: string, app = APP): SlotFacts => ({
    appId: app,
    execId: exec,
    service: fresh(svc({ exec, app, executor: who, goneAt }), 5),
    claimants: undefined,
  });
  interface CapWorld {
    count: Observation<number>;
    appCount?: Observation<number>;
    candidates?: SlotFacts[];
    pods?: Array<Observation<PodFact | 'absent'> & { name?: string }>;
    rules?: Partial<Rules>;
  }
  const live: Array<Observation<PodFact | 'absent'> & { name?: string }> = [fresh(runningExecutor()), fresh(optedInDriver())];
  function decideCap(w: CapWorld) {
    const pods = new Map<string, Observation<PodFact | 'absent'>>();
    for (const p of [...live, ...(w.pods ?? [])]) pods.set(p.value === 'absent' ? p.name! : p.value.name, p);
    const slot: SlotFacts = { appId: APP, execId: '1', service: fresh('absent', 1), claimants: fresh([EXEC.name]) };
    const facts: Facts = {
      namespace: NS,
      pods,
      slots: [slot],
      ourServiceCount: w.count,
      appServiceCounts: new Map(w.appCount === undefined ? [] : [[APP, w.appCount]]),
      markedServices: w.candidates,
    };
    return decide(facts, { ...RULES, ...w.rules }, NOW);
  }
  const summary = (w: CapWorld): string => {
    const d = decideCap(w);
    const acts = d.actions.map((a) =>
      a.kind === 'report'
        ? a.outcome
        : a.kind === 'patch'
          ? `${a.outcome} ${a.service.name}`
          : `${a.kind} ${a.kind === 'create' ? a.slot.execId : a.service.name}`,
    );
    const needs = d.needs.map((n) => (n.kind === 'pod' ? `pod:${n.name}` : n.kind === 'claimants' ? `claimants:${n.slot.execId}` : n.kind));
    return [...acts, ...needs.map((n) => `need ${n}`), ...d.waiting.map((s) => `waits ${s.execId}`)].join(', ');
  };
  const gone9 = [{ ...absentPod(DEAD.name) }];
  const listed9 = { ...marked(DEAD, '9', '2026-12-03T11:00:00Z'), claimants: fresh([] as string[]) };
  it.each<[string, CapWorld, string]>([
    ['namespace at the cap, no marked Service listed → skipped', { count: fresh(100), candidates: [] }, 'skipped'],
    [
      'at the cap, a marked Service whose executor is read gone and whose slot lists no pod → it is deleted, the create waits for the room',
      { count: fresh(100), candidates: [listed9], pods: gone9 },
      `delete svc-${APP}-exec-9, waits 1`,
    ],
    [
      '… with COOLDOWN_SECONDS=0 (kept until the driver goes) too',
      { count: fresh(100), candidates: [listed9], pods: gone9, rules: { cooldownSeconds: 0 } },
      `delete svc-${APP}-exec-9, waits 1`,
    ],
    [
      'the marked Service’s executor not read for this decision → its driver, executor and slot are read, the create waits',
      { count: fresh(100), candidates: [marked(DEAD, '9', '2026-12-03T11:00:00Z')] },
      `need claimants:9, need pod:${DEAD.name}, waits 1`,
    ],
    [
      '“gone” read before the Service was listed proves nothing → read again',
      {
        count: fresh(100),
        candidates: [marked(DEAD, '9', '2026-12-03T11:00:00Z')],
        pods: [{ ...fresh('absent' as const, 2), name: DEAD.name }],
      },
      `need claimants:9, need pod:${DEAD.name}, waits 1`,
    ],
    [
      'a wrong mark: its executor runs (read now) → never deleted; the mark is taken off, the create is skipped',
      { count: fresh(100), candidates: [listed9], pods: [fresh(runningExecutor({ ...DEAD, exec: '9' }))] },
      `unmarked svc-${APP}-exec-9, skipped`,
    ],
    [
      'executor gone, but a running pod of the same driver carries its labels → kept (unmarked), skipped',
      {
        count: fresh(100),
        candidates: [{ ...listed9, claimants: fresh(['copy-9']) }],
        pods: [...gone9, fresh(runningExecutor({ name: 'copy-9', uid: 'copy-uid', exec: '9' }))],
      },
      `unmarked svc-${APP}-exec-9, skipped`,
    ],
    [
      'oldest mark first',
      {
        count: fresh(100),
        candidates: [listed9, { ...marked(DEAD2, '8', '2026-12-03T10:00:00Z'), claimants: fresh([] as string[]) }].sort((a, b) =>
          String((a.service!.value as ServiceFact).goneAt).localeCompare(String((b.service!.value as ServiceFact).goneAt)),
        ),
        pods: [...gone9, absentPod(DEAD2.name)],
      },
      `delete svc-${APP}-exec-8, waits 1`,
    ],
    // MAX_SERVICES_PER_APPLICATION 10, margin 2 (cap 100).
    [
      'namespace holds 7: this application cannot hold 10 → created without counting it',
      { count: fresh(7), rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 } },
      'create 1',
    ],
    [
      'namespace holds 8 → count the application',
      { count: fresh(8), rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 } },
      'need app-service-count, waits 1',
    ],
    [
      'application remembered at 8 of 10, margin 2 → count it afresh',
      { count: fresh(50), appCount: remembered(8), rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 } },
      'need app-service-count, waits 1',
    ],
    [
      'application remembered at 7 → created',
      { count: fresh(50), appCount: remembered(7), rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 } },
      'create 1',
    ],
    [
      'application counted now at its cap, another application’s marked Service listed → not taken: skipped, naming the application’s cap',
      {
        count: fresh(50),
        appCount: fresh(10),
        candidates: [{ ...marked(DEAD, '9', '2026-12-03T11:00:00Z', 'spark-other'), claimants: fresh([] as string[]) }],
        pods: gone9,
        rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 },
      },
      'skipped',
    ],
    [
      'application at its cap, one of its own marked Services gone → it gives way',
      {
        count: fresh(50),
        appCount: fresh(10),
        candidates: [listed9],
        pods: gone9,
        rules: { maxServicesPerApplication: 10, maxServicesRecountMargin: 2 },
      },
      `delete svc-${APP}-exec-9, waits 1`,
    ],
  ])('%s', (_name, world, expected) => {
    expect(summary(world)).toBe(expected);
  });

  it('the reason names the cap that refused it', () => {
    const [report] = decideCap({ count: fresh(50), appCount: fresh(10), rules: { maxServicesPerApplication: 10 } }).actions;
    expect(report).toMatchObject({ kind: 'report', outcome: 'skipped' });
    expect(report?.kind === 'report' && report.why).toMatch(/holds 10 Services of ours, its cap is 10 \(MAX_SERVICES_PER_APPLICATION\)/);
  });

  it('creates decided together count toward the application’s cap: 8 of 10 held, 3 executors waiting → 2 created, 1 skipped', () => {
    const { pods, slots } = executorsWaitingForServices(['1', '2', '3']);
    const facts: Facts = { namespace: NS, pods, slots, ourServiceCount: fresh(20), appServiceCounts: new Map([[APP, fresh(8)]]) };
    const kinds = decide(facts, { ...RULES, maxServicesPerApplication: 10, maxServicesRecountMargin: 2 }, NOW).actions.map((a) =>
      a.kind === 'report' ? a.outcome : a.kind,
    );
    expect(kinds).toEqual(['create', 'create', 'skipped']);
  });
});
