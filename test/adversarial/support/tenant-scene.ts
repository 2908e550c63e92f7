/**
 * A scene of the adversarial suites: a victim application set up over real HTTP (driver opted
 * in, executors owned by it, Services made by real add events), a tenant's pods and a forged-event
 * sender, and the invariant (testkit/oracle.ts) read from the emulator after every step. When a
 * tenant's copy claims a genuine executor's slot, the oracle protects the genuine one (`genuine`).
 */
import { expect } from 'vitest';
import { executorServiceName } from '../../../shared/model/naming.ts';
import type { RequestRecord } from '../../../packages/kube-emulator/index.ts';
import { type PostedReply, postSweep } from '../../../testkit/apiserversource.ts';
import type { Harness, HarnessOptions } from '../../../testkit/harness.ts';
import { type Obj as SvcObj, clusterView, invariantProblems } from '../../../testkit/oracle.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, nonSparkPod } from '../../../testkit/spark-pods.ts';
import { NS, audited } from '../../support/audited.ts';

const HOLD = 'example.com/hold';

/** Every breach of the invariant in the harness's namespace now; [] = it holds. */
export const invariantProblemsOf = (h: Harness, genuine: ReadonlySet<string>, cap?: number): string[] =>
  invariantProblems(clusterView(h.emulator, NS), { defaultPort: h.config.defaultBlockManagerPort, genuine, cap });

export const SERVICE_WRITES = new Set(['create', 'patch', 'update', 'delete', 'deletecollection']);
export const serviceWrites = (h: Harness): RequestRecord[] =>
  h.emulator.requests.filter((r) => r.resource === 'services' && SERVICE_WRITES.has(r.verb));
export const describeWrites = (rs: readonly RequestRecord[]): string[] => rs.map((r) => `${r.verb} ${r.name ?? r.path} → ${r.status}`);

/** The pod as the API server holds it now (what a real event would carry). */
export const current = (h: Harness, name: string): PodBody => {
  const pod = h.emulator.getObject('pods', NS, name);
  if (pod === undefined) throw new Error(`pod ${name} does not exist`);
  return pod as unknown as PodBody;
};
export const ref = (pod: PodBody): { name: string; uid: string } => ({ name: pod.metadata.name, uid: pod.metadata.uid! });
/** Creates a pod carrying a finalizer: DELETE then only sets deletionTimestamp (graceful deletion). */
export const withHold = (pod: PodBody): PodBody => ({ ...pod, metadata: { ...pod.metadata, finalizers: [HOLD] } }) as PodBody;
export const claiming = (pod: PodBody, change: { phase?: string; deleting?: boolean; uid?: string }): PodBody => ({
  ...pod,
  metadata: {
    ...pod.metadata,
    ...(change.uid === undefined ? {} : { uid: change.uid }),
    ...(change.deleting === true ? { deletionTimestamp: new Date().toISOString() } : {}),
  },
  status: { ...pod.status, ...(change.phase === undefined ? {} : { phase: change.phase }) },
});

/** One scenario: a harness, the victim's pods, and steps that each end with the invariant check. */
export class Scene {
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
    expect(invariantProblemsOf(this.h, this.genuine, this.cap), `invariant after step ${this.steps}: ${step}`).toEqual([]);
  }

  /** A real ApiServerSource event (Resource mode), answered 200. */
  async event(verb: 'add' | 'update' | 'delete', pod: PodBody, to: Harness = this.h): Promise<PostedReply> {
    const reply = await to.send(verb, pod);
    expect(reply.status, `${verb} ${pod.metadata.name}: ${reply.text}`).toBe(200);
    this.check(
      `${verb} ${pod.metadata.name} (phase ${pod.status.phase}${pod.metadata.deletionTimestamp ? ', deleting' : ''}) → ${reply.data?.action}`,
    );
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
  forged(
    verb: 'add' | 'update' | 'delete',
    pod: PodBody,
    to: Harness = this.h,
    mode: 'binary' | 'structured' = 'binary',
  ): Promise<PostedReply> {
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
    const reply = await postSweep(to.url, `sweep-${Math.random().toString(36).slice(2)}`);
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

export async function scene(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Scene> {
  const h = await audited(env, opts);
  return new Scene(h, env['MAX_SERVICES_PER_NAMESPACE'] === undefined ? undefined : Number(env['MAX_SERVICES_PER_NAMESPACE']));
}

export interface Victim {
  readonly appId: string;
  readonly driver: PodBody;
  readonly execs: Map<string, PodBody>;
  /** Creates a genuine executor of this app and sends its add: it must get its Service. */
  addExecutor(execId: string, opts?: { name?: string; hold?: boolean; port?: number }): Promise<PodBody>;
}

/** A genuine Spark app: opted-in driver, executors owned by it, Services made by real add events. */
export async function victimApp(
  s: Scene,
  opts: { appId: string; driverName: string; execIds?: readonly string[]; driverUid?: string },
): Promise<Victim> {
  const { h } = s;
  const body = driverPod({ namespace: NS, appId: opts.appId, name: opts.driverName });
  const driver = h.createPod(opts.driverUid === undefined ? body : { ...body, metadata: { ...body.metadata, uid: opts.driverUid } });
  const execs = new Map<string, PodBody>();
  const victim: Victim = {
    appId: opts.appId,
    driver,
    execs,
    async addExecutor(execId, o = {}) {
      const spec = executorPod({
        namespace: NS,
        appId: opts.appId,
        execId,
        name: o.name ?? `${opts.driverName}-exec-${execId}`,
        driver: ref(driver),
        blockManagerPort: o.port,
      });
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
export async function replayClaims(s: Scene, pod: PodBody): Promise<void> {
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
export async function tenantLifecycle(s: Scene, name: string): Promise<void> {
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

export function tenantOwner(s: Scene, name: string): PodBody {
  const pod = nonSparkPod(NS, name);
  return s.h.createPod({ ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata.labels, ...OPT_IN } } });
}

export function tenantCopy(
  s: Scene,
  victim: Victim,
  o: { execId: string; name: string; owner?: { name: string; uid: string }; port?: number; hold?: boolean; appId?: string },
): PodBody {
  const spec = executorPod({
    namespace: NS,
    appId: o.appId ?? victim.appId,
    execId: o.execId,
    name: o.name,
    driver: o.owner,
    optIn: true,
    blockManagerPort: o.port,
  });
  return s.h.createPod(o.hold === true ? withHold(spec) : spec);
}

export const resourceVersions = (h: Harness): Record<string, string> =>
  Object.fromEntries(
    (h.emulator.listObjects('services', NS) as unknown as SvcObj[]).map((svc) => [svc.metadata.name, svc.metadata.resourceVersion ?? '']),
  );
