/**
 * Issue 19, "also show: the shuffle-service and port-taken fallbacks keeping the pod IP", under
 * real Spark (in CI's run; E2E_SPARK_FALLBACKS=0 skips it). Two applications of 2 executors each, through the
 * recipe (e2e/spark/fallbacks.ts says how each is set up):
 *  - an external shuffle service in the executor's pod, declared as the recipe's docs say: each
 *    executor keeps its pod IP and says why; it registered with its shuffle service; every reduce
 *    task was told to fetch from <pod IP>:7337; the job's answer is exact;
 *  - spark.blockManager.port already taken in the pod by a sidecar: each executor keeps its pod
 *    IP and says why; Spark moved its block manager to another port and registered it; the reduce
 *    tasks fetched from <pod IP>:<that port>; the job's answer is exact.
 * One Spark line (E2E_SPARK_LINE as in spark.e2e.ts, default 3.5). Report and logs:
 * $E2E_LOG_DIR/spark-fallbacks/.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { FALLBACK_VARIANTS, type FallbackKind, type FallbackReport, runFallback, SHUFFLE_SERVICE_PORT } from '../spark/fallbacks.ts';
import { BLOCK_MANAGER_PORT, type SparkLine, sparkLines } from '../spark/fetch-loss.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { type Plane, startPlane } from './plane.ts';
import { writeJsonReport } from './report-file.ts';

const ENABLED = process.env['E2E_SPARK_FALLBACKS'] !== '0';
const EXECUTORS = 2;

/** What the wrapper logs when it keeps the pod IP for each reason (spark/executor-entrypoint.sh). */
const WHY: Record<FallbackKind, RegExp> = {
  'shuffle-service':
    /^spark-exec-svc: .*external shuffle service in use \(SPARK_EXEC_SVC_SHUFFLE_SERVICE=true\).*executor keeps advertising its pod IP/,
  'port-taken': new RegExp(
    `^spark-exec-svc: .*port ${BLOCK_MANAGER_PORT} is already taken in this pod .*executor keeps advertising its pod IP`,
  ),
};

describe.runIf(ENABLED)('Spark fallbacks that keep the pod IP', () => {
  const wanted = process.env['E2E_SPARK_LINE'] ?? '3.5';
  let lines: SparkLine[] = [];
  const reports: Record<string, FallbackReport | string> = {};
  let cluster: ScenarioCluster | undefined;
  let plane: Plane | undefined;

  beforeAll(async () => {
    lines = sparkLines().filter((l) => wanted === 'all' || l.version === wanted || l.version.startsWith(`${wanted}.`));
    if (lines.length === 0) throw new Error(`no Spark line matches E2E_SPARK_LINE=${wanted} (e2e/spark/pyspark-sdists.txt)`);
    cluster = await scenarioCluster('spark-fallbacks', { kubelet: true, dns: true });
    plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 19_600 + (process.pid % 300) });
  }, 15 * 60_000);

  afterAll(async () => {
    try {
      if (cluster !== undefined) writeJsonReport(cluster.endpoints.logDir, 'spark-fallbacks-report.json', reports);
      await plane?.stop();
    } finally {
      await cluster?.stop();
    }
  });

  const run = async (kind: FallbackKind, line: SparkLine): Promise<FallbackReport> => {
    const harness = cluster?.harness;
    if (cluster === undefined || harness === undefined)
      throw new Error('the fallback scenario needs the harness cluster (process kubelet, kube-proxy, CoreDNS)');
    const report = await runFallback({
      cluster: harness,
      admin: cluster.endpoints.admin,
      namespace: NS,
      line,
      variant: FALLBACK_VARIANTS[kind],
      kind,
      executors: EXECUTORS,
      reducers: 4,
      records: 20_000,
      logDir: cluster.endpoints.logDir,
      startTimeoutMs: 240_000,
      jobTimeoutMs: 60_000,
      log: (l) => process.stderr.write(`[spark-fallbacks.e2e] ${l}\n`),
    });
    reports[`${kind} ${line.version}`] = report;
    return report;
  };

  /** "<id>=<host>:<port>" → its parts. */
  const address = (entry: string): { id: string; host: string; port: string } => {
    const m = /^([^=]+)=(.+):(\d+)$/.exec(entry);
    if (m === null) throw new Error(`not an address: ${entry}`);
    return { id: m[1] ?? '', host: m[2] ?? '', port: m[3] ?? '' };
  };

  /** What both fallbacks share: the sidecar started first, each executor kept its pod IP and said why, the answer is exact. */
  const expectPodIpsKept = (report: FallbackReport, kind: FallbackKind): void => {
    expect(report.executors).toHaveLength(EXECUTORS);
    // The sidecar still runs: what the executor was measured against held for the whole shuffle.
    for (const states of report.containerStates)
      expect(
        states.every((st) => st.endsWith('=running')),
        states.join(' '),
      ).toBe(true);
    for (const containers of report.podContainers) {
      expect(containers.at(-1), 'Spark appends the executor container after the template’s others').toBe('spark-kubernetes-executor');
      expect(containers.length).toBe(2);
    }
    for (const e of report.executors) {
      expect(
        e.wrapperLines.filter((l) => WHY[kind].test(l)),
        `executor ${e.id} says why it keeps its pod IP:\n${e.wrapperLines.join('\n')}`,
      ).toHaveLength(1);
      expect(
        e.wrapperLines.filter((l) => / advertising \S+\.svc:/.test(l)),
        `executor ${e.id} advertises no Service`,
      ).toEqual([]);
      expect(e.restHostPort?.split(':')[0], `executor ${e.id}: REST API hostPort ${e.restHostPort}, pod IP ${e.podIP}`).toBe(e.podIP);
    }
    // Every reduce task was told to fetch from the executors' pod IPs, and some fetched remotely.
    expect(report.reduceTasks.length).toBe(4);
    const podIps = new Set(report.executors.map((e) => e.podIP));
    for (const t of report.reduceTasks) {
      expect(t.fetchFrom.length, `reduce task ${t.partition}: map outputs`).toBe(EXECUTORS);
      for (const entry of t.fetchFrom) expect(podIps, `reduce task ${t.partition} fetches from ${entry}`).toContain(address(entry).host);
    }
    expect(report.remoteFetches.length, 'reduce tasks that fetched from another executor').toBeGreaterThan(0);
    expect(report.correct, 'every record counted once').toBe(true);
    expect(report.driverSucceeded, 'driver pod Succeeded').toBe(true);
    expect(report.leftovers, 'nothing of the run left').toEqual([]);
  };

  test(
    'an external shuffle service in the pod: the executors keep their pod IPs, register with the service, and the reduce tasks fetch from <pod IP>:7337',
    async () => {
      for (const line of lines) {
        const report = await run('shuffle-service', line);
        expectPodIpsKept(report, 'shuffle-service');
        for (const e of report.executors) expect(e.restHostPort).toBe(`${e.podIP}:${BLOCK_MANAGER_PORT}`);
        for (const t of report.reduceTasks)
          for (const entry of t.fetchFrom)
            expect(address(entry).port, `reduce task ${t.partition}: ${entry}`).toBe(String(SHUFFLE_SERVICE_PORT));
        // Each executor registered with the shuffle service in its own pod.
        for (const e of report.executors)
          expect(
            report.sidecarLines.filter((l) => l.startsWith(`${e.pod}: `) && /Registered executor/.test(l) && l.includes(`execId=${e.id}`)),
            `${e.pod}'s shuffle service registered executor ${e.id}:\n${report.sidecarLines.join('\n')}`,
          ).toHaveLength(1);
      }
    },
    10 * 60_000,
  );

  test(
    `spark.blockManager.port taken in the pod: the executors keep their pod IPs, Spark moves the block manager to another port, the reduce tasks fetch from there`,
    async () => {
      for (const line of lines) {
        const report = await run('port-taken', line);
        expectPodIpsKept(report, 'port-taken');
        const registered = new Map(report.executors.map((e) => [e.id, e.restHostPort ?? '']));
        for (const e of report.executors) {
          const port = Number(e.restHostPort?.split(':')[1]);
          expect(port, `executor ${e.id}: the block manager moved off the taken port`).toBeGreaterThan(BLOCK_MANAGER_PORT);
          expect(
            report.portLines.filter((l) => l.startsWith(`${e.pod}: `) && l.includes(`could not bind on port ${BLOCK_MANAGER_PORT}`)),
            `${e.pod}: Spark's own account of the move`,
          ).toHaveLength(1);
        }
        for (const t of report.reduceTasks)
          for (const entry of t.fetchFrom) {
            const a = address(entry);
            expect(`${a.host}:${a.port}`, `reduce task ${t.partition} fetches from executor ${a.id}'s registered address`).toBe(
              registered.get(a.id),
            );
          }
      }
    },
    10 * 60_000,
  );
});
