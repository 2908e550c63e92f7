/**
 * Issue 19, the CI scenario: a real Spark application (client mode, driver in a pod of the process
 * kubelet, executor pods created by Spark from the documented pod template and run as real executor
 * JVMs through spark/executor-entrypoint.sh) with the function and the real adapter giving each
 * executor its Service. One executor vanishes (its netns drops every packet, its pod is deleted)
 * while the next stage fetches from it: the fetch must fail with "connection refused" through the
 * executor's Service, and the job must complete.
 *
 * spark.shuffle.io.connectionCreationTimeout is 10s here, so that a regression (a connect that
 * hangs instead of being refused) shows within seconds and the job is not left hanging for Spark's
 * 120 s default. One Spark line by default (E2E_SPARK_LINE: a version of
 * e2e/spark/pyspark-sdists.txt, default the 3.5 line; `all` runs every line).
 * The JSON report and the run's logs go to $E2E_LOG_DIR/spark/.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import {
  BLOCK_MANAGER_PORT,
  DNS_WAIT_BOUND_S,
  type FetchLossReport,
  runFetchLoss,
  type SparkLine,
  sparkLines,
  type Variant,
} from '../spark/fetch-loss.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { type Plane, startPlane } from './plane.ts';
import { writeJsonReport } from './report-file.ts';

const EXECUTORS = 4;
const CREATION_TIMEOUT_S = 10;
const CI_VARIANT: Variant = {
  key: 'ci',
  title: `executors advertise their Service, connectionCreationTimeout=${CREATION_TIMEOUT_S}s`,
  advertiseService: true,
  conf: { 'spark.shuffle.io.connectionCreationTimeout': `${CREATION_TIMEOUT_S}s` },
};

const wanted = process.env['E2E_SPARK_LINE'] ?? '3.5';
const lines: SparkLine[] = sparkLines().filter((l) => wanted === 'all' || l.version === wanted || l.version.startsWith(`${wanted}.`));
const reports: Record<string, FetchLossReport | string> = {};
let cluster: ScenarioCluster;
let plane: Plane;

beforeAll(async () => {
  if (lines.length === 0) throw new Error(`no Spark line matches E2E_SPARK_LINE=${wanted} (e2e/spark/pyspark-sdists.txt)`);
  cluster = await scenarioCluster('spark', { kubelet: true, dns: true });
  plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 19_600 + (process.pid % 300) });
}, 15 * 60_000);

afterAll(async () => {
  try {
    if (cluster !== undefined) writeJsonReport(cluster.endpoints.logDir, 'spark-report.json', reports);
    await plane?.stop();
  } finally {
    await cluster?.stop();
  }
});

describe.each(lines.map((line) => ({ line, version: line.version })))('Spark $version', ({ line }) => {
  test(
    'an executor vanishes while the next stage fetches from it: connection refused through its Service, the job completes',
    async () => {
      const harness = cluster.harness;
      if (harness === undefined) throw new Error('the Spark scenario needs the harness cluster (process kubelet, kube-proxy, CoreDNS)');
      const report = await runFetchLoss({
        cluster: harness,
        admin: cluster.endpoints.admin,
        namespace: NS,
        line,
        variant: CI_VARIANT,
        executors: EXECUTORS,
        dataPartitions: 6,
        records: 20_000,
        logDir: cluster.endpoints.logDir,
        startTimeoutMs: 240_000,
        jobTimeoutMs: 120_000,
        // Fail fast: a FetchFailed must show in the driver's log well before a hung connect would end.
        afterLoss: async ({ lossAtMs, driverLog }) => {
          while (!/FetchFailed\(/.test(driverLog())) {
            if (Date.now() - lossAtMs > 60_000) throw new Error(`no FetchFailed in the driver's log 60 s after the loss`);
            await new Promise((r) => setTimeout(r, 200));
          }
        },
        log: (l) => process.stderr.write(`[spark.e2e] ${l}\n`),
      });
      reports[line.version] = report;
      const victimHost = report.victim.service?.host;

      // Spark created the executors, owned by the driver pod it was told about.
      expect(report.executors).toHaveLength(EXECUTORS);
      // Each executor registered under its Service's name, as the UI's REST API shows it.
      for (const e of report.executors) {
        expect(e.service, `executor ${e.id}'s Service`).toBeDefined();
        expect(e.restHostPort?.split(':')[0], `executor ${e.id} registered host (REST API hostPort ${e.restHostPort})`).toBe(
          e.service?.host,
        );
        expect(e.ownerUids).toHaveLength(1);
        // the block manager on the fixed port the Service forwards
        expect(e.restHostPort?.split(':')[1]).toBe(String(BLOCK_MANAGER_PORT));
        // the wrapper's DNS wait for its own Service: resolved, within its bound (+1 s for the last look-up's kill)
        const wait = e.wrapperLines.map((l) => /resolves after ([\d.]+)s/.exec(l)?.[1]).find((w) => w !== undefined);
        expect(wait, `executor ${e.id}: ${e.wrapperLines.join(' | ')}`).toBeDefined();
        expect(Number(wait)).toBeLessThanOrEqual(DNS_WAIT_BOUND_S + 1);
      }
      expect(new Set(report.executors.flatMap((e) => e.ownerUids)).size, 'one driver owns every executor').toBe(1);
      expect(report.victim.ranMapTask, 'the lost executor holds map output').toBe(true);

      // The fetch from the lost executor failed, addressed to its Service, refused: Spark's
      // RetryingBlockTransferor retries a refused connect (maxRetries 3, retryWait 5 s) while the
      // driver still counts the executor alive, then the task fails with FetchFailed.
      expect(report.firstFetchFailed, 'a FetchFailed after the loss').toBeDefined();
      expect(report.firstFetchFailed?.host, `the first FetchFailed's peer:\n${report.firstFetchFailed?.message}`).toBe(victimHost);
      // Refused, or — when the driver's 30 s poll has dropped the executor before the last retry —
      // "executor dead", which NettyBlockTransferService raises only after a failed connect
      // (SPARK-27637); which failure that was, the executors' logs say (below).
      expect(['connection refused', 'executor dead (driver check)'], report.firstFetchFailed?.message).toContain(
        report.firstFetchFailed?.cause,
      );
      // Later fetch failures may name the executor dead (NettyBlockTransferService asks the driver
      // after a failed connect, SPARK-27637, and by then the driver may know); none may be a timeout.
      const logged = report.fetchFailedInEventLog.filter((f) => f.host !== undefined);
      expect(logged.length, 'FetchFailed with a peer in the event log').toBeGreaterThan(0);
      expect(['connection refused', 'executor dead (driver check)']).toContain(logged[0]?.cause);
      expect(
        logged.filter((f) => f.host !== victimHost || f.cause === 'connect timeout' || f.cause === 'other'),
        "every FetchFailed names the lost executor's Service, none a timeout",
      ).toEqual([]);
      const refused = report.connectFailures.filter((l) => /Connection refused/.test(l));
      expect(
        refused.length,
        `a refused connect to ${victimHost} in the executors' logs:\n${report.connectFailures.join('\n')}`,
      ).toBeGreaterThan(0);
      expect(
        report.connectFailures.filter((l) => /timed out|ConnectTimeoutException/.test(l)),
        'no connect to the lost executor timed out',
      ).toEqual([]);
      // Refused connects cost 3 x retryWait; one hung connect alone would cost the creation timeout
      // and its retry wait on top.
      expect(report.timings.firstFetchFailedSinceLossMs).toBeLessThan(CREATION_TIMEOUT_S * 1000 * 2);

      // The stage was resubmitted and the job completed with the right answer.
      expect(report.timings.stageResubmittedSinceLossMs).toBeDefined();
      expect(report.correct, 'every record counted once').toBe(true);
      expect(report.driverSucceeded, 'driver pod Succeeded').toBe(true);
      expect(report.leftovers, 'nothing of the run left').toEqual([]);
    },
    10 * 60_000,
  );
});
