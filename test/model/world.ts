/**
 * Seeded, reproducible Spark application lifecycles for the reliability tests and the soak:
 * a plan (apps, executors, fates), the state changes applied to the emulator as they would
 * happen in a cluster, the ApiServerSource events those changes produce (with the pod
 * snapshot at that time), and the exact set of Services a correct system must end with.
 * No vitest import: test/soak/run.ts uses it too.
 */
import { executorServiceName } from '../../shared/model/naming.ts';
import { seededRandom } from '../../packages/kube-emulator/random.ts';
import type { KubeEmulator } from '../../packages/kube-emulator/index.ts';
import { type PostedReply, postPodEvent } from '../../testkit/apiserversource.ts';
import { type ExpectedService, type ForeignService, MANAGED_BY, APP, EXEC, type Obj, expectedServices } from '../../testkit/oracle.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

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
    const namespace =
      opts.unwatched !== undefined && opts.unwatched.length > 0 && chance(rng, 0.1) ? pick(rng, opts.unwatched) : pick(rng, opts.watched);
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
        const driver = this.emulator.seed(
          driverPod({ namespace: ns, appId: app.appId, name: app.driverName, optIn: app.driverOptIn }),
        ) as PodBody;
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
            if (this.emulator.getObject('pods', ns, name) !== undefined)
              this.emulator.patchObject('pods', ns, name, { metadata: { labels: OPT_IN } });
          }),
        );
      }
      if (plan.fate === 'decommissioned') out.push(() => mutate(() => this.deleteIfPresent(ns, name)));
      if (plan.fate === 'graceful') {
        out.push(() => mutate(() => this.deleteIfPresent(ns, name))); // terminating: an update with deletionTimestamp
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) !== undefined)
              this.emulator.patchObject('pods', ns, name, { metadata: { finalizers: null } });
          }),
        );
      }
      if (plan.fate === 'fails' || plan.fate === 'fails-then-deleted') {
        out.push(() =>
          mutate(() => {
            if (this.emulator.getObject('pods', ns, name) !== undefined)
              this.emulator.patchObject('pods', ns, name, { status: { phase: 'Failed' } });
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
      new Map(
        this.emulator.listObjects('pods', ns, labelSelector).map((p) => [(p as unknown as PodBody).metadata.name, p as unknown as PodBody]),
      );
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

/** A recorded event posted once, with its id (a second post of it is a redelivery). */
export const deliver = (url: string, event: RecordedEvent): Promise<PostedReply> =>
  postPodEvent(url, event.verb, event.pod, { id: event.id });

// ---- what a correct system ends with: testkit/oracle.ts -------------------------------------------

/** The Services the world's executors are owed once nothing changes any more (each executor's last state). */
export const expectedServicesOf = (world: World, watched: readonly string[], defaultPort: number): Map<string, ExpectedService> =>
  expectedServices(
    [...world.executors.values()].map((e) => e.last as unknown as Obj),
    world.emulator,
    watched,
    defaultPort,
  );

/** Services that are not ours, seeded before the events: they must come out byte for byte the same. */
export function seedForeignServices(emulator: KubeEmulator, apps: readonly AppPlan[], rng: Rng, prefix: string): ForeignService[] {
  const seeded: ForeignService[] = [];
  const seed = (body: Record<string, unknown>): void => {
    const obj = emulator.seed(body) as unknown as Obj;
    seeded.push({
      namespace: obj.metadata.namespace!,
      name: obj.metadata.name,
      snapshot: emulator.getObject('services', obj.metadata.namespace!, obj.metadata.name)!,
    });
  };
  const ns = apps[0]?.namespace ?? 'spark';
  seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: `${prefix}-web`, namespace: ns, labels: { app: 'web' } },
    spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
  });
  // Our label, but owned by a Deployment: not ours (every owner must be a v1 Pod).
  seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: `${prefix}-lookalike`,
      namespace: ns,
      labels: { [MANAGED_BY]: 'spark-exec-svc', [APP]: apps[0]?.appId ?? 'x', [EXEC]: '99' },
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
