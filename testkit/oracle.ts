/**
 * The oracle: what must hold in the cluster, written once from the specification (README "How it
 * works" and "Block-manager port", docs/reliability.md "The invariant", "Identity" and "The
 * rules"), never from the code under test. The keys are spelled as the README names them, not
 * imported. The one production function used is executorServiceName (shared/model/naming.ts): the name
 * rule has its own proof (test/executor/naming-shell-parity.test.ts, test/unit/naming.test.ts).
 *
 * The invariant (docs/reliability.md): for every live, opted-in executor whose driver lives, its
 * Service exists, carries no gone mark, is owned by that driver, and selects that executor.
 *  - live: the pod exists with its UID and its phase is not Succeeded/Failed (a pod being deleted
 *    that still runs is live);
 *  - executor: spark-role=executor, a non-empty spark-app-selector, a spark-exec-id Spark would
 *    assign (a decimal integer ≥ 1);
 *  - its driver: the v1 Pod controller owner reference, by name and UID, whatever that pod's labels
 *    (client-mode notebook pods included);
 *  - opted in: spark-exec-svc/enabled=true as a label or annotation, on the executor or its driver;
 *  - its Service: named executorServiceName(app, exec id), exactly one ownerReference = the driver
 *    (v1 Pod, name and UID), selector exactly {spark-app-selector, spark-exec-id}, first port the
 *    executor's block-manager port (annotation, else the one value SPARK_JAVA_OPT_<n> says, else
 *    BLOCK_MANAGER_PORT; an executor without a port the function could use is owed nothing).
 */
import { executorServiceName } from '../shared/model/naming.ts';

export const ENABLED = 'spark-exec-svc/enabled';
export const GONE_AT = 'spark-exec-svc/executor-gone-at';
export const EXECUTOR_POD = 'spark-exec-svc/executor-pod';
export const EXECUTOR_UID = 'spark-exec-svc/executor-uid';
export const DRIVER_POD = 'spark-exec-svc/driver-pod';
export const PORT_ANNOTATION = 'spark-exec-svc/block-manager-port';
export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const APP = 'spark-app-selector';
export const EXEC = 'spark-exec-id';
const TERMINAL = new Set(['Succeeded', 'Failed']);
/** Executor ids Spark assigns: canonical decimal integers ≥ 1. */
export const SPARK_EXEC_ID = /^[1-9][0-9]*$/;

/** metadata.ownerReferences[i], as far as the oracle reads it. */
export type OwnerRef = { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean };
/** A pod or a Service as plain JSON (what the API server or the emulator holds). */
export interface Obj {
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerRef[];
    deletionTimestamp?: string;
    finalizers?: string[];
  };
  spec?: {
    containers?: Array<{ env?: Array<{ name: string; value?: string }> }>;
    selector?: Record<string, string>;
    type?: string;
    ports?: Array<Record<string, unknown>>;
  };
  status?: { phase?: string };
}
export interface Ref {
  readonly name: string;
  readonly uid: string;
}

export const terminal = (pod: Obj): boolean => TERMINAL.has(pod.status?.phase ?? '');
export const optedIn = (pod: Obj | undefined): boolean =>
  pod?.metadata.labels?.[ENABLED] === 'true' || pod?.metadata.annotations?.[ENABLED] === 'true';
/** The pod named by `ref`, when it exists with that UID and is not terminal. */
export function livePod(pods: ReadonlyMap<string, Obj>, ref: Ref | undefined): Obj | undefined {
  const pod = ref === undefined ? undefined : pods.get(ref.name);
  return pod !== undefined && pod.metadata.uid === ref!.uid && !terminal(pod) ? pod : undefined;
}
/** The controller owner reference, when it names a v1 Pod (Spark's driver, or a client-mode pod). */
export function controllerPod(pod: Obj): Ref | undefined {
  const ref = (pod.metadata.ownerReferences ?? []).find((o) => o.controller === true && o.apiVersion === 'v1' && o.kind === 'Pod');
  return ref === undefined ? undefined : { name: ref.name, uid: ref.uid };
}
/** The executor slot a pod claims (spark-role=executor, an app id, an exec id Spark would assign). */
export function executorSlot(pod: Obj): { appId: string; execId: string } | undefined {
  const labels = pod.metadata.labels ?? {};
  const appId = labels[APP];
  const execId = labels[EXEC];
  if (labels['spark-role'] !== 'executor' || !appId || execId === undefined || !SPARK_EXEC_ID.test(execId)) return undefined;
  return { appId, execId };
}

const validPort = (text: string): number | undefined => {
  const n = /^\d{1,5}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  return n >= 1 && n <= 65535 ? n : undefined;
};

/**
 * README "Block-manager port": the annotation (a port 1–65535, else the executor gets none); else
 * -Dspark.blockManager.port in SPARK_JAVA_OPT_<n> (0 counts as unset; several different values
 * leave the executor without a Service); else BLOCK_MANAGER_PORT.
 */
export function blockManagerPort(pod: Obj, fallback: number | undefined): number | undefined {
  const annotated = pod.metadata.annotations?.[PORT_ANNOTATION];
  if (annotated !== undefined) return validPort(annotated);
  const said = new Set<number>();
  for (const c of pod.spec?.containers ?? []) {
    for (const e of c.env ?? []) {
      const m = /^SPARK_JAVA_OPT_\d+$/.test(e.name) ? /^-Dspark\.blockManager\.port=(\d+)$/.exec((e.value ?? '').trim()) : null;
      const port = m === null ? undefined : validPort(m[1]!);
      if (port !== undefined) said.add(port);
    }
  }
  if (said.size > 1) return undefined;
  return said.size === 1 ? [...said][0] : fallback;
}

/** A Service the invariant owes a live executor. */
export interface Owed {
  readonly pod: Obj;
  readonly service: string;
  readonly appId: string;
  readonly execId: string;
  readonly driver: Ref;
  readonly port: number;
}

/** Every Service the invariant owes, one entry per live opted-in executor whose driver lives. */
export function owedServices(pods: readonly Obj[], defaultPort: number | undefined): Owed[] {
  const byName = new Map(pods.map((p) => [p.metadata.name, p]));
  const owed: Owed[] = [];
  for (const pod of pods) {
    const slot = executorSlot(pod);
    // Only a running executor claims its slot (phase Running, which only the kubelet sets): a
    // Pending or unscheduled pod is owed no Service yet (issue 17).
    if (slot === undefined || terminal(pod) || pod.status?.phase !== 'Running') continue;
    const driver = controllerPod(pod);
    const driverPod = livePod(byName, driver);
    if (driverPod === undefined || (!optedIn(pod) && !optedIn(driverPod))) continue;
    const port = blockManagerPort(pod, defaultPort);
    if (port === undefined) continue;
    owed.push({ pod, service: executorServiceName(slot.appId, slot.execId), ...slot, driver: driver!, port });
  }
  return owed;
}

export interface ServiceCheck {
  /** Also: the Service records this executor (name and UID annotations), as docs/reliability.md "Identity" asks. */
  readonly identity?: boolean;
  /** Also: the whole shape the README draws (ClusterIP, one TCP port spark-block-manager, our labels). */
  readonly shape?: boolean;
}

/** What is wrong with `svc` as the Service `owed` describes; [] = right. */
export function serviceProblems(svc: Obj | undefined, owed: Owed, check: ServiceCheck = {}): string[] {
  if (svc === undefined) return ['missing'];
  const problems: string[] = [];
  const annotations = svc.metadata.annotations ?? {};
  if (annotations[GONE_AT] !== undefined) problems.push(`marked gone (${annotations[GONE_AT]})`);
  const owners = svc.metadata.ownerReferences ?? [];
  const o = owners[0];
  if (owners.length !== 1 || o?.name !== owed.driver.name || o.uid !== owed.driver.uid || o.kind !== 'Pod' || o.apiVersion !== 'v1') {
    problems.push(
      `owners ${JSON.stringify(owners.map((x) => `${x.kind}/${x.name}/${x.uid}`))}, want Pod/${owed.driver.name}/${owed.driver.uid}`,
    );
  }
  if (!selectsExactly(svc.spec?.selector, owed.appId, owed.execId)) problems.push(`selector ${JSON.stringify(svc.spec?.selector)}`);
  if (svc.spec?.ports?.[0]?.['port'] !== owed.port)
    problems.push(`port ${String(svc.spec?.ports?.[0]?.['port'])}, the executor listens on ${owed.port}`);
  if (
    check.identity === true &&
    (annotations[EXECUTOR_UID] !== owed.pod.metadata.uid || annotations[EXECUTOR_POD] !== owed.pod.metadata.name)
  ) {
    problems.push(
      `records executor ${annotations[EXECUTOR_POD]}/${annotations[EXECUTOR_UID]}, not ${owed.pod.metadata.name}/${owed.pod.metadata.uid}`,
    );
  }
  if (check.shape === true) problems.push(...shapeProblems(svc, owed.appId, owed.execId, owed.port));
  return problems;
}

/** The selector is exactly {spark-app-selector, spark-exec-id} of the slot (a wider one would select other pods). */
export const selectsExactly = (selector: Record<string, string> | undefined, appId: string, execId: string): boolean =>
  selector !== undefined && Object.keys(selector).length === 2 && selector[APP] === appId && selector[EXEC] === execId;

/** A ClusterIP with one TCP port named spark-block-manager on the executor's port, labelled as ours and with the slot. */
export function shapeProblems(svc: Obj, appId: string, execId: string, port: number): string[] {
  const problems: string[] = [];
  if (svc.spec?.type !== 'ClusterIP') problems.push(`type ${svc.spec?.type}`);
  const ports = svc.spec?.ports ?? [];
  const p = ports[0];
  if (
    ports.length !== 1 ||
    p?.['name'] !== 'spark-block-manager' ||
    p['port'] !== port ||
    p['targetPort'] !== port ||
    p['protocol'] !== 'TCP'
  ) {
    problems.push(`ports ${JSON.stringify(ports)}, want spark-block-manager ${port}`);
  }
  const labels = svc.metadata.labels ?? {};
  if (labels[MANAGED_BY] !== 'spark-exec-svc' || labels[APP] !== appId || labels[EXEC] !== execId)
    problems.push(`labels ${JSON.stringify(labels)}`);
  return problems;
}

/** What the oracle reads: a namespace's pods and Services (the emulator's back door or a client's list). */
export interface ClusterView {
  readonly pods: readonly Obj[];
  readonly services: readonly Obj[];
}

export interface InvariantOptions {
  /** BLOCK_MANAGER_PORT of the function under test. */
  readonly defaultPort: number | undefined;
  /**
   * The pods known to be the genuine executors (the victim's): when a tenant's copy claims the
   * same slot, one Service cannot serve both drivers, and the genuine one wins. Without it, a slot
   * claimed by several pods is owed to none (the function refuses to guess: docs/reliability.md,
   * create "exactly one such pod claims the slot"), but a Service that is there must serve one.
   */
  readonly genuine?: ReadonlySet<string>;
  /**
   * MAX_SERVICES_PER_NAMESPACE: a missing Service is no breach while the namespace holds that many
   * of ours that are not gone-marked (a dead executor's Service gives way to a live one, issue 17
   * class 4) and no application holds more than `appCap` of them (one application cannot starve
   * another, class 3).
   */
  readonly cap?: number;
  /** MAX_SERVICES_PER_APPLICATION: a missing Service is no breach while its application holds that many of ours not gone-marked. */
  readonly appCap?: number;
  readonly check?: ServiceCheck;
}

/**
 * Whether a live executor of `appId` may lack its Service because the caps are full: Services of
 * ours that are not gone-marked (a dead executor's Service gives way to a live one, issue 17
 * class 4) hold MAX_SERVICES_PER_NAMESPACE with no application over MAX_SERVICES_PER_APPLICATION
 * (one application cannot starve another, class 3), or hold its own application's cap.
 */
export function capsExcuse(
  services: readonly Obj[],
  caps: { readonly cap?: number; readonly appCap?: number },
): (appId: string) => boolean {
  const holding = services.filter(
    (s) => s.metadata.labels?.[MANAGED_BY] === 'spark-exec-svc' && s.metadata.annotations?.[GONE_AT] === undefined,
  );
  const byApp = new Map<string, number>();
  for (const s of holding) {
    const app = s.metadata.labels?.[APP] ?? '';
    byApp.set(app, (byApp.get(app) ?? 0) + 1);
  }
  const appCap = caps.appCap ?? Number.POSITIVE_INFINITY;
  const namespaceFull = caps.cap !== undefined && holding.length >= caps.cap && [...byApp.values()].every((n) => n <= appCap);
  return (appId) => namespaceFull || (byApp.get(appId) ?? 0) >= appCap;
}

/** Every breach of the invariant in `view`; [] = it holds. */
export function invariantProblems(view: ClusterView, options: InvariantOptions): string[] {
  const services = new Map(view.services.map((s) => [s.metadata.name, s]));
  const excused = capsExcuse(view.services, options);
  const claims = new Map<string, Owed[]>();
  for (const owed of owedServices(view.pods, options.defaultPort)) claims.set(owed.service, [...(claims.get(owed.service) ?? []), owed]);
  const problems: string[] = [];
  for (const [name, owedHere] of claims) {
    const svc = services.get(name);
    if (svc === undefined && excused(owedHere[0]!.appId)) continue;
    const verdicts = owedHere.map((o) => ({ pod: o.pod.metadata.name, problems: serviceProblems(svc, o, options.check) }));
    const genuine = verdicts.filter((v) => options.genuine?.has(v.pod) === true);
    const mustHold = genuine.length > 0 ? genuine : verdicts.length === 1 ? verdicts : [];
    for (const v of mustHold) problems.push(...v.problems.map((p) => `Service ${name} of live executor ${v.pod}: ${p}`));
    if (mustHold.length === 0 && svc !== undefined && !verdicts.some((v) => v.problems.length === 0)) {
      problems.push(
        `Service ${name}, claimed by ${verdicts.map((v) => v.pod).join(', ')}, serves none of them: ${JSON.stringify(verdicts)}`,
      );
    }
  }
  return problems;
}

/** The emulator's (or any API's) objects in one namespace, through a synchronous back door. */
export interface ObjectStore {
  listObjects(resource: 'pods' | 'services', namespace: string, labelSelector?: string): Array<Record<string, unknown>>;
  getObject(resource: 'pods' | 'services', namespace: string, name: string): Record<string, unknown> | undefined;
}

export function clusterView(store: ObjectStore, namespace: string): ClusterView {
  return {
    pods: store.listObjects('pods', namespace) as unknown as Obj[],
    services: store.listObjects('services', namespace) as unknown as Obj[],
  };
}

// ---- once nothing changes any more: the Services a correct system ends with --------------------------

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
   * The executor pod is gone (deleted or terminal). Its Service may exist or not (a Service is only
   * ever created for a running executor, so a lost or late add leaves none), but if it exists it
   * must carry the cool-down mark.
   */
  readonly gone: boolean;
}

/**
 * For every executor ever seen (its last known state), in a watched namespace, that was opted in
 * and whose driver (controller owner) still lives: its Service, marked gone iff the executor is
 * gone now. Nothing else of ours may exist (docs/reliability.md: a Service never outlives its
 * owner; a marked Service waits for its cool-down).
 */
export function expectedServices(
  executors: readonly Obj[],
  store: ObjectStore,
  watched: readonly string[],
  defaultPort: number,
): Map<string, ExpectedService> {
  const expected = new Map<string, ExpectedService>();
  for (const last of executors) {
    const namespace = last.metadata.namespace ?? '';
    const slot = executorSlot(last);
    const driver = controllerPod(last);
    if (!watched.includes(namespace) || slot === undefined || driver === undefined) continue;
    const now = (name: string): Map<string, Obj> => {
      const pod = store.getObject('pods', namespace, name) as Obj | undefined;
      return new Map(pod === undefined ? [] : [[name, pod]]);
    };
    const driverNow = livePod(now(driver.name), driver);
    if (driverNow === undefined || (!optedIn(last) && !optedIn(driverNow))) continue;
    const port = blockManagerPort(last, defaultPort);
    if (port === undefined) continue;
    const podNow = livePod(now(last.metadata.name), { name: last.metadata.name, uid: last.metadata.uid ?? '' });
    const alive = podNow !== undefined;
    // A live executor that does not run yet is owed nothing (issue 17); phases do not go back, so it never had a Service.
    if (podNow !== undefined && podNow.status?.phase !== 'Running') continue;
    const name = executorServiceName(slot.appId, slot.execId);
    expected.set(`${namespace}/${name}`, {
      namespace,
      name,
      ...slot,
      executorPodName: last.metadata.name,
      executorUid: last.metadata.uid ?? '',
      driverName: driver.name,
      driverUid: driver.uid,
      port,
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

/** Every difference between the Services in `namespaces` and `expected`; [] = converged. Someone else's Services must be byte for byte the same. */
export function convergenceProblems(
  store: ObjectStore,
  expected: ReadonlyMap<string, ExpectedService>,
  namespaces: readonly string[],
  foreign: readonly ForeignService[] = [],
): string[] {
  const problems: string[] = [];
  const foreignKeys = new Set(foreign.map((f) => `${f.namespace}/${f.name}`));
  for (const f of foreign) {
    if (JSON.stringify(store.getObject('services', f.namespace, f.name)) !== JSON.stringify(f.snapshot))
      problems.push(`foreign Service ${f.namespace}/${f.name} was changed or removed`);
  }
  const seen = new Set<string>();
  for (const ns of namespaces) {
    for (const raw of store.listObjects('services', ns)) {
      const svc = raw as unknown as Obj;
      const key = `${ns}/${svc.metadata.name}`;
      if (foreignKeys.has(key)) continue;
      const want = expected.get(key);
      if (want === undefined) {
        problems.push(
          `unexpected Service ${key} (labels ${JSON.stringify(svc.metadata.labels ?? {})}, owner ${JSON.stringify(svc.metadata.ownerReferences?.[0]?.name)})`,
        );
        continue;
      }
      seen.add(key);
      problems.push(...expectedServiceProblems(svc, want).map((p) => `${key}: ${p}`));
    }
  }
  for (const [key, want] of expected) {
    if (!seen.has(key) && !foreignKeys.has(key) && !want.gone) problems.push(`missing Service ${key} (executor ${want.executorPodName})`);
  }
  return problems;
}

function expectedServiceProblems(svc: Obj, want: ExpectedService): string[] {
  const owed: Owed = {
    pod: { metadata: { name: want.executorPodName, uid: want.executorUid } },
    service: want.name,
    appId: want.appId,
    execId: want.execId,
    driver: { name: want.driverName, uid: want.driverUid },
    port: want.port,
  };
  const problems = serviceProblems(svc, owed, { identity: true, shape: true }).filter((p) => !p.startsWith('marked gone'));
  const annotations = svc.metadata.annotations ?? {};
  if (annotations[DRIVER_POD] !== want.driverName) problems.push(`driver-pod annotation ${annotations[DRIVER_POD]}`);
  const marked = annotations[GONE_AT] !== undefined;
  if (marked !== want.gone) problems.push(want.gone ? 'executor gone but no cool-down mark' : 'executor alive but marked gone');
  return problems;
}
