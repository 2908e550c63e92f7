/**
 * Issue 19's "also show: the shuffle-service and port-taken fallbacks keeping the pod IP", under
 * real Spark. One application per fallback (the machinery of fetch-loss.ts: client-mode driver pod,
 * executors Spark creates from the documented template, through spark/executor-entrypoint.sh),
 * each running one shuffle (e2e/spark/job/ShuffleLocationsJob.java) whose reduce tasks report the
 * addresses the map output tracker gave them — where their fetches went.
 *
 * - shuffle service: `spark.shuffle.service.enabled=true` with the signal the recipe documents
 *   (`spark.executorEnv.SPARK_EXEC_SVC_SHUFFLE_SERVICE=true`, docs/executor-recipe.md). Each
 *   executor pod runs Spark's own external shuffle service (`bin/spark-class
 *   org.apache.spark.deploy.ExternalShuffleService`, port 7337) as a sidecar that shares the
 *   executor's local directory (the volume `spark-local-dir-1`, mounted in both at one path), so
 *   the service can serve the files the executor registers.
 *   The block manager registers with the service at <advertised host>:7337 and map outputs are
 *   reported there (BlockManager.initialize, docs/executor-recipe.md section 5): the executor must
 *   keep its pod IP, and the fetches go to <pod IP>:7337.
 * - port taken: a sidecar listens on 0.0.0.0:7079 (`spark.blockManager.port`) before the executor
 *   starts. The wrapper finds the listener and keeps the pod IP; Spark moves the block manager to
 *   7080 (spark.port.maxRetries, default 16) and registers that port, reachable at the pod IP.
 *
 * Spark appends the executor container after the template's other containers
 * (ExecutorPodsAllocator: `addToContainers(executorPod.container)`), so the sidecar starts first,
 * and its postStart hook — waiting until its port listens — holds the executor container back, as
 * the kubelet does (startContainer runs the hook synchronously; SyncPod starts containers in
 * order). The process kubelet does the same (e2e/go/kubelet/provider.go startPod).
 */
import { copyFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { rawRequest } from '../adapter/kube-access.ts';
import {
  awaitControlFile,
  awaitJobEnd,
  BLOCK_MANAGER_PORT,
  cleanupApp,
  type ExecutorFacts,
  type ExecutorPodTemplate,
  executorFacts,
  imageStandIns,
  javaHome,
  launchDriver,
  prepareApp,
  readText,
  type SparkAppOptions,
  type Variant,
} from './fetch-loss.ts';

const TCP_SERVER = fileURLToPath(new URL('../tools/tcp-echo-server.ts', import.meta.url));
/** spark.shuffle.service.port's default (core config/package.scala). */
export const SHUFFLE_SERVICE_PORT = 7337;
const SIDECAR = { shuffleService: 'spark-shuffle-service', portHolder: 'port-holder' } as const;

export type FallbackKind = 'shuffle-service' | 'port-taken';

export const FALLBACK_VARIANTS: Readonly<Record<FallbackKind, Variant>> = {
  'shuffle-service': {
    key: 'ss',
    title: 'external shuffle service (a sidecar on 7337), executors through the recipe',
    short: 'shuffle service',
    advertiseService: true,
    conf: { 'spark.shuffle.service.enabled': 'true', 'spark.executorEnv.SPARK_EXEC_SVC_SHUFFLE_SERVICE': 'true' },
  },
  'port-taken': {
    key: 'pt',
    title: `spark.blockManager.port ${BLOCK_MANAGER_PORT} taken in the pod by a sidecar, executors through the recipe`,
    short: 'port taken',
    advertiseService: true,
    conf: {},
  },
};

export interface FallbackOptions extends SparkAppOptions {
  readonly kind: FallbackKind;
  readonly reducers: number;
  readonly records: number;
  /** Bound from the driver's start to the shuffle done (JVM starts on a loaded 2-core machine are slow). */
  readonly startTimeoutMs: number;
  /** Bound from `go` to the job's end. */
  readonly jobTimeoutMs: number;
}

export interface ReduceTask {
  readonly partition: number;
  readonly executorId: string;
  readonly records: number;
  /** "<executor id>=<host>:<port>" for every map output the task was told to fetch. */
  readonly fetchFrom: string[];
}

export interface FallbackReport {
  readonly kind: FallbackKind;
  readonly sparkVersion: string;
  readonly applicationId: string;
  readonly conf: Record<string, string>;
  /** The executor pods' containers, in the order Spark wrote them (the kubelet starts them so). */
  readonly podContainers: string[][];
  /** Each executor pod's containers' states once the shuffle was done ("<name>=running"). */
  readonly containerStates: string[][];
  readonly executors: ExecutorFacts[];
  readonly reduceTasks: ReduceTask[];
  /** Per reduce task (stage 1) that fetched from another executor: blocks and bytes. */
  readonly remoteFetches: Array<{ partition: number; executorId: string; blocks: number; bytes: number }>;
  /** The sidecar's log lines about this application's executors (the shuffle service's registrations). */
  readonly sidecarLines: string[];
  /** The executors' own log lines about the block manager's port (Spark moving it). */
  readonly portLines: string[];
  readonly driverToShuffledMs: number;
  readonly correct: boolean | undefined;
  readonly driverSucceeded: boolean;
  readonly leftovers: string[];
  readonly artifacts: string;
}

const ReduceTasks = z.array(
  z.object({ partition: z.number(), executorId: z.string(), records: z.number(), fetchFrom: z.array(z.string()) }),
);
const TaskEnd = z.looseObject({
  kind: z.literal('taskEnd'),
  stageId: z.number(),
  partition: z.number(),
  executorId: z.string(),
  remoteBlocksFetched: z.number().optional(),
  remoteBytesRead: z.number().optional(),
});
const PodContainers = z.looseObject({
  spec: z.looseObject({ containers: z.array(z.looseObject({ name: z.string() })) }),
  status: z
    .looseObject({ containerStatuses: z.array(z.looseObject({ name: z.string(), state: z.record(z.string(), z.unknown()) })).optional() })
    .optional(),
});

/** A postStart hook that returns once something listens on 127.0.0.1:<port> in the pod (60 s at most). */
function untilListening(port: number): Record<string, unknown> {
  const script =
    `for i in $(seq 1 1200); do (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && { echo "port ${port} listening"; exit 0; }; sleep 0.05; done; ` +
    `echo "nothing listens on ${port} after 60 s" >&2; exit 1`;
  return { postStart: { exec: { command: ['/bin/bash', '-c', script] } } };
}

/**
 * Spark's external shuffle service beside the executor, sharing its local directory: the
 * executor container mounts the volume `spark-local-dir-1`, which LocalDirsFeatureStep (3.5, 4.0)
 * then takes as the executor's local directory (SPARK_LOCAL_DIRS = its mount path) instead of
 * adding an emptyDir of its own; the sidecar mounts it at the same path.
 */
function addShuffleService(template: ExecutorPodTemplate, o: FallbackOptions, control: string): Record<string, string> {
  const localDir = { name: 'spark-local-dir-1', mountPath: join(control, 'spark-local') };
  const executor = template.spec.containers[0];
  if (executor === undefined) throw new Error('the pod template has no container');
  template.spec.volumes = [...(template.spec.volumes ?? []), { name: localDir.name, emptyDir: {} }];
  executor.volumeMounts = [...(executor.volumeMounts ?? []), localDir];
  template.spec.containers.push({
    name: SIDECAR.shuffleService,
    image: 'e2e-no-image',
    command: ['/opt/spark/bin/spark-class', 'org.apache.spark.deploy.ExternalShuffleService'],
    env: [
      { name: 'JAVA_HOME', value: javaHome() },
      { name: 'SPARK_HOME', value: '/opt/spark' },
      { name: 'SPARK_DAEMON_MEMORY', value: '256m' },
      { name: 'SPARK_DAEMON_JAVA_OPTS', value: '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' },
    ],
    volumeMounts: [...imageStandIns(o.line).mounts, localDir],
    lifecycle: untilListening(SHUFFLE_SERVICE_PORT),
  });
  return {};
}

/** A sidecar holding spark.blockManager.port in the pod's network namespace. */
function addPortHolder(template: ExecutorPodTemplate): Record<string, string> {
  template.spec.containers.push({
    name: SIDECAR.portHolder,
    image: 'e2e-no-image',
    command: [process.execPath, TCP_SERVER, String(BLOCK_MANAGER_PORT)],
    lifecycle: untilListening(BLOCK_MANAGER_PORT),
  });
  return {};
}

export async function runFallback(o: FallbackOptions): Promise<FallbackReport> {
  const { admin, namespace: ns } = o;
  const app = prepareApp(o, { podPrefix: 'fb', appName: `fallback-${o.variant.key}` }, (template, control) =>
    o.kind === 'shuffle-service' ? addShuffleService(template, o, control) : addPortHolder(template),
  );
  try {
    const driver = await launchDriver(o, app, 'ShuffleLocationsJob', [String(o.executors), String(o.reducers), String(o.records)]);
    await awaitControlFile(o, app, driver, 'shuffled', o.startTimeoutMs);
    const driverToShuffledMs = Date.now() - driver.driverPodCreatedAtMs;
    app.log(`${o.variant.key} ${o.line.version}: shuffle done ${driverToShuffledMs} ms after the driver pod`);
    const executors = await executorFacts(o, app);
    const podContainers: string[][] = [];
    const containerStates: string[][] = [];
    for (const e of executors) {
      const pod = await rawRequest(admin, 'GET', `/api/v1/namespaces/${ns}/pods/${e.pod}`);
      const parsed = PodContainers.parse(pod.body);
      podContainers.push(parsed.spec.containers.map((c) => c.name));
      containerStates.push((parsed.status?.containerStatuses ?? []).map((c) => `${c.name}=${Object.keys(c.state)[0] ?? 'none'}`).sort());
    }
    const sidecar = o.kind === 'shuffle-service' ? SIDECAR.shuffleService : SIDECAR.portHolder;
    const sidecarLines: string[] = [];
    const portLines: string[] = [];
    for (const [pod, dir] of app.podLogDirs) {
      sidecarLines.push(
        ...readText(join(dir, `${sidecar}.log`))
          .split('\n')
          .filter((l) => l.includes(app.appId))
          .map((l) => `${pod}: ${l}`),
      );
      portLines.push(
        ...readText(join(dir, 'spark-kubernetes-executor.log'))
          .split('\n')
          .filter((l) =>
            /could not bind on port|Successfully started service 'org\.apache\.spark\.network\.netty\.NettyBlockTransferService'/.test(l),
          )
          .map((l) => `${pod}: ${l}`),
      );
    }
    writeFileSync(join(app.control, 'go'), String(Date.now()));
    const { result, driverSucceeded } = await awaitJobEnd(o, app, driver, o.jobTimeoutMs);
    const reduceTasks = ReduceTasks.parse(result['reduceTasks'] ?? []);
    const remoteFetches = (result.events as unknown[])
      .map((e) => TaskEnd.safeParse(e))
      .flatMap((p) => (p.success && p.data.stageId === 1 && (p.data.remoteBlocksFetched ?? 0) > 0 ? [p.data] : []))
      .map((t) => ({
        partition: t.partition,
        executorId: t.executorId,
        blocks: t.remoteBlocksFetched ?? 0,
        bytes: t.remoteBytesRead ?? 0,
      }));
    return {
      kind: o.kind,
      sparkVersion: result.sparkVersion,
      applicationId: app.appId,
      conf: app.conf,
      podContainers,
      containerStates,
      executors,
      reduceTasks,
      remoteFetches,
      sidecarLines,
      portLines,
      driverToShuffledMs,
      correct: result.correct,
      driverSucceeded,
      leftovers: app.leftovers,
      artifacts: app.artifacts,
    };
  } finally {
    // Every container's log, the sidecar's and its postStart hook's too, before the pods go.
    for (const [pod, dir] of app.podLogDirs) {
      try {
        for (const f of readdirSync(dir).filter((n) => n.endsWith('.log'))) copyFileSync(join(dir, f), join(app.artifacts, `${pod}.${f}`));
      } catch (error) {
        app.log(`logs of ${pod}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    await cleanupApp(o, app);
  }
}
