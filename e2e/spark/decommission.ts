/**
 * Issue 19's "also show: decommission": one real Spark application whose executors advertise their
 * Services, one of which holding map output is deleted gracefully and decommissions itself while
 * its peers run. Shared machinery: fetch-loss.ts (driver pod, executor facts, job end, clean-up).
 *
 * - Spark adds the preStop hook itself when `spark.decommission.enabled=true`
 *   (BasicExecutorFeatureStep: `lifecycle.preStop.exec.command: [spark.kubernetes.decommission.script]`,
 *   default /opt/decom.sh); e2e/spark/decom.sh stands in for the image's script (SIGPWR to its
 *   pod's executor JVM, then waits up to 60 s for it to exit).
 * - The process kubelet runs the hook as the kubelet's killContainer does (bounded by the grace
 *   period, then SIGTERM, SIGKILL at the end) and logs its start, exit code and duration to
 *   <pod logs>/spark-kubernetes-executor.prestop.log, beside decom.sh's own output.
 * - The job (e2e/spark/job/DecommissionJob.java): job 1 writes map output on every executor and
 *   caches its input; the driver then waits with no task running. The harness deletes one map-output
 *   holder's pod with a grace period, polls its Service and its pod every ~200 ms from the deletion
 *   until the pod is gone and the Service is marked, then lets job 2 read the shuffle again: its map
 *   stage is skipped when the lost executor's output was migrated, and its tasks fetch from the
 *   peers that hold it now.
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { rawRequest } from '../adapter/kube-access.ts';
import {
  awaitControlFile,
  awaitJobEnd,
  cleanupApp,
  copyLogs,
  type ExecutorFacts,
  executorFacts,
  type FetchFailure,
  fetchFailedInEventLog,
  fetchFailuresOf,
  launchDriver,
  prepareApp,
  readText,
  type SparkAppOptions,
  type Variant,
} from './fetch-loss.ts';

/** The mark our function sets on a gone executor's Service (shared/model/labels.ts). */
const GONE_AT = 'spark-exec-svc/executor-gone-at';
const POLL_MS = 200;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Spark 3.5's names (core/src/main/scala/org/apache/spark/internal/config/package.scala). */
export const DECOMMISSION_CONF: Readonly<Record<string, string>> = {
  'spark.decommission.enabled': 'true',
  'spark.storage.decommission.enabled': 'true',
  'spark.storage.decommission.shuffleBlocks.enabled': 'true',
  'spark.storage.decommission.rddBlocks.enabled': 'true',
};

export const DECOMMISSION_VARIANT: Variant = {
  key: 'dc',
  title: 'executors advertise their Service, decommission with block migration',
  short: 'decommission, Service',
  advertiseService: true,
  conf: DECOMMISSION_CONF,
};

export interface DecommissionOptions extends SparkAppOptions {
  readonly dataPartitions: number;
  readonly records: number;
  /** Bound from driver start to the map output written (JVM starts on a loaded 2-core machine are slow). */
  readonly startTimeoutMs: number;
  /** The victim's deletion's gracePeriodSeconds. */
  readonly gracePeriodSeconds: number;
  /** Bound from the pod gone to the Service marked. */
  readonly markTimeoutMs: number;
  /** Bound from `go` to the job's end. */
  readonly jobTimeoutMs: number;
}

export interface ServiceSample {
  readonly sinceDeleteMs: number;
  /** HTTP status of the Service's GET (200 present, 404 gone). */
  readonly status: number;
  readonly goneAt: string | undefined;
  /** The pod at the same moment: its phase, or Gone. */
  readonly pod: string;
}

export interface DecommissionReport {
  readonly sparkVersion: string;
  readonly applicationId: string;
  readonly conf: Record<string, string>;
  readonly executors: ExecutorFacts[];
  readonly mapExecutors: string[];
  readonly victim: ExecutorFacts;
  /** The preStop hook as Spark wrote it into the executor pod's spec. */
  readonly preStopCommand: string[] | undefined;
  readonly gracePeriodSeconds: number;
  readonly timings: {
    /** Times since the DELETE request (wall clock, same machine). */
    preStopStartedSinceDeleteMs: number | undefined;
    sigpwrSentSinceDeleteMs: number | undefined;
    /** The JVM (the container's process) exited: the process kubelet's note, else decom.sh's (`tail --pid` looks once a second). */
    jvmExitSinceDeleteMs: number | undefined;
    preStopExitedSinceDeleteMs: number | undefined;
    /** The last poll that still found the pod in the API (the Service present and unmarked then). */
    lastSeenWithPodSinceDeleteMs: number | undefined;
    podGoneSinceDeleteMs: number | undefined;
    serviceMarkedSinceDeleteMs: number | undefined;
    serviceMarkedSincePodGoneMs: number | undefined;
    goSinceDeleteMs: number;
    jobEndSinceGoMs: number | undefined;
  };
  readonly preStop: { exitCode: number | undefined; durationMs: number | undefined; log: string[] };
  /** The victim's log: what its JVM did on SIGPWR (decommission lines). */
  readonly decommissionLines: string[];
  /** The victim's log: blocks migrated, with the peer each went to. */
  readonly migrations: Array<{ line: string; peerHost: string | undefined }>;
  readonly peerServiceHosts: string[];
  /** Every poll of the victim's Service from the deletion until it was marked. */
  readonly serviceSamples: ServiceSample[];
  /** Samples taken while the pod still existed in the API. */
  readonly samplesWhilePodExisted: number;
  /** Of those, any where the Service was missing or marked. */
  readonly serviceMissingOrMarkedWhilePodExisted: ServiceSample[];
  readonly executorRemoved: Array<{ executorId: string; reason: string }>;
  /** Job 2 (after `go`). */
  readonly afterGo: {
    stagesSubmitted: Array<{ stageId: number; attempt: number; name: string }>;
    failedTasks: Array<{ stageId: number; partition: number; executorId: string; reason: string }>;
    tasksByExecutor: Record<string, number>;
  };
  readonly fetchFailures: FetchFailure[];
  readonly fetchFailedInEventLog: ReturnType<typeof fetchFailedInEventLog>;
  readonly correct: boolean | undefined;
  readonly driverSucceeded: boolean;
  readonly leftovers: string[];
  readonly artifacts: string;
}

const Mapped = z.object({ mapExecutors: z.array(z.string()), atMs: z.number() });
const PodSpec = z.looseObject({
  spec: z.looseObject({
    containers: z.array(
      z.looseObject({
        name: z.string(),
        lifecycle: z
          .looseObject({ preStop: z.looseObject({ exec: z.looseObject({ command: z.array(z.string()) }).optional() }).optional() })
          .optional(),
      }),
    ),
  }),
});
const ServiceMeta = z.looseObject({ metadata: z.looseObject({ annotations: z.record(z.string(), z.string()).optional() }) });
const PodStatus = z.looseObject({ status: z.looseObject({ phase: z.string().optional() }).optional() });

/** "… <ISO time> …" in a log line (the process kubelet's and decom.sh's lines carry one). */
function isoTimeOf(line: string | undefined): number | undefined {
  const m = line === undefined ? null : /(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)/.exec(line);
  return m?.[1] === undefined ? undefined : Date.parse(m[1]);
}

export async function runDecommission(o: DecommissionOptions): Promise<DecommissionReport> {
  const { admin, namespace: ns } = o;
  const app = prepareApp(o, { podPrefix: 'dc', appName: 'decommission' });
  try {
    const driver = await launchDriver(o, app, 'DecommissionJob', [String(o.executors), String(o.dataPartitions), String(o.records)]);
    const mapped = Mapped.parse(JSON.parse(await awaitControlFile(o, app, driver, 'mapped', o.startTimeoutMs)));
    app.log(`decommission ${o.line.version}: map output on executors ${mapped.mapExecutors.join(', ')}`);
    const executors = await executorFacts(o, app);
    const victim = executors
      .filter((e) => mapped.mapExecutors.includes(e.id))
      .sort((a, b) => Number(a.id) - Number(b.id))
      .at(0);
    if (victim === undefined || victim.service === undefined)
      throw new Error(`no map-output holder with a Service among ${JSON.stringify(executors.map((e) => [e.id, e.service?.name]))}`);
    const victimService = victim.service;
    const podPath = `/api/v1/namespaces/${ns}/pods/${victim.pod}`;
    const servicePath = `/api/v1/namespaces/${ns}/services/${victimService.name}`;
    const podAnswer = await rawRequest(admin, 'GET', podPath);
    const preStopCommand = PodSpec.parse(podAnswer.body).spec.containers.find((c) => c.name === 'spark-kubernetes-executor')?.lifecycle
      ?.preStop?.exec?.command;
    const victimLogDir = app.podLogDirs.get(victim.pod);
    if (victimLogDir === undefined) throw new Error(`no log dir for ${victim.pod}`);
    copyLogs(app.podLogDirs, app.artifacts);

    // The graceful deletion, and the Service and the pod polled from it on.
    const deleteAtMs = Date.now();
    const del = await rawRequest(admin, 'DELETE', `${podPath}?gracePeriodSeconds=${o.gracePeriodSeconds}`);
    if (del.status !== 200) throw new Error(`delete ${victim.pod}: HTTP ${del.status}`);
    app.log(`decommission ${o.line.version}: executor ${victim.id} (${victim.pod}) deleted with grace ${o.gracePeriodSeconds} s`);
    const samples: ServiceSample[] = [];
    let podGoneAtMs: number | undefined;
    let markedAtMs: number | undefined;
    const podDeadline = deleteAtMs + (o.gracePeriodSeconds + 30) * 1000;
    for (;;) {
      const at = Date.now();
      const [pod, svc] = await Promise.all([rawRequest(admin, 'GET', podPath), rawRequest(admin, 'GET', servicePath)]);
      const podState = pod.status === 404 ? 'Gone' : (PodStatus.parse(pod.body).status?.phase ?? 'unknown');
      const goneAt = svc.status === 200 ? ServiceMeta.parse(svc.body).metadata.annotations?.[GONE_AT] : undefined;
      samples.push({ sinceDeleteMs: at - deleteAtMs, status: svc.status, goneAt, pod: podState });
      if (podState === 'Gone' && podGoneAtMs === undefined) podGoneAtMs = at;
      if ((goneAt !== undefined || svc.status === 404) && markedAtMs === undefined) markedAtMs = at;
      if (podGoneAtMs !== undefined && markedAtMs !== undefined) break;
      if (podGoneAtMs === undefined && Date.now() > podDeadline)
        throw new Error(`${victim.pod} still in the API ${o.gracePeriodSeconds + 30} s after its graceful deletion`);
      if (podGoneAtMs !== undefined && Date.now() > podGoneAtMs + o.markTimeoutMs) break;
      await sleep(Math.max(0, at + POLL_MS - Date.now()));
    }
    app.log(
      `decommission ${o.line.version}: pod gone ${podGoneAtMs === undefined ? '-' : podGoneAtMs - deleteAtMs} ms, Service marked ${markedAtMs === undefined ? '-' : markedAtMs - deleteAtMs} ms after the deletion`,
    );

    // Job 2.
    const goAtMs = Date.now();
    writeFileSync(join(app.control, 'go'), String(goAtMs));
    const { result, driverSucceeded, eventLogText } = await awaitJobEnd(o, app, driver, o.jobTimeoutMs);
    copyLogs(app.podLogDirs, app.artifacts);

    // The hook's last lines (the process kubelet ends it when the JVM exits, as the container's PID
    // namespace would), bounded.
    const prestopFile = join(victimLogDir, 'spark-kubernetes-executor.prestop.log');
    const hookEndDeadline = Date.now() + 15_000;
    while (!/preStop exec exited with code/.test(readText(prestopFile)) && Date.now() < hookEndDeadline) await sleep(200);
    copyFileSync(prestopFile, join(app.artifacts, `${victim.pod}.prestop.log`));
    const prestopLog = readText(prestopFile)
      .split('\n')
      .filter((l) => l !== '');
    const find = (re: RegExp): string | undefined => prestopLog.find((l) => re.test(l));
    const since = (t: number | undefined): number | undefined => (t === undefined ? undefined : t - deleteAtMs);
    const exited = find(/preStop exec exited with code/);
    const executorLog = readText(join(victimLogDir, 'spark-kubernetes-executor.log')).split('\n');
    const peerServiceHosts = executors.filter((e) => e.id !== victim.id).flatMap((e) => (e.service === undefined ? [] : [e.service.host]));
    const migrations = executorLog
      // BlockManagerDecommissioner (3.5): "Migrated <ShuffleBlockInfo> (size: …) to <BlockManagerId> in <n> ms"
      .filter((l) => /Migrated .* to BlockManagerId\(/.test(l))
      .map((line) => ({ line, peerHost: /BlockManagerId\([^,]+, ([^,]+),/.exec(line)?.[1] }));
    const events = result.events as Array<Record<string, unknown>>;
    const goMs = typeof result['goAtMs'] === 'number' ? result['goAtMs'] : goAtMs;
    const afterGo = events.filter((e) => (e['atMs'] as number) >= goMs);
    const jobEnds = events.filter((e) => e['kind'] === 'jobEnd');
    const tasksByExecutor: Record<string, number> = {};
    for (const e of afterGo.filter((x) => x['kind'] === 'taskEnd')) {
      const id = String(e['executorId']);
      tasksByExecutor[id] = (tasksByExecutor[id] ?? 0) + 1;
    }
    const marked = markedAtMs;
    const whilePodExisted = samples.filter((s) => s.pod !== 'Gone');
    return {
      sparkVersion: result.sparkVersion,
      applicationId: app.appId,
      conf: app.conf,
      executors,
      mapExecutors: mapped.mapExecutors,
      victim,
      preStopCommand,
      gracePeriodSeconds: o.gracePeriodSeconds,
      timings: {
        preStopStartedSinceDeleteMs: since(isoTimeOf(find(/preStop exec .* started/))),
        sigpwrSentSinceDeleteMs: since(isoTimeOf(find(/sent SIGPWR/))),
        jvmExitSinceDeleteMs: since(
          isoTimeOf(find(/preStop exec killed: the container's process exited/) ?? find(/worker pid \d+ exited/)),
        ),
        preStopExitedSinceDeleteMs: since(isoTimeOf(exited)),
        lastSeenWithPodSinceDeleteMs: whilePodExisted.at(-1)?.sinceDeleteMs,
        podGoneSinceDeleteMs: since(podGoneAtMs),
        serviceMarkedSinceDeleteMs: since(marked),
        serviceMarkedSincePodGoneMs: marked === undefined || podGoneAtMs === undefined ? undefined : marked - podGoneAtMs,
        goSinceDeleteMs: goAtMs - deleteAtMs,
        jobEndSinceGoMs: jobEnds.length < 2 ? undefined : (jobEnds[1]?.['atMs'] as number) - goMs,
      },
      preStop: {
        exitCode: exited === undefined ? undefined : Number(/code (-?\d+)/.exec(exited)?.[1]),
        durationMs: exited === undefined ? undefined : Number(/after (\d+) ms/.exec(exited)?.[1]),
        log: prestopLog,
      },
      decommissionLines: executorLog.filter((l) => /decommission|SIGNAL PWR|SIGPWR|all blocks migrated/i.test(l)),
      migrations,
      peerServiceHosts,
      serviceSamples: samples,
      samplesWhilePodExisted: whilePodExisted.length,
      serviceMissingOrMarkedWhilePodExisted: whilePodExisted.filter((s) => s.status !== 200 || s.goneAt !== undefined),
      executorRemoved: events
        .filter((e) => e['kind'] === 'executorRemoved')
        .map((e) => ({ executorId: String(e['executorId']), reason: String(e['reason']) })),
      afterGo: {
        stagesSubmitted: afterGo
          .filter((e) => e['kind'] === 'stageSubmitted')
          .map((e) => ({ stageId: e['stageId'] as number, attempt: e['attempt'] as number, name: String(e['name']) })),
        failedTasks: afterGo
          .filter((e) => e['kind'] === 'taskEnd' && e['reason'] !== 'Success')
          .map((e) => ({
            stageId: e['stageId'] as number,
            partition: e['partition'] as number,
            executorId: String(e['executorId']),
            reason: String(e['reason']),
          })),
        tasksByExecutor,
      },
      fetchFailures: fetchFailuresOf(events, deleteAtMs),
      fetchFailedInEventLog: fetchFailedInEventLog(eventLogText),
      correct: result.correct,
      driverSucceeded,
      leftovers: app.leftovers,
      artifacts: app.artifacts,
    };
  } finally {
    await cleanupApp(o, app);
  }
}
