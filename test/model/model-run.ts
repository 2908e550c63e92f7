/**
 * One run of the model-based property test (model.test.ts): the cluster's changes and the events
 * they cause, their deliveries and sweeps, the invariant after every step and the oracle at the end.
 * The invariant's pieces come from testkit/oracle.ts; the model adds what only it knows: which
 * executors the function had a chance to see (covered) and which slots a tenant contested.
 */
import type { KubeEmulator } from '../../packages/kube-emulator/index.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { podEventType, podSubject, postCloudEvent, postSweep, sleep } from '../../testkit/apiserversource.ts';
import type { Harness } from '../../testkit/harness.ts';
import {
  APP,
  EXEC,
  EXECUTOR_POD,
  EXECUTOR_UID,
  GONE_AT,
  MANAGED_BY,
  type Obj,
  capsExcuse,
  type Ref,
  controllerPod,
  optedIn,
  selectsExactly,
  shapeProblems,
  terminal,
} from '../../testkit/oracle.ts';
import { OPT_IN, type PodBody, driverPod, executorPod, nonSparkPod, sparkAppId } from '../../testkit/spark-pods.ts';
import type { Proxy as RecordingProxy } from './recording-proxy.ts';
import { type Rng, chance, deliver, int, pick, rngFrom, shuffle } from './world.ts';

export const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 12);
export const STEPS = Number(process.env['PROPERTY_STEPS'] ?? 150);
export const BASE_SEED = Number(process.env['PROPERTY_SEED'] ?? 20_260_501);
export const NS = 'spark';
export const COOLDOWN_SECONDS = 60;
/** How much earlier than its cool-down a delete may look on whole-second clocks read a little late (shared/rules/decide.ts). */
const CLOCK_TOLERANCE_MS = 3_000;
/** The second instance's own clock is this far ahead of the API server's: more than the cool-down. */
export const SECOND_INSTANCE_SKEW_MS = 10 * 60_000;
export const ENV = { WATCH_NAMESPACES: NS, COOLDOWN_SECONDS: String(COOLDOWN_SECONDS), OPT_IN_MODE: 'label', BLOCK_MANAGER_PORT: '7079' };

// Keys as the README and docs name them (deliberately not imported from the code under test).

/** Custom application ids that new runs reuse; the driver pod keeps its name across runs (mostly). */
export const CUSTOM_APPS = [
  { appId: 'nightly-etl', slug: 'nightly-etl' },
  { appId: 'My_Job.1', slug: 'my-job-1' },
  { appId: 'job_a.b', slug: 'job-a-b' },
] as const;
/** Someone else's Service holds the name this slot needs: it is exempt, and must never be touched. */
export const SQUATTED = { appId: 'nightly-etl', execId: '3' };

// ---- totals, for the summary line ---------------------------------------------------------------

export const totals = {
  runs: 0,
  /** Checks at which a live executor's missing Service was excused by full caps (the caps variant). */
  capExcused: 0,
  /** Services deleted to make room for a live executor at a cap, as the function reported them. */
  gaveWay: 0,
  steps: 0,
  events: 0,
  deliveries: 0,
  lost: 0,
  redelivered: 0,
  forged: 0,
  sweeps: 0,
  checks: 0,
  serviceAssertions: 0,
  tenants: 0,
  /** Tenant pods with an owner reference the function cannot read (issue 17, class 1). */
  unreadableTenants: 0,
  writes: 0,
};

// ---- the model ------------------------------------------------------------------------------------

export type OptInMode = 'driver' | 'executors' | 'some' | 'late' | 'none';

export interface Run {
  readonly id: number;
  readonly appId: string;
  readonly mode: 'cluster' | 'client';
  readonly owner: Ref;
  readonly optIn: OptInMode;
  readonly podPrefix: string;
  /** Executors name their owner (controller ownerReference); false: client mode without spark.kubernetes.driver.pod.name. */
  readonly owned: boolean;
  readonly maxExec: number;
  nextExec: number;
}

export interface Exec {
  readonly run: Run;
  readonly appId: string;
  readonly execId: string;
  readonly name: string;
  readonly uid: string;
  readonly graceful: boolean;
  /** Its block-manager port: the pod annotation, else -Dspark.blockManager.port, else BLOCK_MANAGER_PORT (7079). */
  readonly port: number;
  /** Will get the opt-in label by a later update. */
  lateOptIn: boolean;
  /** World version at which it became opted in (its owner lives from its creation on). */
  eligibleSince: number | undefined;
  /** The function had a chance to see it in that state: a delivered event recorded since, or a complete sweep started since. */
  covered: boolean;
  /** A tenant's copy that could get a Service claimed its slot before its own Service existed. */
  contested: boolean;
  /** The caps were full (of Services not gone-marked) when the function last had a chance to see it: it may lack its Service. */
  capExcused: boolean;
  failAt?: number;
  releaseAt?: number;
}

export interface Caps {
  readonly cap: number;
  readonly appCap: number;
}

/**
 * How a tenant's copy is owned. 'unreadable-owner': an owner reference whose UID is longer than
 * the function keeps (Kubernetes only asks that it be non-empty), pointing at no pod — an item the
 * function cannot read must be skipped, never fail a list (issue 17, class 1).
 */
export type TenantKind = 'no-owner' | 'dangling-owner' | 'own-owner' | 'victim-driver' | 'unreadable-owner';

export interface Tenant {
  readonly name: string;
  readonly uid: string;
  readonly appId: string;
  readonly execId: string;
  readonly kind: TenantKind;
  readonly ctl: string | undefined;
}

export interface Recorded {
  readonly id: string;
  readonly verb: 'add' | 'update' | 'delete';
  readonly pod: PodBody;
  /** World version of the change that caused it. */
  readonly version: number;
}

export interface Step {
  readonly label: string;
  readonly mutation?: () => void;
  readonly forged?: ReadonlyArray<{ readonly verb: 'add' | 'update' | 'delete'; readonly pod: PodBody; readonly what: string }>;
}

export class ModelRun {
  readonly seed: number;
  private readonly rng: Rng;
  private readonly emulator: KubeEmulator;
  private readonly proxy: RecordingProxy;
  private readonly instances: readonly Harness[];
  private readonly clock: { now: number };
  private readonly foreign: Map<string, string>;
  private version = 0;
  private stepNo = 0;
  private eventSeq = 0;
  private runSeq = 0;
  private tenantSeq = 0;
  private writesChecked = 0;
  private readonly runs: Run[] = [];
  private readonly execs: Exec[] = [];
  private readonly execByUid = new Map<string, Exec>();
  private readonly tenants: Tenant[] = [];
  private queue: Array<{ event: Recorded; due: number }> = [];
  private readonly trace: string[] = [];
  readonly violations: string[] = [];
  /** The caps variant: MAX_SERVICES_PER_NAMESPACE / MAX_SERVICES_PER_APPLICATION of the instances, and longer-lived runs. */
  private readonly caps: Caps | undefined;
  /** Whether the caps were full for an application at the last check (before this step's changes). */
  private fullBefore: (appId: string) => boolean = () => false;

  constructor(
    seed: number,
    emulator: KubeEmulator,
    proxy: RecordingProxy,
    instances: readonly Harness[],
    clock: { now: number },
    foreign: Map<string, string>,
    caps?: Caps,
  ) {
    this.caps = caps;
    this.seed = seed;
    this.rng = rngFrom(seed);
    this.emulator = emulator;
    this.proxy = proxy;
    this.instances = instances;
    this.clock = clock;
    this.foreign = foreign;
  }

  // ---- reading the cluster ----

  /** Pods change only through this model (the function never writes one): one listing per change. */
  private podCache: Map<string, Obj> | undefined;

  private allPods(): Map<string, Obj> {
    this.podCache ??= new Map(this.emulator.listObjects('pods', NS).map((p) => [(p as unknown as Obj).metadata.name, p as unknown as Obj]));
    return this.podCache;
  }

  private pod(name: string): Obj | undefined {
    return this.allPods().get(name);
  }

  private livePod(ref: Ref): Obj | undefined {
    const pod = this.pod(ref.name);
    return pod !== undefined && pod.metadata.uid === ref.uid && !terminal(pod) ? pod : undefined;
  }

  private service(name: string): Obj | undefined {
    return this.emulator.getObject('services', NS, name) as Obj | undefined;
  }

  /** The executor's own Service as the invariant wants it: made for it, unmarked, owned by its owner. */
  private properService(x: Exec): boolean {
    const svc = this.service(executorServiceName(x.appId, x.execId));
    const owners = svc?.metadata.ownerReferences ?? [];
    return (
      svc !== undefined &&
      svc.metadata.annotations?.[GONE_AT] === undefined &&
      svc.metadata.annotations?.[EXECUTOR_UID] === x.uid &&
      owners.length === 1 &&
      owners[0]!.uid === x.run.owner.uid
    );
  }

  /** Could this pod get a Service of its own by the rules: a live controller owner pod, and opted in. */
  private couldBeServed(pod: Obj): boolean {
    const owner = controllerPod(pod);
    const ownerPod = owner === undefined ? undefined : this.livePod(owner);
    return ownerPod !== undefined && !terminal(pod) && (optedIn(pod) || optedIn(ownerPod));
  }

  private note(line: string): void {
    this.trace.push(`#${this.stepNo} ${line}`);
    if (this.trace.length > 120) this.trace.shift();
  }

  // ---- changes and the events they cause ----

  private sparkPods(): Map<string, Obj> {
    const role = (p: Obj): string | undefined => p.metadata.labels?.['spark-role'];
    return new Map([...this.allPods()].filter(([, p]) => role(p) === 'driver' || role(p) === 'executor'));
  }

  /** One change to the cluster, and the events the ApiServerSource (spark-role in (driver,executor)) sends for it. */
  private mutate(what: string, change: () => void): void {
    this.version++;
    const before = this.sparkPods();
    this.podCache = undefined;
    try {
      change();
    } finally {
      this.podCache = undefined;
    }
    const after = this.sparkPods();
    const recorded: Recorded[] = [];
    const record = (verb: Recorded['verb'], pod: Obj): void => {
      recorded.push({ id: `m${this.seed}-${++this.eventSeq}`, verb, pod: pod as unknown as PodBody, version: this.version });
    };
    for (const [name, old] of before) {
      const now = after.get(name);
      if (now === undefined || now.metadata.uid !== old.metadata.uid) record('delete', old);
    }
    for (const [name, pod] of after) {
      const old = before.get(name);
      if (old === undefined || old.metadata.uid !== pod.metadata.uid) record('add', pod);
      else if (old.metadata.resourceVersion !== pod.metadata.resourceVersion) record('update', pod);
    }
    totals.events += recorded.length;
    this.note(`${what}${recorded.length === 0 ? '' : ` → ${recorded.map((e) => `${e.verb} ${e.pod.metadata.name}`).join(', ')}`}`);
    // Each event: lost, delivered once or twice, each copy within the next few steps (reordering).
    for (const event of recorded) {
      if (chance(this.rng, 0.12)) {
        totals.lost++;
        continue;
      }
      for (let copies = chance(this.rng, 0.2) ? 2 : 1; copies > 0; copies--)
        this.queue.push({ event, due: this.stepNo + int(this.rng, 0, 3) });
    }
  }

  private liveRuns(): Run[] {
    return this.runs.filter((r) => this.livePod(r.owner) !== undefined);
  }

  private liveExecs(): Exec[] {
    return this.execs.filter((x) => this.livePod(x) !== undefined);
  }

  private liveTenants(): Tenant[] {
    return this.tenants.filter((t) => this.pod(t.name)?.metadata.uid === t.uid);
  }

  private startRun(): Step {
    const id = ++this.runSeq;
    const mode = chance(this.rng, 0.2) ? 'client' : 'cluster';
    let appId = sparkAppId(int(this.rng, 1, 2 ** 30));
    let ownerName = mode === 'client' ? `notebook-${id}` : `app${id}-driver`;
    let podPrefix = `app${id}`;
    if (mode === 'cluster' && chance(this.rng, 0.45)) {
      const custom = pick(this.rng, CUSTOM_APPS);
      // A new run of a custom app id once the previous one has ended (finished or deleted).
      if (!this.liveRuns().some((r) => r.appId === custom.appId)) {
        appId = custom.appId;
        const sameName = chance(this.rng, 0.7);
        ownerName = sameName ? `${custom.slug}-driver` : `${custom.slug}-driver-r${id}`;
        // Like the Spark operator: the same executor pod names in every run (when the old pods are gone).
        podPrefix = sameName && chance(this.rng, 0.5) ? custom.slug : `${custom.slug}-r${id}`;
      }
    }
    const optIn: OptInMode =
      mode === 'client'
        ? chance(this.rng, 0.8)
          ? 'driver'
          : 'executors'
        : pick(this.rng, ['driver', 'driver', 'executors', 'some', 'late', 'none'] as const);
    // With caps, runs are long and replace many executors: dead executors' Services pile up near the caps.
    const maxExec = this.caps === undefined ? int(this.rng, 2, 8) : int(this.rng, 4, 3 * this.caps.appCap);
    const owned = mode === 'cluster' || chance(this.rng, 0.85);
    const byAnnotation = chance(this.rng, 0.25);
    return {
      label: `start run ${id}`,
      mutation: () => {
        if (this.pod(ownerName) !== undefined)
          this.mutate(`delete the previous ${ownerName} (same name for the new run)`, () =>
            this.emulator.deleteObject('pods', NS, ownerName),
          );
        const how = `${optIn}${optIn === 'driver' && byAnnotation ? ' (annotation)' : ''}${owned ? '' : ', executors without owner reference'}`;
        this.mutate(`start run ${id}: ${mode} ${appId} owner ${ownerName} opt-in ${how}`, () => {
          let body: PodBody;
          if (mode === 'cluster') body = driverPod({ namespace: NS, appId, name: ownerName, optIn: optIn === 'driver' && !byAnnotation });
          else {
            body = nonSparkPod(NS, ownerName);
            body.metadata.labels = { app: 'jupyter', ...(optIn === 'driver' && !byAnnotation ? OPT_IN : {}) };
          }
          if (optIn === 'driver' && byAnnotation) body.metadata.annotations = { ...OPT_IN };
          const created = this.emulator.seed(body) as Obj;
          this.runs.push({
            id,
            appId,
            mode,
            owner: { name: ownerName, uid: created.metadata.uid! },
            optIn,
            podPrefix,
            owned,
            maxExec,
            nextExec: 1,
          });
        });
      },
    };
  }

  private addExecutor(run: Run): Step {
    const execId = String(run.nextExec++);
    let name = `${run.podPrefix}-exec-${execId}`;
    if (this.pod(name) !== undefined) name = `${run.podPrefix}-r${run.id}-exec-${execId}`; // the previous run's pod still holds the name
    const optIn = run.optIn === 'executors' || (run.optIn === 'some' && chance(this.rng, 0.5));
    const byAnnotation = optIn && chance(this.rng, 0.25);
    const graceful = chance(this.rng, 0.3);
    const portFrom = pick(this.rng, ['default', 'default', 'java-opt', 'annotation'] as const);
    const port = portFrom === 'default' ? 7079 : int(this.rng, 7000, 7999);
    const phase = chance(this.rng, 0.5) ? 'Pending' : 'Running';
    return {
      label: `add ${name}`,
      mutation: () =>
        this.mutate(
          `add ${name} (${phase}, port ${port} from ${portFrom}${optIn ? (byAnnotation ? ', opted in (annotation)' : ', opted in') : ''}${graceful ? ', finalizer' : ''})`,
          () => {
            const body = executorPod({
              namespace: NS,
              appId: run.appId,
              execId,
              name,
              driver: run.owned ? run.owner : undefined,
              optIn: optIn && !byAnnotation,
              phase,
              blockManagerPort: portFrom === 'java-opt' ? port : undefined,
            });
            body.metadata.annotations = {
              ...(byAnnotation ? OPT_IN : {}),
              ...(portFrom === 'annotation' ? { 'spark-exec-svc/block-manager-port': String(port) } : {}),
            };
            if (graceful) (body.metadata as Record<string, unknown>)['finalizers'] = ['model.test/graceful'];
            const created = this.emulator.seed(body) as Obj;
            const ownerPod = this.livePod(run.owner);
            const x: Exec = {
              run,
              appId: run.appId,
              execId,
              name,
              uid: created.metadata.uid!,
              graceful,
              port,
              lateOptIn: run.optIn === 'late',
              // Issue 17: only a running executor claims its slot (phase Running: the kubelet's).
              eligibleSince: (optIn || (ownerPod !== undefined && optedIn(ownerPod))) && phase === 'Running' ? this.version : undefined,
              covered: false,
              contested: false,
              capExcused: false,
            };
            // A tenant's copy that could be served already claims this slot: the function cannot tell them apart.
            for (const t of this.liveTenants()) {
              const pod = this.pod(t.name);
              if (t.appId === x.appId && t.execId === x.execId && pod !== undefined && this.couldBeServed(pod)) x.contested = true;
            }
            this.execs.push(x);
            this.execByUid.set(x.uid, x);
          },
        ),
    };
  }

  private updateExecutor(x: Exec): Step {
    const late = x.lateOptIn && chance(this.rng, 0.6);
    const patch = late
      ? { metadata: { labels: OPT_IN } }
      : pick(this.rng, [
          { status: { phase: 'Running', podIP: `10.244.${int(this.rng, 0, 255)}.${int(this.rng, 1, 254)}` } },
          { metadata: { labels: { 'spark-exec-inactive': String(chance(this.rng, 0.5)) } } },
          { metadata: { annotations: { 'model.test/touched': String(int(this.rng, 0, 1e6)) } } },
        ]);
    return {
      label: `update ${x.name}`,
      mutation: () =>
        this.mutate(`update ${x.name}${late ? ' (late opt-in)' : ''}`, () => {
          this.emulator.patchObject('pods', NS, x.name, patch);
          if (late) x.lateOptIn = false;
          // Eligible once opted in (itself or its owner) and running, whichever came last.
          const now = this.pod(x.name);
          if (x.eligibleSince === undefined && now !== undefined && now.status?.phase === 'Running' && this.couldBeServed(now))
            x.eligibleSince = this.version;
        }),
    };
  }

  private endExecutor(x: Exec): Step {
    const how = x.graceful ? 'graceful' : pick(this.rng, ['delete', 'delete', 'Failed', 'Failed', 'Succeeded'] as const);
    return {
      label: `end ${x.name}`,
      mutation: () =>
        this.mutate(
          `${how === 'graceful' ? 'graceful delete (deletionTimestamp)' : how === 'delete' ? 'delete' : `phase ${how}`} ${x.name}`,
          () => {
            if (how === 'graceful' || how === 'delete') this.emulator.deleteObject('pods', NS, x.name);
            else this.emulator.patchObject('pods', NS, x.name, { status: { phase: how } });
          },
        ),
    };
  }

  private deleteEnded(name: string): Step {
    return {
      label: `delete ended ${name}`,
      mutation: () => this.mutate(`delete ended pod ${name}`, () => this.emulator.deleteObject('pods', NS, name)),
    };
  }

  private finishRun(run: Run): Step {
    return {
      label: `finish run ${run.id}`,
      mutation: () =>
        this.mutate(`finish run ${run.id}: ${run.owner.name} Succeeded (kept), its executors stopped`, () => {
          this.emulator.patchObject('pods', NS, run.owner.name, { status: { phase: 'Succeeded' } });
          for (const x of this.execs) {
            const pod = this.emulator.getObject('pods', NS, x.name) as Obj | undefined;
            if (x.run === run && pod?.metadata.uid === x.uid && pod.metadata.deletionTimestamp === undefined)
              this.emulator.deleteObject('pods', NS, x.name);
          }
        }),
    };
  }

  private deleteOwner(run: Run): Step {
    return {
      label: `delete ${run.owner.name}`,
      mutation: () =>
        this.mutate(`delete owner ${run.owner.name} of run ${run.id} (GC)`, () => this.emulator.deleteObject('pods', NS, run.owner.name)),
    };
  }

  private tenantCopy(victim: Exec): Step {
    const n = ++this.tenantSeq;
    const kind = pick(this.rng, ['no-owner', 'dangling-owner', 'own-owner', 'victim-driver', 'unreadable-owner'] as const);
    const name = `tenant-${n}`;
    const ctl = kind === 'own-owner' || kind === 'dangling-owner' ? `tenant-ctl-${n}` : undefined;
    const tenantOptIn = chance(this.rng, 0.5);
    const ctlOptIn = chance(this.rng, 0.5);
    return {
      label: `tenant ${name}`,
      mutation: () => {
        const labels = { [APP]: victim.appId, [EXEC]: victim.execId, 'spark-role': 'executor', ...(tenantOptIn ? OPT_IN : {}) };
        const body: PodBody = {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name, namespace: NS, labels },
          spec: { containers: [{ name: 'copy', image: 'busybox:1.36' }] },
          status: { phase: 'Running' },
        };
        let uid = '';
        this.mutate(`tenant ${name} copies ${victim.name}'s labels (${kind}${tenantOptIn ? ', opted in' : ''})`, () => {
          if (ctl !== undefined) {
            const owner = nonSparkPod(NS, ctl);
            owner.metadata.labels = { app: 'tenant', ...(ctlOptIn ? OPT_IN : {}) };
            const created = this.emulator.seed(owner) as Obj;
            body.metadata.ownerReferences = [{ apiVersion: 'v1', kind: 'Pod', name: ctl, uid: created.metadata.uid!, controller: true }];
          }
          if (kind === 'victim-driver')
            body.metadata.ownerReferences = [
              { apiVersion: 'v1', kind: 'Pod', name: victim.run.owner.name, uid: victim.run.owner.uid, controller: true },
            ];
          if (kind === 'dangling-owner') (body.metadata as Record<string, unknown>)['finalizers'] = ['model.test/tenant'];
          if (kind === 'unreadable-owner')
            body.metadata.ownerReferences = [
              { apiVersion: 'v1', kind: 'Pod', name: `tenant-ghost-${n}`, uid: `${'u'.repeat(300)}-${n}`, controller: true },
            ];
          uid = (this.emulator.seed(body) as Obj).metadata.uid!;
        });
        // Its owner goes; the finalizer keeps the copy, terminating, with a dangling owner reference.
        if (kind === 'dangling-owner')
          this.mutate(`delete ${ctl} (the owner of ${name})`, () => this.emulator.deleteObject('pods', NS, ctl!));
        this.tenants.push({ name, uid, appId: victim.appId, execId: victim.execId, kind, ctl });
        totals.tenants++;
        if (kind === 'unreadable-owner') totals.unreadableTenants++;
        const pod = this.pod(name);
        if (pod !== undefined && this.couldBeServed(pod)) {
          for (const x of this.liveExecs())
            if (x.appId === victim.appId && x.execId === victim.execId && !this.properService(x)) x.contested = true;
        }
      },
    };
  }

  private tenantLeaves(t: Tenant): Step {
    return {
      label: `tenant ${t.name} leaves`,
      mutation: () =>
        this.mutate(`tenant ${t.name} leaves`, () => {
          // Fresh reads: each write here may change what the next one finds.
          const now = (name: string): Obj | undefined => this.emulator.getObject('pods', NS, name) as Obj | undefined;
          const pod = now(t.name);
          if (pod?.metadata.finalizers !== undefined && pod.metadata.finalizers.length > 0)
            this.emulator.patchObject('pods', NS, t.name, { metadata: { finalizers: null } });
          if (now(t.name) !== undefined) this.emulator.deleteObject('pods', NS, t.name);
          if (t.ctl !== undefined && now(t.ctl) !== undefined) this.emulator.deleteObject('pods', NS, t.ctl);
        }),
    };
  }

  private forge(): Step {
    const victims = this.liveExecs();
    const drivers = this.liveRuns().filter((r) => r.mode === 'cluster');
    if (drivers.length > 0 && (victims.length === 0 || chance(this.rng, 0.25))) {
      const run = pick(this.rng, drivers);
      const pod = this.pod(run.owner.name)! as unknown as PodBody;
      return { label: 'forged', forged: [{ verb: 'delete', pod, what: `forged "driver deleted" for live ${run.owner.name}` }] };
    }
    if (victims.length === 0) return { label: 'nothing' };
    const x = pick(this.rng, victims);
    const pod = this.pod(x.name)! as unknown as PodBody;
    if (chance(this.rng, 0.5))
      return { label: 'forged', forged: [{ verb: 'delete', pod, what: `forged "executor deleted" for live ${x.name}` }] };
    const failed = { ...pod, status: { ...pod.status, phase: 'Failed' } };
    return { label: 'forged', forged: [{ verb: 'update', pod: failed, what: `forged "Failed" for live ${x.name}` }] };
  }

  /** One random state change (or a forged event) out of those that apply now. */
  private plan(): Step {
    const options: Array<[number, () => Step]> = [];
    const live = this.liveRuns();
    if (live.length < 4) options.push([live.length === 0 ? 8 : 2, () => this.startRun()]);
    const growing = live.filter((r) => r.nextExec <= r.maxExec);
    if (growing.length > 0) options.push([7, () => this.addExecutor(pick(this.rng, growing))]);
    const existing = this.execs.filter((x) => {
      const pod = this.pod(x.name);
      return pod?.metadata.uid === x.uid && !terminal(pod);
    });
    if (existing.length > 0) options.push([4, () => this.updateExecutor(pick(this.rng, existing))]);
    const running = existing.filter((x) => this.pod(x.name)?.metadata.deletionTimestamp === undefined);
    if (running.length > 0) options.push([2.2, () => this.endExecutor(pick(this.rng, running))]);
    const ended = this.execs.filter((x) => {
      const pod = this.pod(x.name);
      return pod?.metadata.uid === x.uid && terminal(pod) && pod.metadata.deletionTimestamp === undefined;
    });
    if (ended.length > 0) options.push([1, () => this.deleteEnded(pick(this.rng, ended).name)]);
    if (live.length > 0) options.push([0.6, () => this.finishRun(pick(this.rng, live))]);
    const owned = this.runs.filter((r) => this.pod(r.owner.name)?.metadata.uid === r.owner.uid);
    if (owned.length > 0) options.push([0.6, () => this.deleteOwner(pick(this.rng, owned))]);
    const tenants = this.liveTenants();
    const claimed = new Set(tenants.map((t) => `${t.appId}/${t.execId}`));
    const victims = this.liveExecs().filter((x) => this.livePod(x.run.owner) !== undefined && !claimed.has(`${x.appId}/${x.execId}`));
    if (tenants.length < 3 && victims.length > 0) options.push([1.2, () => this.tenantCopy(pick(this.rng, victims))]);
    if (tenants.length > 0) options.push([0.8, () => this.tenantLeaves(pick(this.rng, tenants))]);
    options.push([1.3, () => this.forge()]);
    const total = options.reduce((sum, [w]) => sum + w, 0);
    let roll = this.rng() * total;
    for (const [weight, make] of options) {
      roll -= weight;
      if (roll < 0) return make();
    }
    return options[options.length - 1]![1]();
  }

  /** Graceful shutdowns go on by themselves: some steps after the deletionTimestamp, phase Failed; then the finalizer goes. */
  private progressGraceful(): void {
    for (const x of this.execs) {
      if (!x.graceful) continue;
      const pod = this.pod(x.name);
      if (pod?.metadata.uid !== x.uid) continue;
      if (pod.metadata.deletionTimestamp !== undefined && x.failAt === undefined) {
        x.failAt = this.stepNo + int(this.rng, 2, 8);
        x.releaseAt = x.failAt + int(this.rng, 1, 3);
      }
      if (x.failAt === this.stepNo && !terminal(pod)) {
        this.mutate(`${x.name} stops: phase Failed (still held by its finalizer)`, () =>
          this.emulator.patchObject('pods', NS, x.name, { status: { phase: 'Failed' } }),
        );
      }
      if (x.releaseAt === this.stepNo)
        this.mutate(`${x.name}: finalizer removed`, () =>
          this.emulator.patchObject('pods', NS, x.name, { metadata: { finalizers: null } }),
        );
    }
  }

  // ---- deliveries and sweeps ----

  private target(): Harness {
    return pick(this.rng, this.instances);
  }

  private async send(event: Recorded, to: Harness): Promise<void> {
    totals.deliveries++;
    const reply = await deliver(to.url, event);
    const outcomes = (reply.data?.outcomes ?? [])
      .map((o) => `${o.action} ${o.service}${o.detail === undefined ? '' : ` (${o.detail})`}`)
      .join('; ');
    this.note(
      `  delivered ${event.verb} ${event.pod.metadata.name} [${event.id}] → ${to === this.instances[0] ? 'A' : 'B'}: ${reply.status} ${reply.data?.action ?? ''}${reply.data?.reason === undefined ? '' : ` (${reply.data.reason})`} ${outcomes}`,
    );
    if (reply.status === 200) {
      totals.gaveWay += (reply.data?.outcomes ?? []).filter((o) => o.action === 'deleted' && (o.detail ?? '').includes('gives way')).length;
      if (event.verb === 'delete') return;
      const x = this.execByUid.get(event.pod.metadata.uid ?? '');
      if (x !== undefined && x.eligibleSince !== undefined && event.version >= x.eligibleSince) {
        x.covered = true;
        x.capExcused = false;
      }
    } else if (reply.status === 503) {
      totals.redelivered++;
      this.queue.push({ event, due: this.stepNo + 1 }); // Knative redelivers
    } else {
      this.violations.push(
        `event ${event.id} (${event.verb} ${event.pod.metadata.name}) answered ${reply.status}: ${reply.text.slice(0, 300)}`,
      );
    }
  }

  private async sendForged(forged: NonNullable<Step['forged']>[number], to: Harness): Promise<void> {
    totals.forged++;
    const reply = await postCloudEvent(to.url, {
      id: `forged-${this.seed}-${++this.eventSeq}`,
      type: podEventType(forged.verb),
      data: forged.pod,
      subject: podSubject(NS, forged.pod.metadata.name),
    });
    const outcomes = (reply.data?.outcomes ?? [])
      .map((o) => `${o.action} ${o.service}${o.detail === undefined ? '' : ` (${o.detail})`}`)
      .join('; ');
    this.note(`  ${forged.what} → ${to === this.instances[0] ? 'A' : 'B'}: ${reply.status} ${reply.data?.action ?? ''} ${outcomes}`);
    if (reply.status !== 200 && reply.status !== 503)
      this.violations.push(`${forged.what} answered ${reply.status}: ${reply.text.slice(0, 300)}`);
  }

  async sweep(to: Harness, why: string): Promise<{ complete: boolean; writes: Array<{ action: string; service: string }> }> {
    const startVersion = this.version;
    totals.sweeps++;
    const reply = await postSweep(to.url, `sweep-${this.seed}-${++this.eventSeq}`);
    if (reply.status !== 200) {
      if (reply.status !== 503) this.violations.push(`sweep (${why}) answered ${reply.status}: ${reply.text.slice(0, 300)}`);
      return { complete: false, writes: [] };
    }
    const complete = !(reply.data?.reason ?? '').includes('next sweep goes on');
    if (complete) {
      for (const x of this.execs) {
        if (x.eligibleSince === undefined || x.eligibleSince > startVersion) continue;
        x.covered = true;
        x.capExcused = false;
      }
    }
    totals.gaveWay += (reply.data?.outcomes ?? []).filter((o) => o.action === 'deleted' && (o.detail ?? '').includes('gives way')).length;
    const writes = (reply.data?.outcomes ?? []).map((o) => ({ action: o.action, service: o.service }));
    this.note(
      `sweep on ${to === this.instances[0] ? 'A' : 'B'} (${why})${complete ? '' : ' incomplete'}: ${writes.map((w) => `${w.action} ${w.service}`).join(', ') || 'nothing written'}`,
    );
    return { complete, writes };
  }

  async step(): Promise<void> {
    this.stepNo++;
    totals.steps++;
    const r = this.rng();
    this.clock.now += r < 0.7 ? int(this.rng, 0, 1000) : r < 0.95 ? int(this.rng, 1000, 8000) : int(this.rng, 20_000, 65_000);
    this.progressGraceful();
    const step = this.plan();
    const concurrent = step.mutation !== undefined && chance(this.rng, 0.3);
    if (!concurrent) step.mutation?.();
    const due = this.queue.filter((q) => q.due <= this.stepNo);
    this.queue = this.queue.filter((q) => q.due > this.stepNo);
    const sends: Array<() => Promise<void>> = shuffle(this.rng, due).map(({ event }) => {
      const to = this.target();
      return () => this.send(event, to);
    });
    for (const forged of step.forged ?? []) {
      for (let copies = chance(this.rng, 0.3) ? 2 : 1; copies > 0; copies--) {
        const to = this.target();
        this.note(`${forged.what} → ${to === this.instances[0] ? 'A' : 'B'}`);
        sends.push(() => this.sendForged(forged, to));
      }
    }
    const work: Array<Promise<unknown>> = [];
    if (chance(this.rng, 0.6)) work.push(Promise.all(sends.map((send) => send())));
    else
      work.push(
        (async () => {
          for (const send of sends) await send();
        })(),
      );
    if (chance(this.rng, 0.08)) work.push(this.sweep(this.target(), 'periodic'));
    if (concurrent) {
      const delay = int(this.rng, 0, 6);
      work.push(sleep(delay).then(() => step.mutation!()));
    }
    await Promise.all(work);
    this.check();
  }

  // ---- the invariant ----

  /** The checks after every step; violations are collected. */
  check(): void {
    totals.checks++;
    this.checkWrites();
    this.checkForeign();
    // Caps (issue 17, classes 3 and 4): a missing Service is excused while Services that are not
    // gone-marked fill a cap — now, before this step's concurrent changes, or when the function last saw it.
    const fullNow = this.capsFull();
    const excused = (x: Exec): boolean => {
      if (this.caps === undefined || this.service(executorServiceName(x.appId, x.execId)) !== undefined) return false;
      x.capExcused ||= fullNow(x.appId) || this.fullBefore(x.appId);
      if (x.capExcused) totals.capExcused++;
      return x.capExcused;
    };
    for (const x of this.execs) {
      const pod = this.livePod(x);
      if (pod === undefined) continue;
      const owner = controllerPod(pod);
      const ownerPod = owner === undefined ? undefined : this.livePod(owner);
      if (owner === undefined || ownerPod === undefined) continue;
      if (!optedIn(pod) && !optedIn(ownerPod)) continue;
      if (!x.covered || x.contested || (x.appId === SQUATTED.appId && x.execId === SQUATTED.execId) || excused(x)) continue;
      totals.serviceAssertions++;
      for (const problem of this.serviceProblems(x, owner))
        this.violations.push(`${x.name} (live, opted in, owner ${owner.name} lives, seen): ${problem}${this.capsState()}`);
    }
    this.fullBefore = fullNow;
  }

  /**
   * Whether a cap (counting every Service of ours, marked or not, as the function does) was full
   * for an application around these writes: at the last check, or now with this step's deletes
   * put back. Only then may a marked Service go before its cool-down ends (it gives way).
   */
  private roomNeeded(writes: ReadonlyArray<{ method: string; status: number; responseBody: string }>): (appId: string) => boolean {
    if (this.caps === undefined) return () => false;
    const caps = this.caps;
    const count = (services: readonly Obj[]): { all: number; byApp: Map<string, number> } => {
      const byApp = new Map<string, number>();
      for (const s of services) byApp.set(s.metadata.labels?.[APP] ?? '', (byApp.get(s.metadata.labels?.[APP] ?? '') ?? 0) + 1);
      return { all: services.length, byApp };
    };
    const ours = (this.emulator.listObjects('services', NS) as unknown as Obj[]).filter(
      (s) => s.metadata.labels?.[MANAGED_BY] === 'spark-exec-svc',
    );
    const deleted = writes
      .filter((w) => w.method === 'DELETE' && w.status === 200)
      .map((w) => JSON.parse(w.responseBody) as Obj)
      .filter((s) => s.metadata.labels?.[MANAGED_BY] === 'spark-exec-svc');
    const around = count([...ours, ...deleted]);
    const before = this.heldBefore;
    this.heldBefore = count(ours);
    return (appId) =>
      around.all >= caps.cap ||
      (around.byApp.get(appId) ?? 0) >= caps.appCap ||
      (before !== undefined && (before.all >= caps.cap || (before.byApp.get(appId) ?? 0) >= caps.appCap));
  }

  /** Every Service of ours at the last check, by application (the caps variant). */
  private heldBefore: { all: number; byApp: Map<string, number> } | undefined;

  /** What fills the caps now, for a violation's message. */
  private capsState(): string {
    if (this.caps === undefined) return '';
    const ours = this.emulator
      .listObjects('services', NS)
      .map((s) => s as unknown as Obj)
      .filter((s) => s.metadata.labels?.[MANAGED_BY] === 'spark-exec-svc');
    return `; caps hold: ${ours.map((s) => `${s.metadata.labels?.[APP]}/${s.metadata.labels?.[EXEC]}${s.metadata.annotations?.[GONE_AT] === undefined ? '' : ' (marked)'}`).join(', ')}`;
  }

  private capsFull(): (appId: string) => boolean {
    if (this.caps === undefined) return () => false;
    // Counted by our label, as the function counts them: a foreign look-alike carrying it counts too.
    return capsExcuse(this.emulator.listObjects('services', NS) as unknown as Obj[], this.caps);
  }

  private serviceProblems(x: Exec, owner: Ref): string[] {
    const name = executorServiceName(x.appId, x.execId);
    const svc = this.service(name);
    if (svc === undefined) return [`its Service ${name} is missing`];
    const problems: string[] = [];
    const annotations = svc.metadata.annotations ?? {};
    if (annotations[GONE_AT] !== undefined) problems.push(`its Service ${name} is marked gone (${annotations[GONE_AT]})`);
    const owners = svc.metadata.ownerReferences ?? [];
    if (owners.length !== 1 || owners[0]!.name !== owner.name || owners[0]!.uid !== owner.uid || owners[0]!.kind !== 'Pod') {
      problems.push(`its Service ${name} is owned by ${JSON.stringify(owners)}, not by ${owner.name}/${owner.uid}`);
    }
    if (!selectsExactly(svc.spec?.selector, x.appId, x.execId))
      problems.push(`its Service ${name} selects ${JSON.stringify(svc.spec?.selector)}`);
    if (annotations[EXECUTOR_UID] !== x.uid)
      problems.push(`its Service ${name} records executor ${annotations[EXECUTOR_POD]}/${annotations[EXECUTOR_UID]}`);
    problems.push(...shapeProblems(svc, x.appId, x.execId, x.port).map((p) => `its Service ${name}: ${p}`));
    return problems;
  }

  /** Every Service write since the last check: none to someone else's Service, no mark or delete while the recorded executor and its owner live. */
  private checkWrites(): void {
    const writes = this.proxy.writes.slice(this.writesChecked);
    this.writesChecked = this.proxy.writes.length;
    totals.writes += writes.length;
    const roomNeeded = this.roomNeeded(writes);
    for (const w of writes) {
      if (w.name !== undefined && this.foreign.has(w.name))
        this.violations.push(`${w.method} on someone else's Service ${w.name} (answered ${w.status})`);
      if (w.status !== 200 || (w.method !== 'PATCH' && w.method !== 'DELETE')) continue;
      const svc = JSON.parse(w.responseBody) as Obj;
      const annotations = svc.metadata.annotations ?? {};
      const marked = w.method === 'PATCH' && annotations[GONE_AT] !== undefined;
      if (w.method === 'PATCH' && !marked) continue;
      const executor = { name: annotations[EXECUTOR_POD] ?? '', uid: annotations[EXECUTOR_UID] ?? '' };
      const owner = svc.metadata.ownerReferences?.[0];
      // A pod UID never lives again: alive now means alive when the write happened.
      if (this.livePod(executor) !== undefined && owner !== undefined && this.livePod(owner) !== undefined) {
        this.violations.push(
          `${marked ? 'marked gone' : 'deleted'} Service ${svc.metadata.name} while its executor ${executor.name} and its owner ${owner.name} live (request ${w.requestBody})`,
        );
      }
      // While its owner lives, a marked Service goes only when its cool-down is over — by the API
      // server's clock, whichever instance marked it and whatever their own clocks say (issue 17,
      // class 8). Both times are whole seconds and each instance reads the server's a little late:
      // only a delete surely early by more than that is one.
      const markedAt = Date.parse(annotations[GONE_AT] ?? '');
      const deletedAt = Date.parse(w.date ?? '');
      // The one exception (issue 17, class 4): a live executor needs its room at a full cap.
      const gaveWay = roomNeeded(svc.metadata.labels?.[APP] ?? '');
      if (w.method === 'DELETE' && owner !== undefined && this.livePod(owner) !== undefined && !Number.isNaN(markedAt) && !gaveWay) {
        const elapsedAtMostMs = deletedAt + 1_000 - markedAt;
        if (Number.isNaN(deletedAt) || elapsedAtMostMs < COOLDOWN_SECONDS * 1000 - CLOCK_TOLERANCE_MS)
          this.violations.push(
            `deleted Service ${svc.metadata.name} ${Math.round(elapsedAtMostMs / 1000)} s (API server's clock) after its mark ${annotations[GONE_AT]}, before the cool-down of ${COOLDOWN_SECONDS} s ended, while its owner ${owner.name} lives`,
          );
      }
    }
  }

  private checkForeign(): void {
    for (const [name, snapshot] of this.foreign) {
      if (JSON.stringify(this.service(name)) !== snapshot) this.violations.push(`someone else's Service ${name} was changed or removed`);
    }
  }

  // ---- the end: convergence against an oracle from the specification ----

  async finish(): Promise<string[]> {
    this.queue = []; // nothing more is delivered
    this.stepNo++;
    const [a, b] = this.instances as [Harness, Harness];
    this.clock.now += (COOLDOWN_SECONDS + 1) * 1000;
    await this.sweep(a, 'final 1');
    this.clock.now += (COOLDOWN_SECONDS + 1) * 1000;
    await this.sweep(b, 'final 2');
    const last = await this.sweep(a, 'final 3');
    this.check();
    const problems = [...this.violations];
    if (!last.complete) problems.push('the last sweep did not complete its round');
    const repairs = last.writes.filter((w) => w.action !== 'conflict');
    if (repairs.length > 0) problems.push(`the last sweep still had something to repair: ${JSON.stringify(repairs)}`);
    problems.push(...this.oracle());
    return problems;
  }

  /**
   * What must exist once nothing changes any more and every cool-down is over, per executor slot
   * (app id, exec id): a live pod carrying the slot's labels that could be served (live
   * controller owner pod, opted in) gets the slot's Service when it is the only one; when several
   * could, the function refuses to guess (only an executor that had its Service before the
   * copy appeared keeps it). A Service stays only while what it was made for runs, or while a
   * live pod with the same owner carries its labels; it is never left marked, and never outlives
   * its owner.
   */
  private oracle(): string[] {
    const problems: string[] = [];
    const pods = this.emulator.listObjects('pods', NS) as unknown as Obj[];
    const byName = new Map(pods.map((p) => [p.metadata.name, p]));
    const live = (ref: Ref | undefined): Obj | undefined => {
      const pod = ref === undefined ? undefined : byName.get(ref.name);
      return pod !== undefined && pod.metadata.uid === ref!.uid && !terminal(pod) ? pod : undefined;
    };
    const slots = new Map<string, { appId: string; execId: string }>();
    const claimants = new Map<string, Obj[]>();
    for (const pod of pods) {
      const labels = pod.metadata.labels ?? {};
      if (labels['spark-role'] !== 'executor' || labels[APP] === undefined || labels[EXEC] === undefined || terminal(pod)) continue;
      const key = `${labels[APP]}\u0000${labels[EXEC]}`;
      slots.set(key, { appId: labels[APP], execId: labels[EXEC] });
      claimants.set(key, [...(claimants.get(key) ?? []), pod]);
    }
    const services = new Map<string, Obj>();
    for (const raw of this.emulator.listObjects('services', NS)) {
      const svc = raw as unknown as Obj;
      if (this.foreign.has(svc.metadata.name)) continue;
      services.set(svc.metadata.name, svc);
      const labels = svc.metadata.labels ?? {};
      const appId = labels[APP];
      const execId = labels[EXEC];
      if (
        labels[MANAGED_BY] !== 'spark-exec-svc' ||
        appId === undefined ||
        execId === undefined ||
        executorServiceName(appId, execId) !== svc.metadata.name
      ) {
        problems.push(`unexpected Service ${svc.metadata.name} (labels ${JSON.stringify(labels)})`);
        continue;
      }
      slots.set(`${appId}\u0000${execId}`, { appId, execId });
    }
    const full = this.capsFull();
    for (const [key, { appId, execId }] of slots) {
      const name = executorServiceName(appId, execId);
      if (this.foreign.has(name)) continue;
      // Caps full of Services that are not gone-marked: a live executor may have none.
      if (!services.has(name) && full(appId)) continue;
      const svc = services.get(name);
      const here = claimants.get(key) ?? [];
      const servable = here.filter((p) => this.couldBeServedIn(p, live));
      const realUncontested = servable.flatMap((p) => {
        const x = this.execByUid.get(p.metadata.uid ?? '');
        return x !== undefined && !x.contested ? [x] : [];
      });
      if (svc !== undefined) {
        const annotations = svc.metadata.annotations ?? {};
        const owners = svc.metadata.ownerReferences ?? [];
        if (annotations[GONE_AT] !== undefined) problems.push(`${name}: still marked gone after the cool-down and the final sweeps`);
        if (owners.length !== 1) problems.push(`${name}: owners ${JSON.stringify(owners)}`);
        const owner = owners[0];
        if (owner !== undefined && live(owner) === undefined)
          problems.push(`${name}: its owner ${owner.name} is not a live pod (finished or gone)`);
        if (!selectsExactly(svc.spec?.selector, appId, execId)) problems.push(`${name}: selector ${JSON.stringify(svc.spec?.selector)}`);
        const recordedLives = live({ name: annotations[EXECUTOR_POD] ?? '', uid: annotations[EXECUTOR_UID] ?? '' }) !== undefined;
        const sameOwnerClaimant = owner !== undefined && here.some((p) => controllerPod(p)?.uid === owner.uid);
        if (servable.length !== 1 && !recordedLives && !sameOwnerClaimant) {
          problems.push(
            `${name}: kept although nothing it was made for runs (recorded ${annotations[EXECUTOR_POD]}, ${here.length} live pod(s) with its labels)`,
          );
        }
      }
      const only = servable.length === 1 ? servable[0]! : undefined;
      if (only !== undefined) {
        const owner = controllerPod(only)!;
        if (svc === undefined) problems.push(`missing ${name} for ${only.metadata.name} (the only pod that could use it)`);
        else {
          const owners = svc.metadata.ownerReferences ?? [];
          if (owners[0]?.uid !== owner.uid || owners[0]?.name !== owner.name)
            problems.push(`${name}: owned by ${owners[0]?.name}, not by ${owner.name}, the owner of ${only.metadata.name}`);
        }
      }
      if (realUncontested.length === 1) {
        const x = realUncontested[0]!;
        if (svc === undefined) {
          if (only === undefined) problems.push(`missing ${name} for ${x.name} (it had its Service before any copy appeared)`);
        } else if (svc.metadata.annotations?.[EXECUTOR_UID] !== x.uid) {
          problems.push(`${name}: records ${svc.metadata.annotations?.[EXECUTOR_POD]}, not ${x.name}`);
        } else problems.push(...shapeProblems(svc, x.appId, x.execId, x.port).map((p) => `${name}: ${p}`));
      }
    }
    return problems;
  }

  private couldBeServedIn(pod: Obj, live: (ref: Ref | undefined) => Obj | undefined): boolean {
    const ownerPod = live(controllerPod(pod));
    // Issue 17: only a running pod claims its slot.
    return ownerPod !== undefined && pod.status?.phase === 'Running' && (optedIn(pod) || optedIn(ownerPod));
  }

  context(): string {
    return `seed ${this.seed}, step ${this.stepNo}; reproduce with PROPERTY_SEED=${this.seed} PROPERTY_RUNS=1 PROPERTY_STEPS=${STEPS} npx vitest run test/model/model.test.ts\n  last steps:\n    ${this.trace.join('\n    ')}`;
  }
}

export function seedForeign(emulator: KubeEmulator): Map<string, string> {
  const bodies = [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: NS, labels: { app: 'web' } },
      spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
    },
    // Our label and a slot's labels, but owned by a Deployment: not ours.
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: 'lookalike',
        namespace: NS,
        labels: { [MANAGED_BY]: 'spark-exec-svc', [APP]: SQUATTED.appId, [EXEC]: '99' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'someone', uid: 'deploy-1' }],
      },
      spec: { selector: { app: 'lookalike' }, ports: [{ port: 7079 }] },
    },
    // Someone else's Service with the exact name a slot needs.
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: executorServiceName(SQUATTED.appId, SQUATTED.execId), namespace: NS, labels: { team: 'someone-else' } },
      spec: { selector: { app: 'theirs' }, ports: [{ name: 'http', port: 80 }] },
    },
  ];
  const foreign = new Map<string, string>();
  for (const body of bodies) {
    emulator.seed(body);
    foreign.set(body.metadata.name, JSON.stringify(emulator.getObject('services', NS, body.metadata.name)));
  }
  return foreign;
}
