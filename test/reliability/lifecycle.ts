/**
 * Seeded, reproducible Spark application lifecycles for the reliability tests and the soak:
 * a plan (apps, executors, fates), the state changes applied to the emulator as they would
 * happen in a cluster, the ApiServerSource events those changes produce (with the pod
 * snapshot at that time), and the exact set of Services a correct system must end with.
 * No vitest import: test/soak/run.ts uses it too.
 */
import type { Pod } from '../../shared/model/k8s-objects.ts';
import {
  BLOCK_MANAGER_PORT_NAME,
  DRIVER_POD_ANNOTATION,
  EXECUTOR_GONE_AT_ANNOTATION,
  EXECUTOR_POD_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
} from '../../shared/model/labels.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { seededRandom } from '../support/random.ts';
import type { KubeEmulator } from '../kube-emulator/index.ts';
import { type PostedReply, podEventType, podSubject, postCloudEvent } from '../support/cloudevents.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, sparkAppId } from '../support/spark-pods.ts';

// ---- randomness ------------------------------------------------------------------------------

export type Rng = () => number;

/** Seeded, reproducible across runs and machines (mulberry32). */
export const rngFrom = (seed: number): Rng => seededRandom(seed);

export const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
export const chance = (rng: Rng, p: number): boolean => rng() < p;
export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)]!;
}
export function shuffle<T>(rng: Rng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ---- plans -----------------------------------------------------------------------------------

export interface ExecutorPlan {
  readonly execId: string;
  /** The executor pod itself carries the opt-in label. */
  readonly optIn: boolean;
  /** Opt-in label added by a later update (never removed). */
  readonly lateOptIn: boolean;
  /** spark.blockManager.port as Spark passes it (SPARK_JAVA_OPT_n); undefined = BLOCK_MANAGER_PORT. */
  readonly port: number | undefined;
  /** Spark sets the driver as controller owner (cluster mode); false = found by labels. */
  readonly ownerRef: boolean;
  readonly updates: number;
  /** runs: still there at the end; decommissioned: deleted; graceful: terminating then deleted; fails: phase Failed (sometimes deleted later). */
  readonly fate: 'runs' | 'decommissioned' | 'graceful' | 'fails' | 'fails-then-deleted';
}

export interface AppPlan {
  readonly index: number;
  readonly namespace: string;
  readonly appId: string;
  readonly driverName: string;
  readonly driverOptIn: boolean;
  readonly executors: readonly ExecutorPlan[];
  /** finished: phase Succeeded, pod kept (Spark leaves completed drivers); Spark stops the executors first. */
  readonly driverFate: 'stays' | 'deleted' | 'finished' | 'finished-then-deleted';
}

export interface PlanOptions {
  readonly watched: readonly string[];
  /** Namespaces the function does not watch: events from there must cost nothing. */
  readonly unwatched?: readonly string[];
  /** Distinguishes app ids and pod names across batches in one emulator. */
  readonly prefix?: string;
}

const CUSTOM_IDS = ['My_Job.{n}', 'nightly-etl-{n}', 'A.{n}.B', `very-long-application-name-${'x'.repeat(24)}-{n}`, 'job_{n}'];

export function planApps(rng: Rng, count: number, opts: PlanOptions, firstIndex = 0): AppPlan[] {
  const apps: AppPlan[] = [];
  const prefix = opts.prefix ?? 'p';
  for (let k = 0; k < count; k++) {
    const index = firstIndex + k;
    const namespace = opts.unwatched !== undefined && opts.unwatched.length > 0 && chance(rng, 0.1) ? pick(rng, opts.unwatched) : pick(rng, opts.watched);
    const custom = chance(rng, 0.25);
    const appId = custom ? pick(rng, CUSTOM_IDS).replace('{n}', `${prefix}${index}`) : sparkAppId(Math.floor(rng() * 2 ** 31) + index);
    const optInMode = pick(rng, ['driver', 'driver', 'executors', 'some', 'none'] as const);
    const executorCount = int(rng, 1, 6);
    const executors: ExecutorPlan[] = [];
    for (let e = 1; e <= executorCount; e++) {
      const optIn = optInMode === 'executors' || (optInMode === 'some' && chance(rng, 0.5));
      executors.push({
        execId: String(e),
        optIn,
        lateOptIn: !optIn && optInMode !== 'none' && chance(rng, 0.15),
        port: chance(rng, 0.3) ? int(rng, 7000, 7999) : undefined,
        ownerRef: chance(rng, 0.85),
        updates: int(rng, 0, 2),
        fate: pick(rng, ['runs', 'runs', 'runs', 'decommissioned', 'decommissioned', 'graceful', 'fails', 'fails-then-deleted'] as const),
      });
    }
    apps.push({
      index,
      namespace,
      appId,
      driverName: `${prefix}${index}-driver`,
      driverOptIn: optInMode === 'driver',
      executors,
      driverFate: pick(rng, ['stays', 'stays', 'deleted', 'deleted', 'finished', 'finished-then-deleted'] as const),
    });
  }
  return apps;
}

// ---- the world: state changes and the events they cause ------------------------------------------

export interface RecordedEvent {
  readonly id: string;
  readonly verb: 'add' | 'update' | 'delete';
  /** The pod as the ApiServerSource saw it (for delete: its last state). */
  readonly pod: PodBody;
}

interface ExecutorRecord {
  readonly app: AppPlan;
  readonly plan: ExecutorPlan;
  last: PodBody;
}

const podKey = (ns: string, name: string): string => `${ns}/${name}`;

/**
 * Applies lifecycles to an emulator through its synchronous back door (no HTTP, so nothing the
 * function's audit could mistake for its own requests) and records the events a real
 * ApiServerSource would send: one per observed change, with the object at that time.
 */
export class World {
  readonly emulator: KubeEmulator;
  readonly events: RecordedEvent[] = [];
  readonly executors = new Map<string, ExecutorRecord>();
  readonly drivers = new Map<number, { name: string; uid: string; namespace: string; last: PodBody }>();
  private readonly idPrefix: string;
  private seq = 0;

  constructor(emulator: KubeEmulator, idPrefix: string) {
    this.emulator = emulator;
    this.idPrefix = idPrefix;
  }

  /** The actions of one app, in the order they happen; run them interleaved with other apps' as you like. */
  actions(app: AppPlan, rng: Rng): Array<() => RecordedEvent[]> {
    const ns = app.namespace;
    const out: Array<() => RecordedEvent[]> = [];
    // Every pod of the app carries its app id label, and a change only ever affects the app's own pods.
    const mutate = (change: () => void): RecordedEvent[] => this.mutate(ns, change, `spark-app-selector=${app.appId}`);
    out.push(() =>
      mutate(() => {
        const driver = this.emulator.seed(driverPod({ namespace: ns, appId: app.appId, name: app.driverName, optIn: app.driverOptIn })) as PodBody;
        this.drivers.set(app.index, { name: driver.metadata.name, uid: driver.metadata.uid!, namespace: ns, last: driver });
      }),
    );
    for (const plan of app.executors) {
      const name = `${app.driverName.replace(/-driver$/, '')}-exec-${plan.execId}`;
      out.push(() =>
        mutate(() => {
          const driver = this.drivers.get(app.index)!;
          const body = executorPod({
            namespace: ns,
            appId: app.appId,
            execId: plan.execId,
            name,
            driver: plan.ownerRef ? { name: driver.name, uid: driver.uid } : undefined,
            blockManagerPort: plan.port,
            optIn: plan.optIn,
            phase: 'Pending',
          });
          if (plan.fate === 'graceful') (body.metadata as Record<string, unknown>)['finalizers'] = ['reliability.test/hold'];
          const pod = this.emulator.seed(body) as PodBody;
          this.executors.set(podKey(ns, name), { app, plan, last: pod });
        }),
      );
      for (let u = 0; u < plan.updates; u++) {
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) === undefined) return;
            const patch = pick(rng, [
              { status: { phase: 'Running', podIP: `10.244.${int(rng, 0, 255)}.${int(rng, 1, 254)}` } },
              { metadata: { labels: { 'spark-exec-inactive': String(chance(rng, 0.5)) } } },
              { metadata: { annotations: { 'reliability.test/touched': String(u) } } },
            ]);
            this.emulator.patchObject('pods', ns, name, patch);
          }),
        );
      }
      if (plan.lateOptIn) {
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) !== undefined) this.emulator.patchObject('pods', ns, name, { metadata: { labels: OPT_IN } });
          }),
        );
      }
      if (plan.fate === 'decommissioned') out.push(() => mutate(() => this.deleteIfPresent(ns, name)));
      if (plan.fate === 'graceful') {
        out.push(() => mutate(() => this.deleteIfPresent(ns, name))); // terminating: an update with deletionTimestamp
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) !== undefined) this.emulator.patchObject('pods', ns, name, { metadata: { finalizers: null } });
          }),
        );
      }
      if (plan.fate === 'fails' || plan.fate === 'fails-then-deleted') {
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) !== undefined) this.emulator.patchObject('pods', ns, name, { status: { phase: 'Failed' } });
          }),
        );
        if (plan.fate === 'fails-then-deleted') out.push(() => mutate(() => this.deleteIfPresent(ns, name)));
      }
    }
    if (app.driverFate === 'finished' || app.driverFate === 'finished-then-deleted') {
      out.push(() =>
        mutate(() => {
          this.emulator.patchObject('pods', ns, app.driverName, { status: { phase: 'Succeeded' } });
          // A finishing driver stops its executors (graceful ones are released at once here).
          for (const plan of app.executors) {
            const name = `${app.driverName.replace(/-driver$/, '')}-exec-${plan.execId}`;
            if (this.emulator.getObject('pods', ns, name) === undefined) continue;
            this.emulator.patchObject('pods', ns, name, { metadata: { finalizers: null } });
            this.deleteIfPresent(ns, name);
          }
        }),
      );
    }
    if (app.driverFate === 'deleted' || app.driverFate === 'finished-then-deleted') {
      out.push(() =>
        mutate(() => {
          // Release held executors first, then delete the driver: GC takes its dependents with it.
          for (const plan of app.executors) {
            const name = `${app.driverName.replace(/-driver$/, '')}-exec-${plan.execId}`;
            if (plan.fate === 'graceful' && this.emulator.getObject('pods', ns, name) !== undefined) {
              this.emulator.patchObject('pods', ns, name, { metadata: { finalizers: null } });
            }
          }
          this.deleteIfPresent(ns, app.driverName);
        }),
      );
    }
    return out;
  }

  private deleteIfPresent(ns: string, name: string): void {
    if (this.emulator.getObject('pods', ns, name) !== undefined) this.emulator.deleteObject('pods', ns, name);
  }

  /** Runs a change and records one event per pod that appeared, changed or vanished. */
  mutate(ns: string, change: () => void, labelSelector?: string): RecordedEvent[] {
    const pods = (): Map<string, PodBody> =>
      new Map(this.emulator.listObjects('pods', ns, labelSelector).map((p) => [(p as unknown as PodBody).metadata.name, p as unknown as PodBody]));
    const before = pods();
    change();
    const after = pods();
    const recorded: RecordedEvent[] = [];
    const record = (verb: RecordedEvent['verb'], pod: PodBody): void => {
      recorded.push({ id: `${this.idPrefix}-${++this.seq}`, verb, pod });
      const exec = this.executors.get(podKey(ns, pod.metadata.name));
      if (exec !== undefined && exec.last.metadata.uid === pod.metadata.uid) exec.last = pod;
      for (const d of this.drivers.values()) if (d.uid === pod.metadata.uid) d.last = pod;
    };
    for (const [name, pod] of after) {
      const old = before.get(name);
      if (old === undefined) record('add', pod);
      else if (rv(old) !== rv(pod)) record('update', pod);
    }
    for (const [name, pod] of before) if (!after.has(name)) record('delete', pod);
    this.events.push(...recorded);
    return recorded;
  }

  /** Runs every app's actions, interleaved across apps at random (per-app order kept). */
  runAll(apps: readonly AppPlan[], rng: Rng, between?: (recorded: RecordedEvent[]) => Promise<void>): Promise<void> | void {
    const queues = apps.map((app) => this.actions(app, rng));
    const step = (): (() => RecordedEvent[]) | undefined => {
      const open = queues.filter((q) => q.length > 0);
      if (open.length === 0) return undefined;
      return pick(rng, open).shift();
    };
    if (between === undefined) {
      for (let action = step(); action !== undefined; action = step()) action();
      return;
    }
    return (async () => {
      for (let action = step(); action !== undefined; action = step()) await between(action());
    })();
  }
}

const rv = (pod: PodBody): string => String((pod.metadata as Record<string, unknown>)['resourceVersion'] ?? '');

// ---- delivery ----------------------------------------------------------------------------------

/** Each event 1–`maxCopies` times (same id: a redelivery), all shuffled: delete before add, update after delete… */
export function deliveryOrder(rng: Rng, events: readonly RecordedEvent[], maxCopies = 3): RecordedEvent[] {
  const copies: RecordedEvent[] = [];
  for (const event of events) for (let c = int(rng, 1, maxCopies); c > 0; c--) copies.push(event);
  return shuffle(rng, copies);
}

export function deliver(url: string, event: RecordedEvent): Promise<PostedReply> {
  return postCloudEvent(url, {
    id: event.id,
    type: podEventType(event.verb),
    data: event.pod,
    subject: podSubject(event.pod.metadata.namespace, event.pod.metadata.name),
  });
}

export function sweepEvent(url: string, id = `sweep-${Date.now()}`): Promise<PostedReply> {
  return postCloudEvent(url, { id, type: 'dev.knative.sources.ping', data: { action: 'sweep' }, source: '/apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep' });
}

// ---- what a correct system ends with ---------------------------------------------------------------

export interface ExpectedService {
  readonly namespace: string;
  readonly name: string;
  readonly appId: string;
  readonly execId: string;
  readonly executorPodName: string;
  readonly executorUid: string;
  readonly driverName: string;
  readonly driverUid: string;
  readonly port: number;
  /**
   * The executor pod is gone (deleted or in a terminal phase). Its Service may exist or not
   * (a Service is only ever created for a running executor, so a lost or late add leaves none),
   * but if it exists it must carry the cool-down mark.
   */
  readonly gone: boolean;
}

/** Written from the specification, not from the code under test: a terminal phase ends a pod; being deleted does not. */
const TERMINAL = new Set(['Succeeded', 'Failed']);
const optedIn = (pod: { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } } | undefined): boolean =>
  pod?.metadata.labels?.['spark-exec-svc/enabled'] === 'true' || pod?.metadata.annotations?.['spark-exec-svc/enabled'] === 'true';
type PodNow = { metadata: { uid?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; status?: { phase?: string } };

/**
 * For every opted-in executor with a driver owner reference in a watched namespace whose driver
 * pod still lives (exists with its UID, not terminal): its Service, marked gone iff the executor
 * pod is gone. Nothing else of ours.
 */
export function expectedServices(world: World, watched: readonly string[], defaultPort: number): Map<string, ExpectedService> {
  const expected = new Map<string, ExpectedService>();
  for (const { app, plan, last } of world.executors.values()) {
    if (!watched.includes(app.namespace) || !plan.ownerRef) continue;
    const driver = world.drivers.get(app.index)!;
    const driverNow = world.emulator.getObject('pods', app.namespace, driver.name) as PodNow | undefined;
    const driverLives = driverNow !== undefined && driverNow.metadata.uid === driver.uid && !TERMINAL.has(driverNow.status?.phase ?? '');
    if (!driverLives) continue;
    if (!optedIn(last) && !optedIn(driverNow)) continue;
    const podNow = world.emulator.getObject('pods', app.namespace, last.metadata.name) as PodNow | undefined;
    const alive = podNow !== undefined && podNow.metadata.uid === last.metadata.uid && !TERMINAL.has(podNow.status?.phase ?? '');
    // Issue 17: only a running executor claims its slot — a Pending one gets no Service (and never had one: phases do not go back).
    if (alive && podNow.status?.phase !== 'Running') continue;
    const name = executorServiceName(app.appId, plan.execId);
    expected.set(`${app.namespace}/${name}`, {
      namespace: app.namespace,
      name,
      appId: app.appId,
      execId: plan.execId,
      executorPodName: last.metadata.name,
      executorUid: last.metadata.uid!,
      driverName: driver.name,
      driverUid: driver.uid,
      port: plan.port ?? defaultPort,
      gone: !alive,
    });
  }
  return expected;
}

export interface ForeignService {
  readonly namespace: string;
  readonly name: string;
  readonly snapshot: Record<string, unknown>;
}

type Svc = {
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<Record<string, unknown>>;
  };
  spec?: { type?: string; selector?: Record<string, string>; ports?: Array<Record<string, unknown>> };
};

/** Every difference between the emulator's Services and what a correct system must have; [] = converged. */
export function mismatches(
  emulator: KubeEmulator,
  expected: Map<string, ExpectedService>,
  namespaces: readonly string[],
  foreign: readonly ForeignService[] = [],
): string[] {
  const problems: string[] = [];
  const foreignKeys = new Set(foreign.map((f) => `${f.namespace}/${f.name}`));
  for (const f of foreign) {
    const now = emulator.getObject('services', f.namespace, f.name);
    if (JSON.stringify(now) !== JSON.stringify(f.snapshot)) problems.push(`foreign Service ${f.namespace}/${f.name} was changed or removed`);
  }
  const seen = new Set<string>();
  for (const ns of namespaces) {
    for (const raw of emulator.listObjects('services', ns)) {
      const svc = raw as unknown as Svc;
      const key = `${ns}/${svc.metadata.name}`;
      if (foreignKeys.has(key)) continue;
      const want = expected.get(key);
      if (want === undefined) {
        problems.push(`unexpected Service ${key} (labels ${JSON.stringify(svc.metadata.labels ?? {})}, owner ${JSON.stringify(svc.metadata.ownerReferences?.[0]?.['name'])})`);
        continue;
      }
      seen.add(key);
      problems.push(...checkService(svc, want).map((p) => `${key}: ${p}`));
    }
  }
  for (const [key, want] of expected) {
    if (!seen.has(key) && !foreignKeys.has(key) && !want.gone) problems.push(`missing Service ${key} (executor ${want.executorPodName})`);
  }
  return problems;
}

function checkService(svc: Svc, want: ExpectedService): string[] {
  const p: string[] = [];
  const selector = { [SPARK_APP_ID_LABEL]: want.appId, [SPARK_EXECUTOR_ID_LABEL]: want.execId };
  const labels = svc.metadata.labels ?? {};
  if (labels[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE || labels[SPARK_APP_ID_LABEL] !== want.appId || labels[SPARK_EXECUTOR_ID_LABEL] !== want.execId) {
    p.push(`labels ${JSON.stringify(labels)}`);
  }
  if (svc.spec?.type !== 'ClusterIP') p.push(`type ${svc.spec?.type}`);
  if (JSON.stringify(sortKeys(svc.spec?.selector ?? {})) !== JSON.stringify(sortKeys(selector))) p.push(`selector ${JSON.stringify(svc.spec?.selector)}`);
  const ports = svc.spec?.ports ?? [];
  const port = ports[0];
  if (ports.length !== 1 || port?.['name'] !== BLOCK_MANAGER_PORT_NAME || port['port'] !== want.port || port['targetPort'] !== want.port || port['protocol'] !== 'TCP') {
    p.push(`ports ${JSON.stringify(ports)}, want ${want.port}`);
  }
  const owners = svc.metadata.ownerReferences ?? [];
  const owner = owners[0];
  if (owners.length !== 1 || owner?.['uid'] !== want.driverUid || owner['name'] !== want.driverName || owner['kind'] !== 'Pod' || owner['apiVersion'] !== 'v1') {
    p.push(`owners ${JSON.stringify(owners)}, want ${want.driverName}/${want.driverUid}`);
  }
  const annotations = svc.metadata.annotations ?? {};
  if (annotations[EXECUTOR_POD_ANNOTATION] !== want.executorPodName) p.push(`executor-pod annotation ${annotations[EXECUTOR_POD_ANNOTATION]}`);
  if (annotations['spark-exec-svc/executor-uid'] !== want.executorUid) p.push(`executor-uid annotation ${annotations['spark-exec-svc/executor-uid']}`);
  if (annotations[DRIVER_POD_ANNOTATION] !== want.driverName) p.push(`driver-pod annotation ${annotations[DRIVER_POD_ANNOTATION]}`);
  const marked = annotations[EXECUTOR_GONE_AT_ANNOTATION] !== undefined;
  if (marked !== want.gone) p.push(want.gone ? 'executor gone but no cool-down mark' : 'executor alive but marked gone');
  return p;
}

function sortKeys(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** Services that are not ours, seeded before the events: they must come out byte for byte the same. */
export function seedForeignServices(emulator: KubeEmulator, apps: readonly AppPlan[], rng: Rng, prefix: string): ForeignService[] {
  const seeded: ForeignService[] = [];
  const seed = (body: Record<string, unknown>): void => {
    const obj = emulator.seed(body) as Svc;
    seeded.push({ namespace: obj.metadata.namespace, name: obj.metadata.name, snapshot: emulator.getObject('services', obj.metadata.namespace, obj.metadata.name)! });
  };
  const ns = apps[0]?.namespace ?? 'spark';
  seed({ apiVersion: 'v1', kind: 'Service', metadata: { name: `${prefix}-web`, namespace: ns, labels: { app: 'web' } }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } });
  // Our label, but owned by a Deployment: not ours (every owner must be a v1 Pod).
  seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: `${prefix}-lookalike`,
      namespace: ns,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, [SPARK_APP_ID_LABEL]: apps[0]?.appId ?? 'x', [SPARK_EXECUTOR_ID_LABEL]: '99' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'someone', uid: `deploy-${prefix}` }],
    },
    spec: { selector: { app: 'lookalike' }, ports: [{ port: 7079 }] },
  });
  // Someone else's Service squatting the exact name one of our executors needs.
  const victim = apps.length > 0 ? pick(rng, apps) : undefined;
  const exec = victim === undefined ? undefined : pick(rng, victim.executors);
  if (victim !== undefined && exec !== undefined) {
    seed({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: executorServiceName(victim.appId, exec.execId), namespace: victim.namespace, labels: { team: 'someone-else' } },
      spec: { selector: { app: 'theirs' }, ports: [{ name: 'http', port: 80 }] },
    });
  }
  return seeded;
}
