/**
 * Issue 19, "also show: decommission" (opt-in: E2E_SPARK_DECOMMISSION=1; not in CI's default run).
 * A real Spark application (client mode, driver in a pod of the process kubelet) with 4 executors
 * advertising their Services and `spark.decommission.enabled` with shuffle and RDD block migration.
 * After the map stage, one executor holding map output is deleted gracefully while its peers run:
 * Spark's own preStop hook (/opt/decom.sh, our stand-in) sends its JVM SIGPWR, it migrates its
 * blocks to its peers — addressed by their Services' names — and exits; its Service stays present
 * and unmarked for the whole graceful deletion (polled every 200 ms) and is marked only once the pod
 * is gone; the next job reads the migrated map output with no FetchFailed and an exact answer.
 *
 * Grace period 60 s: a decommissioning executor exits once a migration round finds nothing left,
 * and the rounds are `spark.storage.decommission.replicationReattemptInterval` (30 s, Spark's
 * default, kept) apart — the first round starts the migrations, the second, 30 s later, finds them
 * done (BlockManagerDecommissioner, CoarseGrainedExecutorBackend.decommissionSelf in 3.5). With
 * Kubernetes' default 30 s the kubelet's SIGTERM would race that second round.
 *
 * One Spark line (E2E_SPARK_LINE as in spark.e2e.ts, default 3.5). Report and logs:
 * $E2E_LOG_DIR/spark-decommission/.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { DECOMMISSION_VARIANT, type DecommissionReport, runDecommission } from '../spark/decommission.ts';
import { BLOCK_MANAGER_PORT, type SparkLine, sparkLines } from '../spark/fetch-loss.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { type Plane, startPlane } from './plane.ts';
import { writeJsonReport } from './report-file.ts';

const ENABLED = process.env['E2E_SPARK_DECOMMISSION'] === '1';
const EXECUTORS = 4;
const GRACE_S = 60;

describe.runIf(ENABLED)('Spark decommission', () => {
  const wanted = process.env['E2E_SPARK_LINE'] ?? '3.5';
  let lines: SparkLine[] = [];
  const reports: Record<string, DecommissionReport | string> = {};
  let cluster: ScenarioCluster | undefined;
  let plane: Plane | undefined;

  beforeAll(async () => {
    lines = sparkLines().filter((l) => wanted === 'all' || l.version === wanted || l.version.startsWith(`${wanted}.`));
    if (lines.length === 0) throw new Error(`no Spark line matches E2E_SPARK_LINE=${wanted} (e2e/spark/pyspark-sdists.txt)`);
    cluster = await scenarioCluster('spark-decommission', { kubelet: true, dns: true });
    plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 19_600 + (process.pid % 300) });
  }, 15 * 60_000);

  afterAll(async () => {
    try {
      if (cluster !== undefined) writeJsonReport(cluster.endpoints.logDir, 'spark-decommission-report.json', reports);
      await plane?.stop();
    } finally {
      await cluster?.stop();
    }
  });

  test(
    'an executor holding map output is deleted gracefully: preStop → SIGPWR → blocks migrate to its peers through their Services; its Service stays unmarked until the pod is gone; the next stage reads the migrated output, no FetchFailed',
    async () => {
      const harness = cluster?.harness;
      if (cluster === undefined || harness === undefined)
        throw new Error('the decommission scenario needs the harness cluster (process kubelet, kube-proxy, CoreDNS)');
      for (const line of lines) {
        const report = await runDecommission({
          cluster: harness,
          admin: cluster.endpoints.admin,
          namespace: NS,
          line,
          variant: DECOMMISSION_VARIANT,
          executors: EXECUTORS,
          dataPartitions: 6,
          records: 20_000,
          logDir: cluster.endpoints.logDir,
          startTimeoutMs: 240_000,
          gracePeriodSeconds: GRACE_S,
          markTimeoutMs: 60_000,
          jobTimeoutMs: 120_000,
          log: (l) => process.stderr.write(`[spark-decommission.e2e] ${l}\n`),
        });
        reports[line.version] = report;
        const v = report.victim;

        // Executors advertise their Services (REST API hostPort), block manager on the fixed port.
        expect(report.executors).toHaveLength(EXECUTORS);
        for (const e of report.executors) {
          expect(e.restHostPort, `executor ${e.id}`).toBe(`${e.service?.host}:${BLOCK_MANAGER_PORT}`);
        }
        expect(report.mapExecutors, 'the victim holds map output').toContain(v.id);

        // Spark's own preStop hook, run by the process kubelet: decom.sh found the pod's JVM and sent SIGPWR.
        expect(report.preStopCommand, "the executor pod's preStop as Spark wrote it").toEqual(['/opt/decom.sh']);
        const hookLog = report.preStop.log.join('\n');
        expect(hookLog).toMatch(/preStop exec .* started/);
        expect(hookLog).toMatch(/sent SIGPWR to \d+/);
        expect(report.timings.sigpwrSentSinceDeleteMs, hookLog).toBeLessThan(10_000);
        // The JVM acted on SIGPWR and left by itself once its blocks were migrated (not by SIGTERM).
        const decomLines = report.decommissionLines.join('\n');
        // ("Registering SIGPWR handler to trigger decommissioning." is logged at start; decommissionSelf logs this)
        expect(decomLines, 'the executor decommissioned itself').toMatch(/Decommission executor \d+/);
        expect(decomLines, 'exit after migration').toMatch(/all blocks migrated, stopping/);
        // decom.sh waits for the JVM; when the JVM exits first its hook ends with it (killed with the
        // container's PID namespace in a runtime; by the process kubelet here), or it saw the exit.
        expect(hookLog, 'the JVM exited while its hook waited').toMatch(
          /preStop exec killed: the container's process exited|worker pid \d+ exited/,
        );
        expect(report.timings.jvmExitSinceDeleteMs, 'the JVM exited within the grace period').toBeLessThan(GRACE_S * 1000);

        // Blocks migrated to peers, addressed by their Services' names.
        expect(report.migrations.length, `migration lines in executor ${v.id}'s log`).toBeGreaterThan(0);
        expect(
          report.migrations.filter((m) => m.peerHost === undefined || !report.peerServiceHosts.includes(m.peerHost)),
          'every migration went to a peer Service',
        ).toEqual([]);
        expect(report.migrations.some((m) => /shuffle/i.test(m.line))).toBe(true);

        // The victim's Service: present and unmarked for the whole graceful deletion, marked once the pod was gone.
        expect(report.samplesWhilePodExisted, 'polls while the pod terminated').toBeGreaterThan(10);
        expect(report.serviceMissingOrMarkedWhilePodExisted).toEqual([]);
        expect(report.timings.podGoneSinceDeleteMs).toBeDefined();
        expect(report.timings.serviceMarkedSincePodGoneMs, 'marked after the pod was gone').toBeGreaterThanOrEqual(0);

        // Job 2 read the migrated output: no map stage rerun, no failed task, no FetchFailed, exact answer.
        expect(report.afterGo.stagesSubmitted, 'only the result stage ran after go').toHaveLength(1);
        expect(report.afterGo.stagesSubmitted[0]?.stageId).not.toBe(0);
        expect(report.afterGo.failedTasks).toEqual([]);
        expect(report.fetchFailures).toEqual([]);
        expect(report.fetchFailedInEventLog).toEqual([]);
        expect(report.executorRemoved.map((r) => r.executorId)).toContain(v.id);
        expect(report.correct, 'both jobs counted every record once').toBe(true);
        expect(report.driverSucceeded, 'driver pod Succeeded').toBe(true);
        expect(report.leftovers, 'nothing of the run left').toEqual([]);
      }
    },
    10 * 60_000,
  );
});
