/**
 * Trust model under attack (docs/reliability.md, "What a tenant or a forged event can and cannot
 * do"). Two attackers:
 *  - a TENANT who may only create and delete pods in a watched namespace (so may label them as
 *    anyone's executor or driver, and copy any owner reference it can read), and
 *  - a SENDER OF FORGED CLOUDEVENTS (the function's URL is reachable from every pod): any event
 *    type, any pod JSON, including the victim's real pods with their real UIDs.
 * Neither may make the function harm a live executor. Every scenario sets up a real victim
 * application over HTTP (driver opted in, executors owned by it, Services made by real add
 * events), then attacks, and after EVERY step reads the emulator and checks the invariant,
 * written here from the specification (not from shared/decide.ts and friends):
 *
 *   for every live, opted-in executor pod (exists, phase not Succeeded/Failed; being deleted
 *   still counts) whose controller owner pod (v1 Pod, controller: true) lives (that name with
 *   that UID exists, not Succeeded/Failed): the Service executorServiceName(appId, execId)
 *   exists, carries no spark-exec-svc/executor-gone-at, has exactly one ownerReference = that
 *   driver (name and uid), selects {spark-app-selector: appId, spark-exec-id: execId}, and its
 *   spec.ports[0].port is the executor's block-manager port.
 *
 * When a tenant's copy runs next to the genuine executor in the same slot, one Service cannot
 * serve both drivers; the invariant then protects the genuine executor (the test knows which
 * pods are the victim's) and owes the copy nothing. Forged events must cause no Service write at
 * all (the API server's state never justifies one). Every harness is audited (request log:
 * no pod writes, nothing outside the namespace, nothing foreign written).
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/naming.ts';
import type { RequestRecord } from '../../packages/kube-emulator/index.ts';
import { sweepEvent } from '../model/world.ts';
import { NS, audited, sleep, useAudit } from '../support/audited.ts';
import type { PostedReply } from '../../testkit/apiserversource.ts';
import type { Harness, HarnessOptions } from '../../testkit/harness.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, nonSparkPod, sparkAppId } from '../../testkit/spark-pods.ts';

useAudit();

// ---- the invariant, from the specification ------------------------------------------------------

const TERMINAL = new Set(['Succeeded', 'Failed']);
/** Executor ids Spark assigns: canonical decimal integers >= 1. */
const SPARK_EXEC_ID = /^[1-9][0-9]*$/;
const GONE_AT = 'spark-exec-svc/executor-gone-at';
const ENABLED = 'spark-exec-svc/enabled';
const HOLD = 'example.com/hold';

interface PodObj {
  metadata: {
    name: string;
    uid: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
    deletionTimestamp?: string;
  };
  spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> };
  status?: { phase?: string };
}

interface SvcObj {
  metadata: { name: string; resourceVersion: string; labels?: Record<string, string>; annotations?: Record<string, string>; ownerReferences?: Array<Record<string, unknown>> };
  spec?: { selector?: Record<string, string>; ports?: Array<{ port?: number }> };
}

const optedIn = (pod: PodObj): boolean => pod.metadata.labels?.[ENABLED] === 'true' || pod.metadata.annotations?.[ENABLED] === 'true';
const podLives = (pod: PodObj | undefined, uid?: string): pod is PodObj =>
  pod !== undefined && (uid === undefined || pod.metadata.uid === uid) && !TERMINAL.has(pod.status?.phase ?? '');

/** README "Block-manager port": the pod annotation, then -Dspark.blockManager.port in SPARK_JAVA_OPT_n, then BLOCK_MANAGER_PORT; 0 = unset. */
function blockManagerPort(pod: PodObj, fallback: number | undefined): number | undefined {
  const valid = (n: number): number | undefined => (Number.isInteger(n) && n >= 1 && n <= 65535 ? n : undefined);
  const annotated = pod.metadata.annotations?.['spark-exec-svc/block-manager-port'];
  if (annotated !== undefined) return valid(Number(annotated));
  for (const c of pod.spec?.containers ?? []) {
    for (const e of c.env ?? []) {
      const m = /^SPARK_JAVA_OPT_\d+$/.test(e.name) ? /-Dspark\.blockManager\.port=(\d+)/.exec(e.value ?? '') : null;
      if (m !== null && Number(m[1]) !== 0) return valid(Number(m[1]));
    }
  }
  return fallback;
}

interface Owed {
  readonly pod: PodObj;
  readonly appId: string;
  readonly execId: string;
  readonly driver: { name: string; uid: string };
  readonly port: number;
}

function serviceProblems(svc: SvcObj | undefined, owed: Owed): string[] {
  if (svc === undefined) return ['missing'];
  const p: string[] = [];
  if (svc.metadata.annotations?.[GONE_AT] !== undefined) p.push(`marked gone (${svc.metadata.annotations[GONE_AT]})`);
  const owners = svc.metadata.ownerReferences ?? [];
  if (owners.length !== 1 || owners[0]!['name'] !== owed.driver.name || owners[0]!['uid'] !== owed.driver.uid) {
    p.push(`owners ${JSON.stringify(owners.map((o) => `${o['name']}/${o['uid']}`))}, want ${owed.driver.name}/${owed.driver.uid}`);
  }
  const selector = svc.spec?.selector ?? {};
  const want = { 'spark-app-selector': owed.appId, 'spark-exec-id': owed.execId };
  if (Object.keys(selector).length !== 2 || selector['spark-app-selector'] !== want['spark-app-selector'] || selector['spark-exec-id'] !== want['spark-exec-id']) {
    p.push(`selector ${JSON.stringify(selector)}`);
  }
  if (svc.spec?.ports?.[0]?.port !== owed.port) p.push(`port ${svc.spec?.ports?.[0]?.port}, want ${owed.port}`);
  return p;
}

/**
 * Every breach of the invariant in the emulator now; [] = holds. `genuine`: the victim's pods,
 * which win a slot that a tenant's copy also claims. `cap`: MAX_SERVICES_PER_NAMESPACE, when a
 * missing Service is allowed because the namespace is full.
 */
function invariantProblems(h: Harness, genuine: ReadonlySet<string>, cap?: number): string[] {
  const pods = h.emulator.listObjects('pods', NS) as unknown as PodObj[];
  const byName = new Map(pods.map((p) => [p.metadata.name, p]));
  const owedBySvc = new Map<string, Owed[]>();
  for (const pod of pods) {
    const labels = pod.metadata.labels ?? {};
    const appId = labels['spark-app-selector'];
    const execId = labels['spark-exec-id'];
    if (labels['spark-role'] !== 'executor' || !appId || execId === undefined || !SPARK_EXEC_ID.test(execId) || !podLives(pod)) continue;
    const owner = (pod.metadata.ownerReferences ?? []).find((r) => r.controller === true && r.kind === 'Pod' && r.apiVersion === 'v1');
    if (owner === undefined) continue;
    const driver = byName.get(owner.name);
    if (!podLives(driver, owner.uid)) continue;
    if (!optedIn(pod) && !optedIn(driver)) continue;
    const port = blockManagerPort(pod, h.config.defaultBlockManagerPort);
    if (port === undefined) continue;
    const name = executorServiceName(appId, execId);
    owedBySvc.set(name, [...(owedBySvc.get(name) ?? []), { pod, appId, execId, driver: { name: owner.name, uid: owner.uid }, port }]);
  }
  const ours = h.emulator.listObjects('services', NS, 'app.kubernetes.io/managed-by=spark-exec-svc').length;
  const problems: string[] = [];
  for (const [name, claims] of owedBySvc) {
    const svc = h.emulator.getObject('services', NS, name) as unknown as SvcObj | undefined;
    if (svc === undefined && cap !== undefined && ours >= cap) continue;
    const verdicts = claims.map((c) => ({ pod: c.pod.metadata.name, problems: serviceProblems(svc, c) }));
    const mine = verdicts.filter((v) => genuine.has(v.pod));
    const mustHold = mine.length > 0 ? mine : verdicts.length === 1 ? verdicts : [];
    for (const v of mustHold) problems.push(...v.problems.map((p) => `Service ${name} of live executor ${v.pod}: ${p}`));
    if (mustHold.length === 0 && !verdicts.some((v) => v.problems.length === 0)) {
      problems.push(`Service ${name}, claimed by ${verdicts.map((v) => v.pod).join(', ')}, serves none of them: ${JSON.stringify(verdicts)}`);
    }
  }
  return problems;
}

// ---- helpers ----------------------------------------------------------------------------------

const SERVICE_WRITES = new Set(['create', 'patch', 'update', 'delete', 'deletecollection']);
const serviceWrites = (h: Harness): RequestRecord[] => h.emulator.requests.filter((r) => r.resource === 'services' && SERVICE_WRITES.has(r.verb));
const describeWrites = (rs: readonly RequestRecord[]): string[] => rs.map((r) => `${r.verb} ${r.name ?? r.path} → ${r.status}`);

/** The pod as the API server holds it now (what a real event would carry). */
const current = (h: Harness, name: string): PodBody => {
  const pod = h.emulator.getObject('pods', NS, name);
  if (pod === undefined) throw new Error(`pod ${name} does not exist`);
  return pod as unknown as PodBody;
};
const ref = (pod: PodBody): { name: string; uid: string } => ({ name: pod.metadata.name, uid: pod.metadata.uid! });
/** Creates a pod carrying a finalizer: DELETE then only sets deletionTimestamp (graceful deletion). */
const withHold = (pod: PodBody): PodBody => ({ ...pod, metadata: { ...pod.metadata, finalizers: [HOLD] } }) as PodBody;
const claiming = (pod: PodBody, change: { phase?: string; deleting?: boolean; uid?: string }): PodBody => ({
  ...pod,
  metadata: {
    ...pod.metadata,
    ...(change.uid === undefined ? {} : { uid: change.uid }),
    ...(change.deleting === true ? { deletionTimestamp: new Date().toISOString() } : {}),
  },
  status: { ...pod.status, ...(change.phase === undefined ? {} : { phase: change.phase }) },
});

/** One scenario: a harness, the victim's pods, and steps that each end with the invariant check. */
class Scene {
  readonly h: Harness;
  readonly genuine = new Set<string>();
  private readonly cap: number | undefined;
  private steps = 0;
  constructor(h: Harness, cap?: number) {
    this.h = h;
    this.cap = cap;
  }

  check(step: string): void {
    this.steps++;
    expect(invariantProblems(this.h, this.genuine, this.cap), `invariant after step ${this.steps}: ${step}`).toEqual([]);
  }

  /** A real ApiServerSource event (Resource mode), answered 200. */
  async event(verb: 'add' | 'update' | 'delete', pod: PodBody, to: Harness = this.h): Promise<PostedReply> {
    const reply = await to.send(verb, pod);
    expect(reply.status, `${verb} ${pod.metadata.name}: ${reply.text}`).toBe(200);
    this.check(`${verb} ${pod.metadata.name} (phase ${pod.status.phase}${pod.metadata.deletionTimestamp ? ', deleting' : ''}) → ${reply.data?.action}`);
    return reply;
  }

  /**
   * Runs `attack` and asserts it wrote no Service: no create, patch or delete took effect. A
   * request the API server refused with 409 changed nothing: a create answered AlreadyExists
   * (with nothing remembered the function creates optimistically and reads the Service on the
   * 409), or a patch/delete whose resourceVersion/uid precondition no longer held (decided on a
   * remembered version of the Service; the function then reads it and decides again).
   */
  async noWrite<T>(what: string, attack: () => Promise<T>): Promise<T> {
    const before = serviceWrites(this.h).length;
    const result = await attack();
    const writes = serviceWrites(this.h)
      .slice(before)
      .filter((r) => r.status !== 409);
    expect(describeWrites(writes), `Service writes caused by: ${what}`).toEqual([]);
    return result;
  }

  /** A forged Resource-mode event: answered 2xx, no write, invariant holds. */
  forged(verb: 'add' | 'update' | 'delete', pod: PodBody, to: Harness = this.h, mode: 'binary' | 'structured' = 'binary'): Promise<PostedReply> {
    return this.noWrite(`forged ${verb} of ${pod.metadata.name}`, async () => {
      const reply = await to.send(verb, pod, mode);
      expect(reply.status, `forged ${verb} ${pod.metadata.name}: ${reply.text}`).toBe(200);
      this.check(`forged ${verb} ${pod.metadata.name} (phase ${pod.status.phase}) → ${reply.data?.action}`);
      return reply;
    });
  }

  /** A forged Reference-mode event. */
  forgedRef(verb: 'add' | 'update' | 'delete', name: string, to: Harness = this.h): Promise<PostedReply> {
    return this.noWrite(`forged reference ${verb} of ${name}`, async () => {
      const reply = await to.sendRef(verb, NS, name);
      expect(reply.status, `forged ref ${verb} ${name}: ${reply.text}`).toBe(200);
      this.check(`forged reference ${verb} ${name} → ${reply.data?.action}`);
      return reply;
    });
  }

  async sweep(label = 'sweep', to: Harness = this.h): Promise<PostedReply> {
    const reply = await sweepEvent(to.url, `sweep-${Math.random().toString(36).slice(2)}`);
    expect(reply.status, `${label}: ${reply.text}`).toBe(200);
    this.check(label);
    return reply;
  }

  /** A state change in the cluster (not through the function), followed by the check. */
  change(what: string, fn: () => void): void {
    fn();
    this.check(what);
  }
}

async function scene(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Scene> {
  const h = await audited(env, opts);
  return new Scene(h, env['MAX_SERVICES_PER_NAMESPACE'] === undefined ? undefined : Number(env['MAX_SERVICES_PER_NAMESPACE']));
}

interface Victim {
  readonly appId: string;
  readonly driver: PodBody;
  readonly execs: Map<string, PodBody>;
  /** Creates a genuine executor of this app and sends its add: it must get its Service. */
  addExecutor(execId: string, opts?: { name?: string; hold?: boolean; port?: number }): Promise<PodBody>;
}

/** A genuine Spark app: opted-in driver, executors owned by it, Services made by real add events. */
async function victimApp(s: Scene, opts: { appId: string; driverName: string; execIds?: readonly string[]; driverUid?: string }): Promise<Victim> {
  const { h } = s;
  const body = driverPod({ namespace: NS, appId: opts.appId, name: opts.driverName });
  const driver = h.createPod(opts.driverUid === undefined ? body : { ...body, metadata: { ...body.metadata, uid: opts.driverUid } });
  const execs = new Map<string, PodBody>();
  const victim: Victim = {
    appId: opts.appId,
    driver,
    execs,
    async addExecutor(execId, o = {}) {
      const spec = executorPod({ namespace: NS, appId: opts.appId, execId, name: o.name ?? `${opts.driverName}-exec-${execId}`, driver: ref(driver), blockManagerPort: o.port });
      const pod = h.createPod(o.hold === true ? withHold(spec) : spec);
      s.genuine.add(pod.metadata.name);
      execs.set(execId, pod);
      const reply = await s.event('add', pod);
      const created = reply.data?.outcomes.some((o) => o.action === 'created' && o.service === executorServiceName(opts.appId, execId));
      expect(created, `add of genuine executor ${pod.metadata.name} creates its Service: ${reply.text}`).toBe(true);
      return pod;
    },
  };
  s.check(`driver ${driver.metadata.name} created`);
  for (const id of opts.execIds ?? []) await victim.addExecutor(id);
  return victim;
}

/** What a tenant's pod can claim without changing anything: its own JSON, terminating, failed, deleted. */
async function replayClaims(s: Scene, pod: PodBody): Promise<void> {
  await s.forged('add', pod);
  await s.forged('update', pod);
  await s.forged('update', claiming(pod, { deleting: true }));
  await s.forged('update', claiming(pod, { phase: 'Failed' }));
  await s.forged('delete', claiming(pod, { phase: 'Failed', deleting: true }));
  await s.forged('delete', pod);
  await s.forgedRef('delete', pod.metadata.name);
}

/**
 * The real life of a tenant pod created with a finalizer, each change followed by its event:
 * add, update, DELETE (deletionTimestamp, still running), phase Failed, finalizer removed (gone).
 * The tenant's pod events must cause no Service write: the victim's Services are right.
 */
async function tenantLifecycle(s: Scene, name: string): Promise<void> {
  const { h } = s;
  await s.noWrite(`lifecycle of tenant pod ${name}`, async () => {
    await s.event('add', current(h, name));
    await s.event('update', current(h, name));
    s.change(`tenant deletes ${name} (finalizer keeps it, deletionTimestamp set)`, () => h.emulator.deleteObject('pods', NS, name));
    expect(current(h, name).metadata.deletionTimestamp).toBeDefined();
    await s.event('update', current(h, name));
    s.change(`${name} Failed`, () => h.emulator.patchObject('pods', NS, name, { status: { phase: 'Failed' } }));
    await s.event('update', current(h, name));
    const last = current(h, name);
    s.change(`${name} finalizer removed (gone)`, () => h.emulator.patchObject('pods', NS, name, { metadata: { finalizers: null } }));
    expect(h.emulator.getObject('pods', NS, name)).toBeUndefined();
    await s.event('delete', last);
    await s.event('delete', last); // redelivered
    await s.forgedRef('delete', name);
  });
}

function tenantOwner(s: Scene, name: string): PodBody {
  const pod = nonSparkPod(NS, name);
  return s.h.createPod({ ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, ...OPT_IN } } });
}

function tenantCopy(
  s: Scene,
  victim: Victim,
  o: { execId: string; name: string; owner?: { name: string; uid: string }; port?: number; hold?: boolean; appId?: string },
): PodBody {
  const spec = executorPod({ namespace: NS, appId: o.appId ?? victim.appId, execId: o.execId, name: o.name, driver: o.owner, optIn: true, blockManagerPort: o.port });
  return s.h.createPod(o.hold === true ? withHold(spec) : spec);
}

const resourceVersions = (h: Harness): Record<string, string> =>
  Object.fromEntries((h.emulator.listObjects('services', NS) as unknown as SvcObj[]).map((svc) => [svc.metadata.name, svc.metadata.resourceVersion]));

// ---- 0. the check itself -------------------------------------------------------------------------

describe('0. the invariant check', () => {
  it('catches every kind of harm: a mark, a deletion, another owner, a re-pointed selector, another port', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(1), driverName: 'victim-driver', execIds: ['1'] });
    const other = tenantOwner(s, 'tenant-box');
    const name = executorServiceName(v.appId, '1');
    const original = s.h.emulator.getObject('services', NS, name)!;
    const harms: Array<[string, object]> = [
      ['marked gone', { metadata: { annotations: { [GONE_AT]: '2030-01-01T00:00:00Z' } } }],
      ['another owner', { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: other.metadata.name, uid: other.metadata.uid }] } }],
      ['a second owner', { metadata: { ownerReferences: [...(original['metadata'] as { ownerReferences: object[] }).ownerReferences, { apiVersion: 'v1', kind: 'Pod', name: other.metadata.name, uid: other.metadata.uid }] } }],
      ['re-pointed', { spec: { selector: { 'spark-app-selector': v.appId, 'spark-exec-id': '2' } } }],
      ['selects more', { spec: { selector: { 'spark-app-selector': v.appId, 'spark-exec-id': '1', extra: 'x' } } }],
      ['another port', { spec: { ports: [{ name: 'spark-block-manager', port: 7080, targetPort: 7080 }] } }],
    ];
    for (const [what, patch] of harms) {
      s.h.emulator.patchObject('services', NS, name, patch);
      expect(invariantProblems(s.h, s.genuine), what).toHaveLength(1);
      s.h.emulator.deleteObject('services', NS, name);
      s.h.emulator.seed({ ...original, metadata: { ...(original['metadata'] as object), resourceVersion: undefined } });
      s.check(`restored after: ${what}`);
    }
    s.h.emulator.deleteObject('services', NS, name);
    expect(invariantProblems(s.h, s.genuine)).toEqual([`Service ${name} of live executor ${v.execs.get('1')!.metadata.name}: missing`]);
  });
});

// ---- 1. tenant pods -------------------------------------------------------------------------------

describe('1. a tenant who creates pods claiming the victim’s executor slots', () => {
  it('(a) a copy with a dangling owner reference (garbage-collected at once): its add and delete, and every claim it could make', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(101), driverName: 'victim-driver', execIds: ['1', '2'] });
    for (const [i, owner] of [
      { name: 'ghost-driver', uid: '0f0f0f0f-0000-4000-8000-000000000001' },
      { name: v.driver.metadata.name, uid: '0f0f0f0f-0000-4000-8000-000000000002' }, // the victim driver's name, another UID
    ].entries()) {
      const copy = tenantCopy(s, v, { execId: '1', name: `tenant-a${i}-exec-1`, owner });
      expect(s.h.emulator.getObject('pods', NS, copy.metadata.name), 'GC removed the pod with only a dangling owner').toBeUndefined();
      s.check(`tenant created ${copy.metadata.name} (collected)`);
      // What the ApiServerSource sends for it: an add, then a delete.
      await s.noWrite('add + delete of a collected copy', async () => {
        await s.event('add', copy);
        await s.event('delete', copy);
      });
      await replayClaims(s, copy);
    }
  });

  it('(b) a copy with no owner at all, through its whole life', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(102), driverName: 'victim-driver', execIds: ['1', '2'] });
    for (const execId of ['1', '2']) {
      const copy = tenantCopy(s, v, { execId, name: `tenant-b-exec-${execId}`, hold: true });
      s.check(`tenant created ${copy.metadata.name}`);
      await tenantLifecycle(s, copy.metadata.name);
      await replayClaims(s, copy);
    }
    await s.noWrite('sweep', () => s.sweep());
  });

  it('(c) copies owned by an opted-in pod of the tenant’s own, then the tenant deletes that owner', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(103), driverName: 'victim-driver', execIds: ['1', '2'] });
    const owner = tenantOwner(s, 'tenant-notebook');
    const held = tenantCopy(s, v, { execId: '1', name: 'tenant-c-exec-1', owner: ref(owner), hold: true });
    s.check('tenant created a held copy of executor 1');
    await tenantLifecycle(s, held.metadata.name);
    await replayClaims(s, held);

    const copies = ['1', '2'].map((execId) => tenantCopy(s, v, { execId, name: `tenant-c2-exec-${execId}`, owner: ref(owner) }));
    s.check('tenant created running copies of executors 1 and 2');
    await s.noWrite('copies running, their adds, a sweep, the owner deleted', async () => {
      for (const copy of copies) await s.event('add', current(s.h, copy.metadata.name));
      await s.sweep('sweep with the copies running');
      s.change('tenant deletes its owner pod (GC takes the copies)', () => s.h.emulator.deleteObject('pods', NS, owner.metadata.name));
      for (const copy of copies) expect(s.h.emulator.getObject('pods', NS, copy.metadata.name)).toBeUndefined();
      await s.event('delete', owner); // not a Spark pod: ignored
      for (const copy of copies) {
        await s.event('delete', copy);
        await s.forgedRef('delete', copy.metadata.name);
      }
      await s.forgedRef('delete', owner.metadata.name);
      await s.sweep('sweep after the owner went');
    });
  });

  it('(d) copies owned by the victim’s own driver (name and UID copied), one of them with another port', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(104), driverName: 'victim-driver', execIds: ['1', '2'] });
    const same = tenantCopy(s, v, { execId: '1', name: 'tenant-d-exec-1', owner: ref(v.driver), hold: true });
    const otherPort = tenantCopy(s, v, { execId: '2', name: 'tenant-d-exec-2', owner: ref(v.driver), hold: true, port: 9999 });
    s.check('tenant created copies owned by the victim driver');
    await s.noWrite('a sweep with both copies running', () => s.sweep());
    for (const copy of [same, otherPort]) {
      await tenantLifecycle(s, copy.metadata.name);
      await replayClaims(s, copy);
    }
    // A copy that is simply deleted (no finalizer): gone at once.
    const quick = tenantCopy(s, v, { execId: '2', name: 'tenant-d-quick-2', owner: ref(v.driver) });
    await s.noWrite('add, delete of a quick copy, sweep', async () => {
      await s.event('add', quick);
      s.change('tenant deletes its quick copy', () => s.h.emulator.deleteObject('pods', NS, quick.metadata.name));
      await s.event('delete', quick);
      await s.sweep();
    });
  });

  it('a second live “driver” pod claiming the victim’s app id: add, update, finished, terminating, deleted', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(105), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    const fake = s.h.createPod(withHold(driverPod({ namespace: NS, appId: v.appId, name: 'tenant-driver' })));
    s.check('tenant created a second driver with the victim app id');
    const name = fake.metadata.name;
    await s.noWrite('the fake driver’s life', async () => {
      await s.event('add', current(s.h, name));
      await s.event('update', current(s.h, name));
      s.change('fake driver Succeeded', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Succeeded' } }));
      await s.event('update', current(s.h, name));
      s.change('fake driver deleted (terminating)', () => s.h.emulator.deleteObject('pods', NS, name));
      await s.event('update', current(s.h, name));
      s.change('fake driver Failed', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Failed' } }));
      await s.event('update', current(s.h, name));
      const last = current(s.h, name);
      s.change('fake driver gone', () => s.h.emulator.patchObject('pods', NS, name, { metadata: { finalizers: null } }));
      await s.event('delete', last);
      await s.forgedRef('delete', name);
      await s.sweep();
    });
    // A fake driver that just runs and is then deleted outright.
    const fake2 = s.h.createPod(driverPod({ namespace: NS, appId: v.appId, name: 'tenant-driver-2' }));
    await s.noWrite('second fake driver', async () => {
      await s.event('add', fake2);
      await s.forged('update', claiming(fake2, { phase: 'Failed' }));
      s.change('second fake driver deleted', () => s.h.emulator.deleteObject('pods', NS, fake2.metadata.name));
      await s.event('delete', fake2);
    });
    // Later executors of the victim still get their Services.
    await v.addExecutor('4');
  });
});

// ---- 2. forged events ----------------------------------------------------------------------------

describe('2. forged CloudEvents about the victim’s running pods', () => {
  it('executor deleted / Failed, driver deleted / Succeeded, with the real pod JSON and UIDs, in both modes, to a warm and a cold instance: no write', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(201), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    const cold = await audited({}, { emulator: s.h.emulator }); // a fresh process: nothing remembered
    const driver = current(s.h, v.driver.metadata.name);
    for (const to of [s.h, cold]) {
      for (const id of ['1', '2', '3']) {
        const exec = current(s.h, v.execs.get(id)!.metadata.name);
        await s.forged('delete', exec, to);
        await s.forged('update', claiming(exec, { phase: 'Failed' }), to);
        await s.forged('update', claiming(exec, { phase: 'Succeeded', deleting: true }), to);
        await s.forged('delete', claiming(exec, { phase: 'Failed', deleting: true }), to, 'structured');
        await s.forged('update', claiming(exec, { deleting: true }), to);
        // "It was replaced": the same name with another UID, ended.
        await s.forged('delete', claiming(exec, { uid: '11111111-2222-4333-8444-555555555555', phase: 'Failed' }), to);
        // "Its driver is gone": the executor pointing at a driver that does not exist.
        await s.forged('delete', { ...exec, metadata: { ...exec.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'nobody', uid: 'u-nobody', controller: true }] } }, to);
      }
      await s.forged('delete', driver, to);
      await s.forged('update', claiming(driver, { phase: 'Succeeded' }), to);
      await s.forged('update', claiming(driver, { phase: 'Failed', deleting: true }), to, 'structured');
      await s.forged('delete', claiming(driver, { phase: 'Succeeded' }), to);
      // A driver "replaced" under the same name.
      await s.forged('update', claiming(driver, { uid: '66666666-7777-4888-8999-000000000000', phase: 'Succeeded' }), to);
      for (const name of [...[...v.execs.values()].map((e) => e.metadata.name), driver.metadata.name]) {
        await s.forgedRef('delete', name, to);
        await s.forgedRef('update', name, to);
      }
      // An add for an executor that does not exist: nothing to create.
      const ghost = executorPod({ namespace: NS, appId: v.appId, execId: '9', name: 'victim-driver-exec-9', driver: ref(v.driver) });
      await s.forged('add', { ...ghost, metadata: { ...ghost.metadata, uid: '99999999-0000-4000-8000-000000000009' } }, to);
      await s.noWrite('sweep after the forged events', () => s.sweep('sweep', to));
    }
  });
});

// ---- 3. cache poisoning ----------------------------------------------------------------------------

describe('3. poisoning what the function remembers', () => {
  it('executors naming the victim driver’s UID under another name (and its name with another UID) do not stop later executors from getting Services', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(301), driverName: 'victim-driver', execIds: ['1', '2'] });
    const other = tenantOwner(s, 'tenant-box');
    const poisons: PodBody[] = [
      // The victim driver's UID under the tenant's pod name, and under a name that does not exist.
      tenantCopy(s, v, { execId: '3', name: 'poison-3a', owner: { name: other.metadata.name, uid: v.driver.metadata.uid! } }),
      tenantCopy(s, v, { execId: '3', name: 'poison-3b', owner: { name: 'nobody-driver', uid: v.driver.metadata.uid! } }),
      // The victim driver's name with the tenant's UID, and with a made-up one.
      tenantCopy(s, v, { execId: '4', name: 'poison-4a', owner: { name: v.driver.metadata.name, uid: other.metadata.uid! } }),
      tenantCopy(s, v, { execId: '4', name: 'poison-4b', owner: { name: v.driver.metadata.name, uid: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee' } }),
    ];
    // Every one has only a dangling reference: collected at once; the events still come.
    for (const p of poisons) expect(s.h.emulator.getObject('pods', NS, p.metadata.name)).toBeUndefined();
    for (const p of poisons) {
      await s.noWrite(`poison ${p.metadata.name}`, async () => {
        await s.event('add', p);
        await s.forged('update', p);
        await s.event('delete', p);
      });
    }
    // An "executor" that is the victim driver itself (its name and UID), ended: must not be remembered as the driver.
    const driverJson = current(s.h, v.driver.metadata.name);
    const asExecutor = executorPod({ namespace: NS, appId: v.appId, execId: '5', name: driverJson.metadata.name, driver: ref(v.driver), optIn: true });
    const impostor = { ...asExecutor, metadata: { ...asExecutor.metadata, uid: driverJson.metadata.uid } } as PodBody;
    await s.forged('add', impostor);
    await s.forged('update', claiming(impostor, { phase: 'Failed' }));
    await s.forged('delete', impostor);
    // And the victim's own executor JSON re-owned to someone else.
    const e1 = current(s.h, v.execs.get('1')!.metadata.name);
    await s.forged('update', { ...e1, metadata: { ...e1.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: other.metadata.name, uid: v.driver.metadata.uid!, controller: true }] } });
    await s.forged('update', { ...e1, metadata: { ...e1.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: v.driver.metadata.name, uid: other.metadata.uid!, controller: true }] } });

    // Later executors of the victim, in exactly the slots and names the poison touched.
    await v.addExecutor('3');
    await v.addExecutor('4');
    await v.addExecutor('5');
    await v.addExecutor('6');
    await s.noWrite('sweep', () => s.sweep());
    await s.noWrite('second sweep', () => s.sweep());
  });

  it('an owner reference (or pod) UID longer than 128 characters is answered 400, with no API call', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: sparkAppId(302), driverName: 'victim-driver', execIds: ['1'] });
    const long = 'u'.repeat(129);
    const e1 = current(s.h, v.execs.get('1')!.metadata.name);
    const before = s.h.emulator.requests.length;
    const cases: PodBody[] = [
      { ...e1, metadata: { ...e1.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: v.driver.metadata.name, uid: long, controller: true }] } },
      { ...e1, metadata: { ...e1.metadata, uid: long } },
    ];
    for (const pod of cases) {
      for (const verb of ['add', 'update', 'delete'] as const) {
        const reply = await s.h.send(verb, pod);
        expect(reply.status, reply.text).toBe(400);
        s.check(`${verb} with a ${long.length}-character UID`);
      }
    }
    expect(s.h.emulator.requests.slice(before), 'API calls for refused events').toEqual([]);
    // Exactly 128 is still accepted (and, the executor running, changes nothing).
    const edge = await s.h.send('update', { ...e1, metadata: { ...e1.metadata, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: v.driver.metadata.name, uid: 'u'.repeat(128), controller: true }] } });
    expect(edge.status).toBe(200);
    expect(s.h.emulator.requests.slice(before).filter((r) => SERVICE_WRITES.has(r.verb))).toEqual([]);
    s.check('128-character UID');
  });
});

// ---- 4. name collisions -------------------------------------------------------------------------

describe('4. names that could collide', () => {
  it('exec ids that are not decimal integers (e.g. "1-exec-2", which would make another app’s name) are ignored', async () => {
    const s = await scene();
    const v = await victimApp(s, { appId: 'a-exec-1', driverName: 'victim-driver', execIds: ['2'] });
    // The collision is real: app "a", exec "1-exec-2" would be Spark's name of app "a-exec-1", exec "2".
    expect(executorServiceName('a', '1-exec-2')).toBe(executorServiceName('a-exec-1', '2'));
    const owner = tenantOwner(s, 'tenant-box');
    const ids = ['1-exec-2', '01', '0', '1.0', 'x', '2a'];
    for (const [i, execId] of ids.entries()) {
      for (const owned of [ref(owner), ref(v.driver)]) {
        const copy = tenantCopy(s, v, { execId, appId: 'a', name: `tenant-odd-${i}-${owned.name}`, owner: owned });
        await s.noWrite(`tenant pod with exec id ${execId}`, async () => {
          for (const verb of ['add', 'update', 'delete'] as const) {
            const reply = await s.event(verb, copy);
            expect(reply.data?.action, `${verb} of exec id ${JSON.stringify(execId)}`).toBe('ignored');
          }
        });
      }
    }
    const before = resourceVersions(s.h);
    await s.noWrite('sweeps with the odd pods running', async () => {
      for (let i = 0; i < 3; i++) await s.sweep(`sweep ${i + 1}`);
    });
    expect(resourceVersions(s.h)).toEqual(before);
  });

  it('an app id whose plain name equals another pair’s hashed fallback: no valid pair maps there, and sweeps never flip a Service', async () => {
    const s = await scene();
    // The victim: a custom app id whose plain name is not a DNS label, so its Service has a hashed name H.
    const victimAppId = 'Nightly_ETL';
    const H = executorServiceName(victimAppId, '1');
    expect(H).toMatch(/^svc-nightly-etl-exec-1-h[0-9a-f]{10}$/);
    // Every pair whose plain name is H splits H at an "-exec-"; by construction the exec id part then
    // contains "-h<hash>", never a decimal integer: no valid pair can take H.
    const body = H.slice('svc-'.length);
    const splits = [...body.matchAll(/-exec-/g)].map((m) => ({ appId: body.slice(0, m.index), execId: body.slice(m.index + '-exec-'.length) }));
    expect(splits.length).toBeGreaterThan(0);
    for (const split of splits) {
      expect(executorServiceName(split.appId, split.execId)).toBe(H);
      expect(SPARK_EXEC_ID.test(split.execId), `valid pair ${JSON.stringify(split)} maps to ${H}`).toBe(false);
    }
    const v = await victimApp(s, { appId: victimAppId, driverName: 'victim-driver', execIds: ['1', '2'] });
    // Apps whose names come close: the plain-name twin, an upper-case twin, the hash body as an app id.
    const twin = await victimApp(s, { appId: 'nightly-etl', driverName: 'twin-driver', execIds: ['1'] });
    const upper = await victimApp(s, { appId: 'NIGHTLY-ETL', driverName: 'upper-driver', execIds: ['1'] });
    const bodyApp = await victimApp(s, { appId: body, driverName: 'body-driver', execIds: ['1'] });
    const names = [v, twin, upper, bodyApp].map((a) => executorServiceName(a.appId, '1'));
    expect(new Set(names).size).toBe(names.length);
    // The tenant's pods whose plain name is exactly H.
    const owner = tenantOwner(s, 'tenant-box');
    for (const [i, split] of splits.entries()) {
      for (const owned of [ref(owner), ref(v.driver)]) {
        const copy = tenantCopy(s, v, { appId: split.appId, execId: split.execId, name: `tenant-h-${i}-${owned.name}`, owner: owned });
        await s.noWrite(`tenant pod ${split.appId}/${split.execId}`, async () => {
          for (const verb of ['add', 'update'] as const) expect((await s.event(verb, copy)).data?.action).toBe('ignored');
        });
      }
    }
    const before = resourceVersions(s.h);
    expect(Object.keys(before)).toContain(H);
    for (let i = 1; i <= 3; i++) {
      await s.noWrite(`sweep ${i}`, () => s.sweep(`sweep ${i}`));
      expect(resourceVersions(s.h), `resourceVersions after sweep ${i}`).toEqual(before);
    }
  });
});

// ---- 5. replaced driver --------------------------------------------------------------------------

describe('5. a driver replaced by a new run with the same app id (same or another driver name)', () => {
  async function run(s: Scene, uid: string, execName: string): Promise<Victim> {
    const v = await victimApp(s, { appId: 'nightly-etl', driverName: 'nightly-etl-driver', driverUid: uid });
    await v.addExecutor('1', { name: execName });
    return v;
  }
  const U1 = '10000000-0000-4000-8000-000000000001';
  const U2 = '20000000-0000-4000-8000-000000000002';

  it.each([
    { variant: 'same executor pod name', newName: 'nightly-etl-exec-1' },
    { variant: 'new executor pod name', newName: 'nightly-etl-2-exec-1' },
  ])('late events of the old run do not touch the new run’s Service ($variant)', async ({ newName }) => {
    const s = await scene();
    const old = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    const oldDriver = current(s.h, 'nightly-etl-driver');
    // The old run ends as Spark ends it: executors deleted, driver Succeeded, later deleted.
    s.change('old executor deleted', () => s.h.emulator.deleteObject('pods', NS, oldExec.metadata.name));
    s.genuine.delete(oldExec.metadata.name);
    expect((await s.event('delete', oldExec)).data?.action).toBe('marked-gone');
    s.change('old driver Succeeded', () => s.h.emulator.patchObject('pods', NS, 'nightly-etl-driver', { status: { phase: 'Succeeded' } }));
    const finished = current(s.h, 'nightly-etl-driver');
    await s.event('update', finished);
    s.change('old driver deleted', () => s.h.emulator.deleteObject('pods', NS, 'nightly-etl-driver'));
    await s.event('delete', finished);
    expect(old.driver.metadata.uid).toBe(U1);

    const fresh = await run(s, U2, newName);
    expect(fresh.driver.metadata.uid).toBe(U2);
    // Late deliveries of everything the old run produced.
    await s.forged('delete', oldExec);
    await s.forged('update', claiming(oldExec, { phase: 'Failed', deleting: true }));
    await s.forged('add', oldExec);
    await s.forged('update', finished);
    await s.forged('delete', finished);
    await s.forged('update', oldDriver);
    await s.forgedRef('delete', oldExec.metadata.name);
    await s.forgedRef('delete', 'nightly-etl-driver');
    await s.noWrite('sweep', () => s.sweep());
  });

  // Was a bug (fixed): an executor add is answered from remembered facts about the slot's previous executor ("executor runs; Service is right", zero API calls, no age limit): the new run's executor gets no Service until a sweep.
  it('the old run’s end events arrive late (after the new run’s add): the new run, same driver name, gets its Service at its add', async () => {
    const s = await scene();
    const oldRun = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    const oldDriver = current(s.h, 'nightly-etl-driver');
    s.genuine.delete(oldExec.metadata.name);
    s.change('old driver deleted: GC takes its executor and Service (their events are still in flight)', () => s.h.emulator.deleteObject('pods', NS, 'nightly-etl-driver'));
    expect(s.h.services(NS)).toEqual([]);
    expect(oldRun.driver.metadata.uid).toBe(U1);
    // Fails here: answered "verified" with no API call, and no Service exists.
    await run(s, U2, 'nightly-etl-2-exec-1');
    await s.event('delete', oldExec);
    await s.event('delete', oldDriver);
    await s.sweep();
  });

  /** The first run of "nightly-etl" ends while every event of its end is lost: its executor is deleted, its driver finishes and stays. */
  async function oldRunEndedUnseen(s: Scene): Promise<{ oldExec: PodBody; oldDriver: PodBody }> {
    const oldRun = await run(s, U1, 'nightly-etl-exec-1');
    const oldExec = current(s.h, 'nightly-etl-exec-1');
    s.genuine.delete(oldExec.metadata.name);
    s.change('old executor deleted (event lost)', () => s.h.emulator.deleteObject('pods', NS, oldExec.metadata.name));
    s.change('old driver Succeeded (event lost)', () => s.h.emulator.patchObject('pods', NS, oldRun.driver.metadata.name, { status: { phase: 'Succeeded' } }));
    return { oldExec, oldDriver: current(s.h, oldRun.driver.metadata.name) };
  }

  // Was a bug (fixed): same root cause as above: the add is answered from the remembered old executor and old driver, and the Service of the finished run (owned by its finished driver) stays in the new run's way until a sweep.
  it('the old run’s end events lost, its finished driver pod kept: a new run with the same app id (other driver name) gets its Service at its add', async () => {
    const s = await scene();
    const { oldExec, oldDriver } = await oldRunEndedUnseen(s);
    const fresh = await victimApp(s, { appId: 'nightly-etl', driverName: 'nightly-etl-b-driver', driverUid: U2 });
    // Fails here: answered "verified" with no API call; the Service is the old run's.
    await fresh.addExecutor('1', { name: 'nightly-etl-b-exec-1' });
    await s.forged('delete', oldExec);
    await s.forged('update', oldDriver);
    await s.noWrite('sweep', () => s.sweep());
  });

  // Was a bug (fixed): deleting the old run's Service (its driver finished) because a running executor needs the name ends the event without creating that executor's Service (the delete is not followed by a new decision); only a later event or sweep creates it.
  it('the old run’s end events lost, its finished driver pod kept: a process that remembers nothing replaces the stray at the new run’s add; late old events change nothing', async () => {
    const s = await scene();
    const { oldExec, oldDriver } = await oldRunEndedUnseen(s);
    const cold = await audited({}, { emulator: s.h.emulator });
    const body = driverPod({ namespace: NS, appId: 'nightly-etl', name: 'nightly-etl-b-driver' });
    const driver = s.h.createPod({ ...body, metadata: { ...body.metadata, uid: U2 } });
    const exec = s.h.createPod(executorPod({ namespace: NS, appId: 'nightly-etl', execId: '1', name: 'nightly-etl-b-exec-1', driver: ref(driver) }));
    s.genuine.add(exec.metadata.name);
    // Fails here: answered "deleted" (the stray), and no Service is created for the new executor.
    const reply = await s.event('add', exec, cold);
    expect(reply.data?.outcomes.map((o) => o.action)).toEqual(['deleted', 'created']);
    for (const to of [cold, s.h]) {
      await s.forged('delete', oldExec, to);
      await s.forged('update', oldDriver, to);
      await s.forged('delete', oldDriver, to);
      await s.forgedRef('delete', oldExec.metadata.name, to);
    }
    await s.noWrite('sweep', () => s.sweep());
  });
});

// ---- 6. client mode -------------------------------------------------------------------------------

describe('6. client mode: the executor’s owner is a pod without spark-role', () => {
  it('a notebook pod as driver: its executor’s Service is created, and sweeps keep it', async () => {
    const s = await scene();
    const notebook = tenantOwner(s, 'jupyter-0');
    expect(notebook.metadata.labels['spark-role']).toBeUndefined();
    const appId = sparkAppId(601);
    for (const id of ['1', '2']) {
      const e = s.h.createPod(executorPod({ namespace: NS, appId, execId: id, name: `jupyter-exec-${id}`, driver: ref(notebook) }));
      s.genuine.add(e.metadata.name);
      expect((await s.event('add', e)).data?.action).toBe('created');
    }
    const before = resourceVersions(s.h);
    await s.noWrite('two sweeps', async () => {
      await s.sweep('sweep 1');
      await s.sweep('sweep 2');
    });
    expect(resourceVersions(s.h)).toEqual(before);
    // Forged "driver" events about the notebook pod.
    await s.forged('delete', notebook);
    await s.forged('update', claiming(notebook, { phase: 'Succeeded' }));
    await s.forgedRef('delete', 'jupyter-0');
  });
});

// ---- 7. sweep races -------------------------------------------------------------------------------

describe('7. sweeps racing with changes', () => {
  /** Service deletes that hit the Service of an executor that lives now (executors never come back, so this covers the past too). */
  function deletesOfLiveServices(s: Scene): string[] {
    const owed = new Set(
      (s.h.emulator.listObjects('pods', NS) as unknown as PodObj[])
        .filter((p) => p.metadata.labels?.['spark-role'] === 'executor' && podLives(p))
        .map((p) => executorServiceName(p.metadata.labels!['spark-app-selector']!, p.metadata.labels!['spark-exec-id']!)),
    );
    return serviceWrites(s.h)
      .filter((r) => r.verb === 'delete' && r.status === 200 && r.name !== undefined && owed.has(r.name))
      .map((r) => r.name!);
  }

  it('a slow sweep in flight while an app starts, executors are added and one ends', async () => {
    const s = await scene();
    const a = await victimApp(s, { appId: sparkAppId(701), driverName: 'a-driver', execIds: ['1', '2'] });
    s.h.emulator.faults.add({ verb: 'list', resource: 'pods', times: Infinity, fault: { kind: 'delay', ms: 50 } });
    s.h.emulator.faults.add({ verb: 'list', resource: 'services', times: Infinity, fault: { kind: 'delay', ms: 30 } });
    const sweeping = sweepEvent(s.h.url, 'race-sweep-1');
    await sleep(10);
    // Meanwhile: a new app starts with three executors; app a gets executor 3; a's executor 2 ends.
    const bDriver = s.h.createPod(driverPod({ namespace: NS, appId: sparkAppId(702), name: 'b-driver' }));
    const bExecs = ['1', '2', '3'].map((id) =>
      s.h.createPod(executorPod({ namespace: NS, appId: sparkAppId(702), execId: id, name: `b-driver-exec-${id}`, driver: ref(bDriver) })),
    );
    const a3 = s.h.createPod(executorPod({ namespace: NS, appId: a.appId, execId: '3', name: 'a-driver-exec-3', driver: ref(a.driver) }));
    for (const p of [...bExecs, a3]) s.genuine.add(p.metadata.name);
    const a2 = a.execs.get('2')!;
    s.h.emulator.deleteObject('pods', NS, a2.metadata.name);
    s.genuine.delete(a2.metadata.name);
    const second = sleep(40).then(() => sweepEvent(s.h.url, 'race-sweep-2'));
    const replies = await Promise.all([sweeping, second, ...bExecs.map((p) => s.h.send('add', p)), s.h.send('add', a3), s.h.send('delete', a2)]);
    for (const r of replies) expect(r.status, r.text).toBe(200);
    expect(deletesOfLiveServices(s)).toEqual([]);
    s.h.emulator.faults.clear();
    await s.sweep('settling sweep');
    expect(deletesOfLiveServices(s)).toEqual([]);
    const a2Svc = s.h.emulator.getObject('services', NS, executorServiceName(a.appId, '2')) as unknown as SvcObj | undefined;
    expect(a2Svc?.metadata.annotations?.[GONE_AT], 'the ended executor’s Service is marked').toBeDefined();
  });

  it('two sweeps at once, on one instance and on a second one, while apps start and a driver finishes', async () => {
    const s = await scene({ COOLDOWN_SECONDS: '1' });
    const other = await audited({ COOLDOWN_SECONDS: '1' }, { emulator: s.h.emulator });
    const a = await victimApp(s, { appId: sparkAppId(711), driverName: 'a-driver', execIds: ['1', '2', '3'] });
    const c = await victimApp(s, { appId: sparkAppId(712), driverName: 'c-driver', execIds: ['1', '2'] });
    s.h.emulator.faults.add({ verb: 'list', resource: 'pods', times: Infinity, fault: { kind: 'delay', ms: 50 } });
    s.h.emulator.faults.add({ verb: 'get', resource: 'pods', times: Infinity, fault: { kind: 'delay', ms: 20 } });
    const sweeps = [sweepEvent(s.h.url, 'twin-1'), sweepEvent(s.h.url, 'twin-2'), sweepEvent(other.url, 'twin-3')];
    await sleep(15);
    // App c finishes during the sweeps (Spark stops its executors first); app d starts; a gets executor 4.
    for (const e of c.execs.values()) {
      s.h.emulator.deleteObject('pods', NS, e.metadata.name);
      s.genuine.delete(e.metadata.name);
    }
    s.h.emulator.patchObject('pods', NS, c.driver.metadata.name, { status: { phase: 'Succeeded' } });
    const dDriver = s.h.createPod(driverPod({ namespace: NS, appId: sparkAppId(713), name: 'd-driver' }));
    const dExecs = ['1', '2'].map((id) => s.h.createPod(executorPod({ namespace: NS, appId: sparkAppId(713), execId: id, name: `d-driver-exec-${id}`, driver: ref(dDriver) })));
    const a4 = s.h.createPod(executorPod({ namespace: NS, appId: a.appId, execId: '4', name: 'a-driver-exec-4', driver: ref(a.driver) }));
    for (const p of [...dExecs, a4]) s.genuine.add(p.metadata.name);
    const events = [
      ...dExecs.map((p) => s.h.send('add', p)),
      other.send('add', a4),
      s.h.send('update', current(s.h, c.driver.metadata.name)),
      ...[...c.execs.values()].map((e) => other.send('delete', e)),
      sleep(30).then(() => sweepEvent(other.url, 'twin-4')),
    ];
    for (const r of await Promise.all([...sweeps, ...events])) expect(r.status, r.text).toBe(200);
    expect(deletesOfLiveServices(s)).toEqual([]);
    s.h.emulator.faults.clear();
    await sleep(1100); // past the cool-down: the settling sweeps may delete only what is really gone
    await Promise.all([s.sweep('settling sweep'), s.sweep('concurrent settling sweep', other)]);
    await s.sweep('last sweep');
    expect(deletesOfLiveServices(s)).toEqual([]);
    // The finished app's Services are gone; every live one is there.
    expect(s.h.emulator.listObjects('services', NS, `spark-app-selector=${c.appId}`)).toEqual([]);
  });
});

// ---- 8. graceful deletion -------------------------------------------------------------------------

describe('8. graceful deletion: a terminating executor still runs', () => {
  it('deletionTimestamp set: unmarked, even past the cool-down and through sweeps; marked once Failed', async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const s = await scene({ COOLDOWN_SECONDS: '5' }, { now: () => new Date(now) });
    const v = await victimApp(s, { appId: sparkAppId(801), driverName: 'victim-driver', execIds: ['1'] });
    const e2 = await v.addExecutor('2', { hold: true });
    const name = e2.metadata.name;
    const svcName = executorServiceName(v.appId, '2');
    s.change('executor 2 deleted: decommission begins (finalizer keeps it running)', () => s.h.emulator.deleteObject('pods', NS, name));
    expect(current(s.h, name).metadata.deletionTimestamp).toBeDefined();
    await s.noWrite('events and sweeps while it terminates', async () => {
      await s.event('update', current(s.h, name));
      await s.forged('delete', current(s.h, name)); // premature "deleted"
      await s.forgedRef('delete', name);
      now += 60_000; // far past the cool-down
      await s.sweep('sweep past the cool-down');
      await s.event('update', current(s.h, name));
      now += 600_000;
      await s.sweep('another sweep');
    });
    expect((s.h.emulator.getObject('services', NS, svcName) as unknown as SvcObj).metadata.annotations?.[GONE_AT]).toBeUndefined();

    s.change('executor 2 Failed', () => s.h.emulator.patchObject('pods', NS, name, { status: { phase: 'Failed' } }));
    s.genuine.delete(name);
    expect((await s.event('update', current(s.h, name))).data?.action).toBe('marked-gone');
    const marked = s.h.emulator.getObject('services', NS, svcName) as unknown as SvcObj;
    expect(marked.metadata.annotations?.[GONE_AT]).toBe(new Date(now).toISOString());
    now += 6_000;
    const last = current(s.h, name);
    s.change('finalizer removed: executor 2 gone', () => s.h.emulator.patchObject('pods', NS, name, { metadata: { finalizers: null } }));
    await s.event('delete', last);
    await s.sweep('sweep after the cool-down');
    expect(s.h.emulator.getObject('services', NS, svcName), 'cool-down over: deleted').toBeUndefined();
  });
});

// ---- 9. bounds ---------------------------------------------------------------------------------------

describe('9. bounds: MAX_SERVICES_PER_NAMESPACE', () => {
  it('with a cap of 3, five executors get three Services; the other adds are skipped, naming the cap', async () => {
    const s = await scene({ MAX_SERVICES_PER_NAMESPACE: '3' });
    const v = await victimApp(s, { appId: sparkAppId(901), driverName: 'victim-driver', execIds: ['1', '2', '3'] });
    for (const id of ['4', '5']) {
      const pod = s.h.createPod(executorPod({ namespace: NS, appId: v.appId, execId: id, name: `victim-driver-exec-${id}`, driver: ref(v.driver) }));
      s.genuine.add(pod.metadata.name);
      const reply = await s.noWrite(`add of executor ${id} over the cap`, () => s.event('add', pod));
      expect(reply.data?.action).toBe('skipped');
      expect(reply.data?.reason).toMatch(/cap is 3 \(MAX_SERVICES_PER_NAMESPACE\)/);
    }
    await s.noWrite('sweep at the cap', () => s.sweep());
    expect(s.h.emulator.listObjects('services', NS)).toHaveLength(3);
  });
});
