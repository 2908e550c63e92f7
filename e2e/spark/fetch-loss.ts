/**
 * One real Spark application on the harness cluster that loses an executor while the next stage
 * fetches from it (issue 19), shared by e2e/scenarios/spark.e2e.ts and `npm run proof`.
 *
 * - Spark from the e2e cache (`e2e/build.sh spark`: the pyspark sdist's jars/ and bin/, our job).
 * - The driver runs `bin/spark-submit --deploy-mode client` in a pod of the process kubelet, with a
 *   ServiceAccount whose token the kubelet projects, talking to the API server at 10.96.0.1:443
 *   (kube-proxy), `spark.kubernetes.driver.pod.name` = its own pod (Spark's ownerReferences).
 * - Spark creates the executor pods itself (`spark.kubernetes.allocation.batch.size`) from
 *   spark/executor-pod-template.yaml as documented, plus what an image would carry (the process
 *   kubelet has no images; see `imageStandIns`): Spark's home at /opt/spark, e2e/spark/entrypoint.sh
 *   (the stand-in for the image's /opt/entrypoint.sh), e2e/spark/decom.sh (the stand-in for its
 *   /opt/decom.sh) and the image's ENV (JAVA_HOME, SPARK_HOME).
 *   Spark keeps the template container's `command` (BasicExecutorFeatureStep builds the container
 *   from it, `new ContainerBuilder(templateContainer)`, and appends `args: [executor]`), so the
 *   recipe's wrapper runs exactly as in a cluster: command → spark/executor-entrypoint.sh →
 *   /opt/entrypoint.sh executor → java (through the shim) KubernetesExecutorBackend.
 * - The job (e2e/spark/job/FetchLossJob.java) parks one "gate" task per executor after the map
 *   stage; the harness then makes one executor vanish — DROP of every packet in and out of its
 *   network namespace, then its pod deleted with grace 0 — and lets the gates go: the data tasks
 *   open new connections to the lost executor (its pod IP or its Service, as it advertised).
 *
 * Loss as an evicted or lost pod looks to peers: its IP stops answering. The DROP rules live in the
 * pod's netns until the kubelet removes it; from then on a `blackhole` route for the pod CIDR in the
 * node netns (more specific /32 routes of live pods win) keeps the gone IP silent, as a pod CIDR
 * routed to a node that no longer has the pod; without it the node would answer "no route"
 * (ICMP unreachable) at once, which no real cluster promises. Both are removed at the end.
 */
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump, load } from 'js-yaml';
import { z } from 'zod';
import { type ApiAccess, rawGet, rawRequest } from '../adapter/kube-access.ts';
import type { Cluster } from '../cluster/cluster.ts';
import { run } from '../cluster/sys.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PROBE = fileURLToPath(new URL('../scenarios/connect-probe.ts', import.meta.url));
const REPO = join(HERE, '..', '..');
export const BLOCK_MANAGER_PORT = 7079;
/** SPARK_EXEC_SVC_WAIT_SECONDS for the executors: the recipe's default (see sparkConf). */
export const DNS_WAIT_BOUND_S = 30;
const DRIVER_PORT = 7078;
const UI_PORT = 4040;
const DRIVER_SA = 'spark-driver';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- Spark lines -----------------------------------------------------------------------------------

export interface SparkLine {
  readonly version: string;
  /** Cache entry: jars/, bin/, job/job.jar. */
  readonly home: string;
}

/** The Spark lines e2e/build.sh has built (manifest keys "spark-<version>"), oldest first. */
export function sparkLines(): SparkLine[] {
  const out = run(join(REPO, 'e2e', 'build.sh'), ['spark'], 30 * 60_000);
  if (!out.ok) throw new Error(`e2e/build.sh spark failed: ${out.stderr.slice(-2000)}`);
  const manifest = z.record(z.string(), z.string()).parse(JSON.parse(out.stdout.trim().split('\n').at(-1) ?? '{}'));
  return Object.entries(manifest)
    .filter(([k]) => k.startsWith('spark-'))
    .map(([k, home]) => ({ version: k.slice('spark-'.length), home }))
    .sort((a, b) => a.version.localeCompare(b.version, undefined, { numeric: true }));
}

/** The JDK the host's `java` belongs to: the image's JAVA_HOME for driver and executors. */
export function javaHome(): string {
  const out = run('sh', ['-c', 'readlink -f "$(command -v java)"'], 5_000);
  const java = out.stdout.trim();
  if (!out.ok || !java.endsWith('/bin/java')) throw new Error(`no java on PATH (${out.stderr})`);
  return java.slice(0, -'/bin/java'.length);
}

// ---- Variants ----------------------------------------------------------------------------------------

export interface Variant {
  /** Short, DNS-safe: pod names. */
  readonly key: string;
  readonly title: string;
  /** For the chart's labels. */
  readonly short?: string;
  /** false: SPARK_EXEC_SVC_DISABLE=true, the executor advertises its pod IP (stock Spark). */
  readonly advertiseService: boolean;
  /** Extra Spark confs (real settings, not scaled). */
  readonly conf: Readonly<Record<string, string>>;
}

export const VARIANTS = {
  defaults: {
    key: 'a',
    title: 'Spark defaults, executors advertise pod IPs',
    short: 'defaults, pod IP',
    advertiseService: false,
    conf: {},
  },
  creationTimeout: {
    key: 'b',
    title: 'spark.shuffle.io.connectionCreationTimeout=10s, pod IPs',
    short: 'connectionCreationTimeout=10s, pod IP',
    advertiseService: false,
    conf: { 'spark.shuffle.io.connectionCreationTimeout': '10s' },
  },
  service: {
    key: 'c',
    title: 'executors advertise their Service (this project)',
    short: 'Service (this project)',
    advertiseService: true,
    conf: {},
  },
} as const satisfies Record<string, Variant>;

// ---- The run -----------------------------------------------------------------------------------------

export interface FetchLossOptions extends SparkAppOptions {
  readonly dataPartitions: number;
  readonly records: number;
  /** Bound from driver start to all gates parked (JVM starts on a loaded 2-core machine are slow). */
  readonly startTimeoutMs: number;
  /** Bound from the loss to the job's end. */
  readonly jobTimeoutMs: number;
  /** Called once the loss is done; may throw to stop waiting (e.g. no FetchFailed in time). */
  readonly afterLoss?: (watch: LossWatch) => Promise<void>;
}

export interface LossWatch {
  readonly lossAtMs: number;
  /** The driver's log so far. */
  driverLog(): string;
}

const RestExecutor = z.looseObject({ id: z.string(), hostPort: z.string(), isActive: z.boolean() });
const Event = z.looseObject({ kind: z.string(), atMs: z.number() });
export const JobResult = z.looseObject({
  sparkVersion: z.string(),
  applicationId: z.string(),
  correct: z.boolean().optional(),
  records: z.number().optional(),
  expectedRecords: z.number().optional(),
  error: z.string().optional(),
  events: z.array(Event),
});

export interface ExecutorFacts {
  readonly id: string;
  readonly pod: string;
  readonly podIP: string;
  readonly ownerUids: string[];
  /** What Spark's UI REST API says (`/api/v1/applications/<id>/executors`). */
  readonly restHostPort: string | undefined;
  readonly service: { name: string; clusterIP: string; host: string } | undefined;
  /** The wrapper's lines in the container log (advertise / fallback / DNS wait). */
  readonly wrapperLines: string[];
}

export type FetchCause =
  | 'connection refused'
  | 'connect timeout'
  | 'executor dead (driver check)'
  | 'map output already unregistered (no peer asked)'
  | 'other';

export interface FetchLossReport {
  readonly sparkVersion: string;
  readonly variant: Variant;
  readonly applicationId: string;
  readonly conf: Record<string, string>;
  readonly executors: ExecutorFacts[];
  readonly victim: ExecutorFacts & { ranMapTask: boolean };
  readonly timings: {
    driverPodCreatedAtMs: number;
    executorsRegisteredSinceDriverMs: number | undefined;
    gatesParkedSinceDriverMs: number;
    lossAtMs: number;
    /** First refused connect to the lost executor's ClusterIP (kube-proxy has its REJECT rule). */
    serviceRefusesSinceLossMs: number | undefined;
    /** When the stage's fetches were let go (the gates), after the Service refused. */
    gatesOpenedSinceLossMs: number;
    firstFetchFailedSinceLossMs: number | undefined;
    stageResubmittedSinceLossMs: number | undefined;
    jobEndSinceLossMs: number | undefined;
  };
  /** The first FetchFailed task end after the loss (host/port: the peer asked; absent when none was). */
  readonly firstFetchFailed: FetchFailure | undefined;
  readonly fetchFailures: FetchFailure[];
  readonly fetchFailedInEventLog: Array<{ host: string | undefined; port: number | undefined; cause: FetchCause }>;
  /** Lines of the surviving executors' logs about connecting to the lost one. */
  readonly connectFailures: string[];
  /** Tasks still running when the job ended (e.g. stuck in a connect to the lost executor: their
   * stage attempt was superseded, Spark let them run on). */
  readonly tasksStillRunningAtJobEnd: Array<{ stageId: number; partition: number; executorId: string }>;
  readonly correct: boolean | undefined;
  readonly driverSucceeded: boolean;
  readonly leftovers: string[];
  readonly artifacts: string;
}

export interface FetchFailure {
  readonly sinceLossMs: number;
  readonly executorId: string;
  readonly host: string | undefined;
  readonly port: number | undefined;
  readonly cause: FetchCause;
  readonly message: string;
}

export function causeOf(text: string): FetchCause {
  if (/Connection refused/.test(text)) return 'connection refused';
  if (/ConnectTimeoutException|connection timed out|Connecting to \S+ timed out/i.test(text)) return 'connect timeout';
  if (/ExecutorDeadException|remote executor\(Id: \S+\), which maintains the block data to fetch is dead/.test(text))
    return 'executor dead (driver check)';
  if (/MetadataFetchFailedException|Missing an output location/.test(text)) return 'map output already unregistered (no peer asked)';
  return 'other';
}

/** The driver's ServiceAccount and what Spark's driver needs of the API (docs: running-on-kubernetes, RBAC). */
async function ensureDriverAccount(admin: ApiAccess, ns: string): Promise<void> {
  const create = async (path: string, body: unknown): Promise<void> => {
    const answer = await rawRequest(admin, 'POST', path, body);
    if (answer.status !== 201 && answer.status !== 409)
      throw new Error(`POST ${path}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
  };
  await create(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: DRIVER_SA } });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    metadata: { name: DRIVER_SA },
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'delete', 'deletecollection', 'patch'] },
      {
        apiGroups: [''],
        resources: ['configmaps', 'services', 'persistentvolumeclaims'],
        verbs: ['get', 'list', 'watch', 'create', 'delete', 'deletecollection'],
      },
    ],
  });
  await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: DRIVER_SA },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: DRIVER_SA },
    subjects: [{ kind: 'ServiceAccount', name: DRIVER_SA, namespace: ns }],
  });
}

/**
 * spark/executor-pod-template.yaml as documented, plus what the executor image would carry — the
 * process kubelet runs host processes and has no images: Spark's home at /opt/spark, the stand-in
 * entrypoint at /opt/entrypoint.sh and decommission script at /opt/decom.sh (hostPath volumes), the image's ENV (JAVA_HOME, SPARK_HOME); and
 * the job's control directory. Nothing of the recipe's own part is changed.
 */
export interface ExecutorPodTemplate {
  spec: { containers: Array<Record<string, unknown> & { env?: unknown[]; volumeMounts?: unknown[] }>; volumes?: unknown[] };
}

export function executorPodTemplate(line: SparkLine, jdk: string, controlDir: string): ExecutorPodTemplate {
  const template = load(readFileSync(join(REPO, 'spark', 'executor-pod-template.yaml'), 'utf8')) as ExecutorPodTemplate;
  const container = template.spec.containers[0];
  if (container === undefined) throw new Error('the pod template has no container');
  container.env = [{ name: 'JAVA_HOME', value: jdk }, { name: 'SPARK_HOME', value: '/opt/spark' }, ...(container.env ?? [])];
  container.volumeMounts = [
    ...(container.volumeMounts ?? []),
    ...imageStandIns(line).mounts,
    { name: 'e2e-control', mountPath: controlDir },
  ];
  template.spec.volumes = [...(template.spec.volumes ?? []), ...imageStandIns(line).volumes, hostPath('e2e-control', controlDir)];
  return template;
}

export function hostPath(name: string, path: string): Record<string, unknown> {
  return { name, hostPath: { path } };
}

export function imageStandIns(line: SparkLine): { volumes: Array<Record<string, unknown>>; mounts: Array<Record<string, unknown>> } {
  return {
    volumes: [
      hostPath('image-spark-home', line.home),
      hostPath('image-entrypoint', join(HERE, 'entrypoint.sh')),
      hostPath('image-decom', join(HERE, 'decom.sh')),
    ],
    mounts: [
      { name: 'image-spark-home', mountPath: '/opt/spark', readOnly: true },
      { name: 'image-entrypoint', mountPath: '/opt/entrypoint.sh', readOnly: true },
      // Spark's preStop hook when spark.decommission.enabled (spark.kubernetes.decommission.script)
      { name: 'image-decom', mountPath: '/opt/decom.sh', readOnly: true },
    ],
  };
}

export function sparkConf(o: {
  appId: string;
  appName: string;
  namespace: string;
  driverPod: string;
  prefix: string;
  executors: number;
  template: string;
  eventLogDir: string;
  variant: Variant;
}): Record<string, string> {
  return {
    'spark.master': 'k8s://https://10.96.0.1:443',
    'spark.submit.deployMode': 'client',
    'spark.app.name': o.appName,
    // As spark-submit in cluster mode labels the driver pod with the id before the driver runs.
    'spark.app.id': o.appId,
    'spark.kubernetes.namespace': o.namespace,
    'spark.kubernetes.driver.pod.name': o.driverPod,
    'spark.kubernetes.executor.podNamePrefix': o.prefix,
    'spark.kubernetes.container.image': 'e2e-no-image',
    'spark.kubernetes.executor.podTemplateFile': o.template,
    // The executor gets its conf from the driver over RPC; the ConfigMap would only carry a copy.
    'spark.kubernetes.executor.disableConfigMap': 'true',
    // Kept after the application so the harness reads their logs; it deletes them itself.
    'spark.kubernetes.executor.deleteOnTermination': 'false',
    'spark.kubernetes.authenticate.caCertFile': '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
    'spark.kubernetes.authenticate.oauthTokenFile': '/var/run/secrets/kubernetes.io/serviceaccount/token',
    'spark.kubernetes.allocation.batch.size': String(Math.min(2, o.executors)),
    'spark.executor.instances': String(o.executors),
    'spark.executor.cores': '1',
    'spark.executor.memory': '512m',
    'spark.driver.memory': '512m',
    'spark.driver.host': '$(POD_IP)',
    'spark.driver.port': String(DRIVER_PORT),
    'spark.blockManager.port': String(BLOCK_MANAGER_PORT),
    'spark.ui.port': String(UI_PORT),
    // Gates first (see FetchLossJob.java): no preferred locations for reduce tasks.
    'spark.shuffle.reduceLocality.enabled': 'false',
    'spark.eventLog.enabled': 'true',
    'spark.eventLog.dir': `file://${o.eventLogDir}`,
    'spark.eventLog.compress': 'false',
    // Start-up on 2 shared cores: the JIT's first tier only, one GC thread.
    'spark.driver.extraJavaOptions': '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC',
    'spark.executor.extraJavaOptions': '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC',
    // The recipe's default DNS wait (SPARK_EXEC_SVC_WAIT_SECONDS=30): with CoreDNS as kubeadm
    // v1.34 configures it (the harness's Corefile: no cache for the cluster domain) an executor
    // resolves its name as soon as the function has made its Service. With an older kubeadm's
    // Corefile (`cache 30` over `ttl 30`) its first NXDOMAIN was cached for 30 s and 1 of 4
    // executors fell back to its pod IP (run of 2026-12-04 17:57); a fallback fails this scenario.
    'spark.executorEnv.SPARK_EXEC_SVC_WAIT_SECONDS': String(DNS_WAIT_BOUND_S),
    ...(o.variant.advertiseService ? {} : { 'spark.executorEnv.SPARK_EXEC_SVC_DISABLE': 'true' }),
    ...o.variant.conf,
  };
}

interface PodSummary {
  name: string;
  uid: string;
  execId: string;
  podIP: string | undefined;
  phase: string | undefined;
  ownerUids: string[];
}

export async function appPods(admin: ApiAccess, ns: string, appId: string): Promise<PodSummary[]> {
  const list = (await rawGet(admin, `/api/v1/namespaces/${ns}/pods?labelSelector=spark-app-selector%3D${appId},spark-role%3Dexecutor`)) as {
    items: Array<{
      metadata: { name: string; uid: string; labels?: Record<string, string>; ownerReferences?: Array<{ uid: string }> };
      status?: { podIP?: string; phase?: string };
    }>;
  };
  return list.items.map((p) => ({
    name: p.metadata.name,
    uid: p.metadata.uid,
    execId: p.metadata.labels?.['spark-exec-id'] ?? '',
    podIP: p.status?.podIP,
    phase: p.status?.phase,
    ownerUids: (p.metadata.ownerReferences ?? []).map((o) => o.uid),
  }));
}

async function appServices(admin: ApiAccess, ns: string, appId: string): Promise<Map<string, { name: string; clusterIP: string }>> {
  const list = (await rawGet(admin, `/api/v1/namespaces/${ns}/services?labelSelector=spark-app-selector%3D${appId}`)) as {
    items: Array<{ metadata: { name: string; labels?: Record<string, string> }; spec: { clusterIP: string } }>;
  };
  return new Map(
    list.items.map((s) => [s.metadata.labels?.['spark-exec-id'] ?? '', { name: s.metadata.name, clusterIP: s.spec.clusterIP }]),
  );
}

export async function podPhase(admin: ApiAccess, ns: string, name: string): Promise<string | undefined> {
  const answer = await rawRequest(admin, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`);
  if (answer.status === 404) return 'Gone';
  return (answer.body as { status?: { phase?: string } }).status?.phase;
}

export function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

export function tail(text: string, lines = 40): string {
  return text.split('\n').slice(-lines).join('\n');
}

/** The network namespaces the host has (`ip netns list`), names only. */
function netnsNames(): Set<string> {
  const out = run('ip', ['netns', 'list'], 10_000);
  return new Set(
    out.stdout
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '')
      .filter((n) => n !== ''),
  );
}

// ---- One application's driver pod, shared by runFetchLoss and runDecommission -------------------------

export interface SparkAppOptions {
  readonly cluster: Cluster;
  readonly admin: ApiAccess;
  readonly namespace: string;
  readonly line: SparkLine;
  readonly variant: Variant;
  readonly executors: number;
  /** Where logs, the event log and the job's result are copied. */
  readonly logDir: string;
  readonly log?: (line: string) => void;
}

/** One Spark application: its names, control directory, conf, and what must be undone at its end. */
export interface SparkApp {
  readonly appId: string;
  readonly driverPod: string;
  readonly control: string;
  readonly eventLogDir: string;
  readonly artifacts: string;
  readonly conf: Record<string, string>;
  readonly undo: Array<{ what: string; fn: () => Promise<void> | void }>;
  readonly leftovers: string[];
  /** Pod name → its log directory (filled by executorFacts). */
  readonly podLogDirs: Map<string, string>;
  /** Network namespaces of the run to check at the end besides the application's pods' own. */
  readonly extraNetns: Array<{ netns: string; what: string }>;
  readonly log: (line: string) => void;
}

/**
 * Names, control directory, pod template and conf of one application (nothing on the cluster yet).
 * `setUp` may add to the executor pod template (sidecars, volumes) and the conf, given the
 * application's control directory.
 */
export function prepareApp(
  o: SparkAppOptions,
  naming: { podPrefix: string; appName: string },
  setUp?: (template: ExecutorPodTemplate, control: string) => Record<string, string>,
): SparkApp {
  const appId = `spark-${randomBytes(16).toString('hex')}`;
  const prefix = `${naming.podPrefix}-${o.variant.key}-${appId.slice(6, 14)}`;
  const driverPod = `${prefix}-driver`;
  const control = mkdtempSync('/tmp/sxs-spark-e2e-');
  chmodSync(control, 0o777);
  const eventLogDir = join(control, 'eventlog');
  mkdirSync(eventLogDir);
  const artifacts = join(o.logDir, `${o.variant.key}-${o.line.version}`);
  mkdirSync(artifacts, { recursive: true });
  const templateFile = join(control, 'executor-pod-template.yaml');
  const template = executorPodTemplate(o.line, javaHome(), control);
  const extraConf = setUp?.(template, control) ?? {};
  writeFileSync(templateFile, dump(template));
  const conf = sparkConf({
    appId,
    appName: naming.appName,
    namespace: o.namespace,
    driverPod,
    prefix,
    executors: o.executors,
    template: templateFile,
    eventLogDir,
    variant: o.variant,
  });
  Object.assign(conf, extraConf);
  return {
    appId,
    driverPod,
    control,
    eventLogDir,
    artifacts,
    conf,
    undo: [],
    leftovers: [],
    podLogDirs: new Map(),
    extraNetns: [],
    log: o.log ?? (() => undefined),
  };
}

export interface LaunchedDriver {
  readonly driverPodCreatedAtMs: number;
  /** The driver's log so far. */
  driverLog(): string;
}

/** The driver's account, then its pod: `spark-submit --deploy-mode client --class <mainClass> job.jar <control> <jobArgs…>`. */
export async function launchDriver(
  o: SparkAppOptions,
  app: SparkApp,
  mainClass: string,
  jobArgs: readonly string[],
): Promise<LaunchedDriver> {
  const { admin, namespace: ns } = o;
  await ensureDriverAccount(admin, ns);
  const args = ['/opt/spark/bin/spark-submit', '--class', mainClass];
  for (const [k, v] of Object.entries(app.conf)) args.push('--conf', `${k}=${v}`);
  args.push('/opt/spark/job/job.jar', app.control, ...jobArgs);
  const jdk = javaHome();
  const driverPodCreatedAtMs = Date.now();
  const created = await rawRequest(admin, 'POST', `/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: app.driverPod,
      namespace: ns,
      labels: { 'spark-app-selector': app.appId, 'spark-role': 'driver', 'spark-app-name': app.conf['spark.app.name'] ?? '' },
    },
    spec: {
      serviceAccountName: DRIVER_SA,
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: 'spark-kubernetes-driver',
          image: 'e2e-no-image',
          command: args,
          env: [
            { name: 'JAVA_HOME', value: jdk },
            { name: 'SPARK_HOME', value: '/opt/spark' },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
          volumeMounts: [...imageStandIns(o.line).mounts, { name: 'e2e-control', mountPath: app.control }],
        },
      ],
      volumes: [...imageStandIns(o.line).volumes, hostPath('e2e-control', app.control)],
    },
  });
  if (created.status !== 201) throw new Error(`create driver pod: HTTP ${created.status}: ${JSON.stringify(created.body)}`);
  app.undo.push({ what: 'application pods', fn: () => deleteAppPods(admin, ns, app.appId, app.driverPod) });
  const driverRuntime = await o.cluster.podRuntime(ns, app.driverPod, 60_000);
  const driverLogFile = join(driverRuntime.logDir, 'spark-kubernetes-driver.log');
  app.log(`${o.variant.key} ${o.line.version}: driver pod ${app.driverPod} (${driverRuntime.podIP}) started`);
  return { driverPodCreatedAtMs, driverLog: () => readText(driverLogFile) };
}

/** Waits for a file the job writes in its control directory, failing when the driver ends first. */
export async function awaitControlFile(
  o: SparkAppOptions,
  app: SparkApp,
  driver: LaunchedDriver,
  name: string,
  timeoutMs: number,
): Promise<string> {
  const file = join(app.control, name);
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(file)) {
    const phase = await podPhase(o.admin, o.namespace, app.driverPod);
    if (phase === 'Failed' || phase === 'Succeeded' || phase === 'Gone')
      throw new Error(`driver ended (${phase}) before ${name}:\n${tail(driver.driverLog())}`);
    if (Date.now() > deadline) throw new Error(`no ${name} after ${timeoutMs} ms:\n${tail(driver.driverLog())}`);
    await sleep(100);
  }
  return readFileSync(file, 'utf8');
}

/** Each executor as the API, Spark's UI REST API and its container log show it; fills app.podLogDirs. */
export async function executorFacts(o: SparkAppOptions, app: SparkApp): Promise<ExecutorFacts[]> {
  const { admin, namespace: ns } = o;
  const rest = await o.cluster.execInPod(
    ns,
    app.driverPod,
    ['curl', '-sf', `http://127.0.0.1:${UI_PORT}/api/v1/applications/${app.appId}/executors`],
    { timeoutMs: 20_000 },
  );
  if (rest.code !== 0) throw new Error(`Spark UI REST API: curl exit ${rest.code}: ${rest.stderr}`);
  const restExecutors = z.array(RestExecutor).parse(JSON.parse(rest.stdout));
  const pods = await appPods(admin, ns, app.appId);
  const services = await appServices(admin, ns, app.appId);
  const executors: ExecutorFacts[] = [];
  for (const pod of pods) {
    const runtime = await o.cluster.podRuntime(ns, pod.name, 10_000);
    app.podLogDirs.set(pod.name, runtime.logDir);
    const svc = services.get(pod.execId);
    const containerLog = readText(join(runtime.logDir, 'spark-kubernetes-executor.log'));
    executors.push({
      id: pod.execId,
      pod: pod.name,
      podIP: runtime.podIP,
      ownerUids: pod.ownerUids,
      restHostPort: restExecutors.find((e) => e.id === pod.execId)?.hostPort,
      service: svc === undefined ? undefined : { ...svc, host: `${svc.name}.${ns}.svc` },
      wrapperLines: containerLog.split('\n').filter((l) => l.startsWith('spark-exec-svc:')),
    });
  }
  return executors;
}

export interface JobOutcome {
  readonly result: z.infer<typeof JobResult>;
  readonly driverSucceeded: boolean;
  /** The application's Spark event log, all files' text. */
  readonly eventLogText: string;
}

/** Waits for the job's result.json and the driver pod's end; copies the driver's log, the result and the event log. */
export async function awaitJobEnd(o: SparkAppOptions, app: SparkApp, driver: LaunchedDriver, timeoutMs: number): Promise<JobOutcome> {
  const resultFile = join(app.control, 'result.json');
  const jobDeadline = Date.now() + timeoutMs;
  while (!existsSync(resultFile)) {
    const phase = await podPhase(o.admin, o.namespace, app.driverPod);
    if (phase === 'Failed' || phase === 'Gone') throw new Error(`driver ended (${phase}) without a result:\n${tail(driver.driverLog())}`);
    if (Date.now() > jobDeadline) throw new Error(`no job result ${timeoutMs} ms after the loss:\n${tail(driver.driverLog())}`);
    await sleep(200);
  }
  const result = JobResult.parse(JSON.parse(readFileSync(resultFile, 'utf8')));
  let phase: string | undefined;
  const endDeadline = Date.now() + 60_000;
  do {
    phase = await podPhase(o.admin, o.namespace, app.driverPod);
    if (phase === 'Succeeded' || phase === 'Failed') break;
    await sleep(200);
  } while (Date.now() < endDeadline);
  writeFileSync(join(app.artifacts, 'driver.log'), driver.driverLog());
  writeFileSync(join(app.artifacts, 'result.json'), readFileSync(resultFile));
  // Spark 4 writes a rolling event log by default: a directory eventlog_v2_<app>/events_<n>_<app>.
  cpSync(app.eventLogDir, join(app.artifacts, 'eventlog'), { recursive: true });
  const eventLogText = (readdirSync(app.eventLogDir, { recursive: true }) as string[])
    .map((f) => readText(join(app.eventLogDir, f)))
    .join('\n');
  return { result, driverSucceeded: phase === 'Succeeded', eventLogText };
}

/** The end of every run: the undo steps, then nothing of the run may be left (pods' netns, JVMs, black hole). */
export async function cleanupApp(o: SparkAppOptions, app: SparkApp): Promise<void> {
  const { cluster, admin, namespace: ns } = o;
  // Every pod of the application (the replacement executor Spark asks for included): its netns.
  const podNetns: string[] = [];
  try {
    for (const p of [app.driverPod, ...(await appPods(admin, ns, app.appId)).map((x) => x.name)])
      podNetns.push((await cluster.podRuntime(ns, p, 1_000).catch(() => undefined))?.netns ?? '');
  } catch {
    /* the API is down: the harness's own check will say so */
  }
  for (const u of [...app.undo].reverse()) {
    try {
      await u.fn();
    } catch (error) {
      app.leftovers.push(`${u.what}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  // Ours to check: the pods' netns, the black hole, the JVMs. The kubelet removes a deleted pod's
  // netns and processes after the API has let it go: waited for, bounded.
  const ours = [...app.extraNetns, ...podNetns.filter((n) => n !== '').map((netns) => ({ netns, what: 'of a deleted pod' }))];
  const remaining = (): string[] => {
    const names = netnsNames();
    const left = ours
      .filter((n, i, all) => names.has(n.netns) && all.findIndex((m) => m.netns === n.netns) === i)
      .map((n) => `netns ${n.netns} ${n.what}`);
    const jvms = run('pgrep', ['-f', app.control], 5_000).stdout.trim();
    if (jvms !== '') left.push(`processes using ${app.control}: ${jvms.replace(/\n/g, ' ')}`);
    return left;
  };
  const cleanDeadline = Date.now() + 30_000;
  let left = remaining();
  while (left.length > 0 && Date.now() < cleanDeadline) {
    await sleep(250);
    left = remaining();
  }
  app.leftovers.push(...left);
  const route = await cluster.execInNode(['ip', 'route', 'show', 'type', 'blackhole']);
  if (route.stdout.trim() !== '') app.leftovers.push(`blackhole route: ${route.stdout.trim()}`);
  rmSync(app.control, { recursive: true, force: true });
  if (app.leftovers.length > 0) app.log(`leftovers: ${app.leftovers.join('; ')}`);
}

// ---- The fetch-loss run --------------------------------------------------------------------------------

export async function runFetchLoss(o: FetchLossOptions): Promise<FetchLossReport> {
  const { cluster, admin, namespace: ns } = o;
  const log = o.log ?? (() => undefined);
  const app = prepareApp(o, { podPrefix: 'fl', appName: `fetch-loss-${o.variant.key}` });
  const { appId, control, artifacts, conf, podLogDirs } = app;
  try {
    // The pod CIDR's black hole in the node netns (see the header).
    const existing = await cluster.execInNode(['ip', 'route', 'show', 'type', 'blackhole', cluster.podCIDR]);
    if (existing.stdout.trim() === '') {
      const added = await cluster.execInNode(['ip', 'route', 'add', 'blackhole', cluster.podCIDR]);
      if (added.code !== 0) throw new Error(`ip route add blackhole ${cluster.podCIDR}: ${added.stderr}`);
      app.undo.push({
        what: `blackhole route ${cluster.podCIDR}`,
        fn: async () => {
          await cluster.execInNode(['ip', 'route', 'del', 'blackhole', cluster.podCIDR]);
        },
      });
    }
    const driver = await launchDriver(o, app, 'FetchLossJob', [String(o.executors), String(o.dataPartitions), String(o.records)]);
    const { driverPodCreatedAtMs, driverLog } = driver;

    // Gates parked: one per executor.
    const startDeadline = Date.now() + o.startTimeoutMs;
    let gates: Array<{ partition: number; execId: string }> = [];
    for (;;) {
      gates = readdirSync(control)
        .filter((f) => f.startsWith('gate-'))
        .map((f) => {
          const [, partition, execId] = f.split('-');
          return { partition: Number(partition), execId: execId ?? '' };
        });
      if (gates.length >= o.executors) break;
      const phase = await podPhase(admin, ns, app.driverPod);
      if (phase === 'Failed' || phase === 'Succeeded' || phase === 'Gone')
        throw new Error(`driver ended (${phase}) before the gates:\n${tail(driverLog())}`);
      if (Date.now() > startDeadline)
        throw new Error(`${gates.length}/${o.executors} gates after ${o.startTimeoutMs} ms:\n${tail(driverLog())}`);
      await sleep(100);
    }
    const gatesParkedAtMs = Date.now();
    log(`${o.variant.key} ${o.line.version}: ${gates.length} gates parked after ${gatesParkedAtMs - driverPodCreatedAtMs} ms`);

    const executors = await executorFacts(o, app);
    const gate0 = [...gates].sort((a, b) => a.partition - b.partition)[0];
    const victimFacts = executors.find((e) => e.id === gate0?.execId);
    if (victimFacts === undefined) throw new Error(`no executor pod for gate ${JSON.stringify(gate0)}`);
    const victimRuntime = await cluster.podRuntime(ns, victimFacts.pod, 10_000);
    copyLogs(podLogDirs, artifacts);

    // The loss: the executor's netns stops answering, then its pod is deleted.
    const victimNetns = victimRuntime.netns;
    app.extraNetns.push({ netns: victimNetns, what: '(with the DROP rules)' });
    for (const chain of ['INPUT', 'OUTPUT']) {
      const r = run('ip', ['netns', 'exec', victimNetns, 'iptables', '-w', '-I', chain, '-j', 'DROP'], 10_000);
      if (!r.ok) throw new Error(`DROP in ${victimNetns}: ${r.stderr}`);
    }
    const lossAtMs = Date.now();
    const del = await rawRequest(admin, 'DELETE', `/api/v1/namespaces/${ns}/pods/${victimFacts.pod}?gracePeriodSeconds=0`);
    if (del.status !== 200) throw new Error(`delete ${victimFacts.pod}: HTTP ${del.status}`);
    log(`${o.variant.key} ${o.line.version}: executor ${victimFacts.id} (${victimFacts.pod}, ${victimFacts.podIP}) lost`);

    // The gates open once the lost executor's Service refuses connects (probed from a survivor's
    // netns), in every set-up alike. Before that, kube-proxy still DNATs its ClusterIP to the gone
    // pod IP, and a connect made then is pinned to it by conntrack and hangs like one to the pod IP
    // (run of 2026-12-04: three 10 s connect timeouts through the Service when the gates opened at
    // the deletion). That window is measured here: deletion → EndpointSlice → kube-proxy's REJECT.
    const survivor = executors.find((e) => e.id !== victimFacts.id);
    const victimService = victimFacts.service;
    let serviceRefusesSinceLossMs: number | undefined;
    if (survivor !== undefined && victimService !== undefined) {
      const probe = await cluster.execInPod(
        ns,
        survivor.pod,
        [
          process.execPath,
          PROBE,
          victimService.clusterIP,
          String(BLOCK_MANAGER_PORT),
          '--until',
          'refused',
          '--interval-ms',
          '20',
          '--timeout-ms',
          '500',
          '--deadline-ms',
          '60000',
        ],
        { timeoutMs: 70_000 },
      );
      const outcomes = probe.stdout
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { atMs: number; outcome: string });
      const refused = outcomes.find((r) => r.outcome === 'refused');
      if (refused === undefined) throw new Error(`the lost executor's Service never refused: ${probe.stdout} ${probe.stderr}`);
      serviceRefusesSinceLossMs = refused.atMs - lossAtMs;
    }
    writeFileSync(join(control, 'go'), String(Date.now()));
    const gatesOpenedAtMs = Date.now();
    await o.afterLoss?.({ lossAtMs, driverLog });

    // The job's end.
    const { result, driverSucceeded, eventLogText } = await awaitJobEnd(o, app, driver, o.jobTimeoutMs);
    const survivors = new Map([...podLogDirs].filter(([pod]) => pod !== victimFacts.pod));
    copyLogs(survivors, artifacts);

    const events = result.events as Array<Record<string, unknown>>;
    const after = (e: Record<string, unknown>): boolean => (e['atMs'] as number) >= lossAtMs;
    const fetchFailures = fetchFailuresOf(events, lossAtMs);
    const resubmitted = events.find((e) => e['kind'] === 'stageSubmitted' && (e['attempt'] as number) > 0 && after(e));
    const jobEnd = events.find((e) => e['kind'] === 'jobEnd');
    const victimAddress = victimFacts.service?.host ?? victimFacts.podIP;
    const connectFailures = [...survivors.keys()].flatMap((pod) =>
      readText(join(artifacts, `${pod}.log`))
        .split('\n')
        .filter(
          (l) => l.includes(victimAddress) && /Failed to connect|Connection refused|timed out|Exception while beginning fetch/.test(l),
        )
        .map((l) => `${pod}: ${l}`),
    );
    const report: FetchLossReport = {
      sparkVersion: result.sparkVersion,
      variant: o.variant,
      applicationId: appId,
      conf,
      executors,
      victim: {
        ...victimFacts,
        ranMapTask: events.some(
          (e) => e['kind'] === 'taskEnd' && e['stageId'] === 0 && e['executorId'] === victimFacts.id && e['reason'] === 'Success',
        ),
      },
      timings: {
        driverPodCreatedAtMs,
        executorsRegisteredSinceDriverMs:
          typeof result['executorsRegisteredAtMs'] === 'number' ? result['executorsRegisteredAtMs'] - driverPodCreatedAtMs : undefined,
        gatesParkedSinceDriverMs: gatesParkedAtMs - driverPodCreatedAtMs,
        lossAtMs,
        serviceRefusesSinceLossMs,
        gatesOpenedSinceLossMs: gatesOpenedAtMs - lossAtMs,
        firstFetchFailedSinceLossMs: fetchFailures[0]?.sinceLossMs,
        stageResubmittedSinceLossMs: resubmitted === undefined ? undefined : (resubmitted['atMs'] as number) - lossAtMs,
        jobEndSinceLossMs: jobEnd === undefined ? undefined : (jobEnd['atMs'] as number) - lossAtMs,
      },
      firstFetchFailed: fetchFailures[0],
      fetchFailures,
      fetchFailedInEventLog: fetchFailedInEventLog(eventLogText),
      connectFailures,
      tasksStillRunningAtJobEnd: stillRunning(events, jobEnd === undefined ? Number.POSITIVE_INFINITY : (jobEnd['atMs'] as number)),
      correct: result.correct,
      driverSucceeded,
      leftovers: app.leftovers,
      artifacts,
    };
    return report;
  } finally {
    await cleanupApp(o, app);
  }
}

/** The job's FetchFailed task ends, times since `sinceMs`. */
export function fetchFailuresOf(events: ReadonlyArray<Record<string, unknown>>, sinceMs: number): FetchFailure[] {
  return events
    .filter((e) => e['kind'] === 'taskEnd' && e['reason'] === 'FetchFailed')
    .map((e) => {
      const from = e['fetchFrom'] as { host: string; port: number } | undefined;
      const message = String(e['message']);
      return {
        sinceLossMs: (e['atMs'] as number) - sinceMs,
        executorId: String(e['executorId']),
        host: from?.host,
        port: from?.port,
        cause: causeOf(message),
        // the exception and its causes, without the stack frames
        message: message
          .split('\n')
          .filter((l, i) => i === 0 || l.startsWith('Caused by:'))
          .join('\n'),
      };
    });
}

/** FetchFailed task ends as Spark's event log records them. */
export function fetchFailedInEventLog(
  eventLogText: string,
): Array<{ host: string | undefined; port: number | undefined; cause: FetchCause }> {
  return eventLogText
    .split('\n')
    .filter((l) => l.includes('"FetchFailed"'))
    .map((l) => {
      const ev = JSON.parse(l) as {
        'Task End Reason': { 'Block Manager Address'?: { Host: string; Port: number } | null; Message: string };
      };
      const r = ev['Task End Reason'];
      const bm = r['Block Manager Address'] ?? undefined;
      return { host: bm?.Host, port: bm?.Port, cause: causeOf(r.Message) };
    });
}

/** Task starts before `until` with no end before it, matched by stage, partition and executor. */
function stillRunning(
  events: ReadonlyArray<Record<string, unknown>>,
  until: number,
): Array<{ stageId: number; partition: number; executorId: string }> {
  const open = new Map<string, { stageId: number; partition: number; executorId: string; n: number }>();
  for (const e of events) {
    if ((e['atMs'] as number) > until || (e['kind'] !== 'taskStart' && e['kind'] !== 'taskEnd')) continue;
    const t = { stageId: e['stageId'] as number, partition: e['partition'] as number, executorId: String(e['executorId']) };
    const key = `${t.stageId}/${t.partition}/${t.executorId}`;
    const entry = open.get(key) ?? { ...t, n: 0 };
    entry.n += e['kind'] === 'taskStart' ? 1 : -1;
    open.set(key, entry);
  }
  return [...open.values()].filter((t) => t.n > 0).map(({ stageId, partition, executorId }) => ({ stageId, partition, executorId }));
}

export function copyLogs(podLogDirs: ReadonlyMap<string, string>, dest: string): void {
  for (const [pod, dir] of podLogDirs) {
    const file = join(dir, 'spark-kubernetes-executor.log');
    if (existsSync(file)) copyFileSync(file, join(dest, `${pod}.log`));
  }
}

/** Deletes the application's pods (grace 0) and waits until the API and the kubelet have none left. */
async function deleteAppPods(admin: ApiAccess, ns: string, appId: string, driverPod: string): Promise<void> {
  const names = [driverPod, ...(await appPods(admin, ns, appId)).map((p) => p.name)];
  for (const name of names) await rawRequest(admin, 'DELETE', `/api/v1/namespaces/${ns}/pods/${name}?gracePeriodSeconds=0`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const left = (await appPods(admin, ns, appId)).map((p) => p.name);
    if ((await podPhase(admin, ns, driverPod)) !== 'Gone') left.push(driverPod);
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`pods still there 60 s after their deletion: ${left.join(', ')}`);
    await sleep(200);
  }
}
