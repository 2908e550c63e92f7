/**
 * A real Prometheus server (Debian package `prometheus`) on loopback scrapes the running
 * function every second while an application's life is replayed against it — driver, three
 * executors, one executor lost, driver deleted, a sweep — and the counters are read back
 * through PromQL (/api/v1/query). The alert rules of knative/overlays/monitoring are loaded
 * too: on a healthy lifecycle every rule evaluates without error and none fires.
 *
 * Skipped, with the reason printed, where `prometheus` is not installed; in CI (CI=true) a
 * missing binary fails instead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dump } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newMetrics } from '../../shared/ops/metrics.ts';
import { type PostedReply, postCloudEvent } from '../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { freePort } from '../../testkit/process.ts';
import { prometheusTools, toolVersion } from './prometheus-tools.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { kustomizeObjects, requireKubectl, skipWithoutKubectl } from './kustomize.ts';

const NS = 'spark';
const JOB = 'spark-exec-svc';
const WAIT_MS = 20_000;
const tools = prometheusTools('metrics-prometheus.test');
const skip = tools.skip(['prometheus'], 'the Prometheus server test');
const SKIP_RULES = skipWithoutKubectl('metrics-prometheus.test', 'loading the alert rules into the server');

let h: Harness;
let prometheus: ChildProcess | undefined;
let promUrl = '';
let dir = '';
let promOutput = '';
let rulesLoaded = false;

interface VectorSample {
  readonly metric: Record<string, string>;
  readonly value: readonly [number, string];
}

async function query(promql: string): Promise<VectorSample[]> {
  const response = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as { status: string; error?: string; data?: { resultType: string; result: VectorSample[] } };
  if (body.status !== 'success') throw new Error(`PromQL ${promql}: ${body.error ?? response.status}`);
  return body.data!.result;
}

/** The single value of a query that aggregates to one series (undefined: no series). */
async function scalar(promql: string): Promise<number | undefined> {
  const result = await query(promql);
  if (result.length > 1) throw new Error(`${promql}: ${result.length} series, expected one`);
  return result[0] === undefined ? undefined : Number(result[0].value[1]);
}

/** Polls until `read` returns what `expected` says, for at most WAIT_MS; the last reading is in the failure. */
async function eventually<T>(what: string, read: () => Promise<T>, expected: T): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  let last: T | undefined;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      last = await read();
      lastError = undefined;
      if (JSON.stringify(last) === JSON.stringify(expected)) return;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(
    `${what}: still ${JSON.stringify(last)} (expected ${JSON.stringify(expected)}) after ${WAIT_MS} ms${lastError === undefined ? '' : `; last error: ${String(lastError)}`}\nprometheus output:\n${promOutput.slice(-2000)}`,
  );
}

const byLabel = async (promql: string, label: string): Promise<Record<string, number>> =>
  Object.fromEntries(
    (await query(promql)).map((s) => [s.metric[label] ?? '', Number(s.value[1])]).sort(([a], [b]) => String(a).localeCompare(String(b))),
  );

/** The alert rules of the monitoring overlay, as a Prometheus rules file (spec.groups of the PrometheusRule). */
async function writeRulesFile(file: string): Promise<boolean> {
  if (SKIP_RULES) return false;
  const rule = (
    await kustomizeObjects<{ kind?: string; spec?: { groups?: unknown } }>(requireKubectl(), 'knative/overlays/monitoring')
  ).find((d) => d?.kind === 'PrometheusRule');
  if (rule?.spec?.groups === undefined) throw new Error('knative/overlays/monitoring has no PrometheusRule');
  writeFileSync(file, dump({ groups: rule.spec.groups }));
  return true;
}

describe.skipIf(skip)('a real Prometheus scrapes the function during a replayed lifecycle', () => {
  beforeAll(async () => {
    const binary = tools.require('prometheus');
    console.info(`[metrics-prometheus.test] ${await toolVersion(binary)}`);
    h = await startHarness({}, { metrics: newMetrics({ processMetrics: true }) });
    dir = mkdtempSync(path.join(os.tmpdir(), 'sxs-prometheus-'));
    rulesLoaded = await writeRulesFile(path.join(dir, 'rules.yaml'));
    if (!rulesLoaded) console.warn('[metrics-prometheus.test] no kubectl: the alert rules are not loaded into the server');
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
      ...(rulesLoaded ? { rule_files: [path.join(dir, 'rules.yaml')] } : {}),
      scrape_configs: [{ job_name: JOB, metrics_path: '/metrics', static_configs: [{ targets: [`127.0.0.1:${h.fn.port}`] }] }],
    };
    writeFileSync(path.join(dir, 'prometheus.yml'), dump(config));
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      binary,
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout?.on('data', (d: Buffer) => (promOutput += d.toString()));
    prometheus.stderr?.on('data', (d: Buffer) => (promOutput += d.toString()));
    await eventually('the function as an active, healthy target', async () => {
      if (prometheus?.exitCode !== null) throw new Error(`prometheus exited with ${prometheus?.exitCode}`);
      const response = await fetch(`${promUrl}/api/v1/targets`);
      const body = (await response.json()) as { data: { activeTargets: Array<{ labels: Record<string, string>; health: string }> } };
      return body.data.activeTargets.map((t) => `${t.labels['job']} ${t.health}`);
    }, [`${JOB} up`]);
  }, 60_000);

  afterAll(async () => {
    const child = prometheus;
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await h?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('reads the counters of driver → 3 executors → one lost → driver deleted → sweep through PromQL', async () => {
    const replies: PostedReply[] = [];
    const appId = sparkAppId(11);
    const driver = h.createPod(driverPod({ namespace: NS, appId }));
    const driverRef = { name: driver.metadata.name, uid: driver.metadata.uid! };
    replies.push(await h.send('add', driver));
    const executors = ['1', '2', '3'].map((execId) =>
      h.createPod(executorPod({ namespace: NS, appId, execId, driver: driverRef, blockManagerPort: 7079 })),
    );
    // Created in one batch: the first add makes the three Services, the others find theirs made.
    for (const pod of executors) replies.push(await h.send('add', pod));
    h.emulator.deleteObject('pods', NS, executors[1]!.metadata.name);
    replies.push(await h.send('delete', executors[1]!));
    expect(replies.map((r) => r.type)).toEqual([
      'spark-exec-svc.ignored',
      'spark-exec-svc.service.created',
      'spark-exec-svc.service.verified',
      'spark-exec-svc.service.verified',
      'spark-exec-svc.service.marked-gone',
    ]);

    // The gauge of Services we manage, before the driver goes: the three Services.
    await eventually(
      'Services managed in spark',
      () => scalar(`spark_exec_svc_managed_services{job="${JOB}",service_namespace="${NS}"}`),
      3,
    );

    h.emulator.deleteObject('pods', NS, driver.metadata.name); // garbage collection takes its Services
    const driverDeleted = await h.send('delete', driver);
    const swept = await postCloudEvent(h.url, {
      type: 'dev.knative.sources.ping',
      data: { action: 'sweep' },
      source: `/apis/v1/namespaces/${NS}/pingsources/spark-exec-svc-sweep`,
    });
    expect(driverDeleted.status).toBe(200);
    expect(swept.type).toBe('spark-exec-svc.swept');
    const driverOutcome = driverDeleted.data!.action;

    const expectedEvents: Record<string, number> = { created: 1, verified: 2, ignored: 1, 'marked-gone': 1, swept: 1 };
    expectedEvents[driverOutcome] = (expectedEvents[driverOutcome] ?? 0) + 1;
    await eventually(
      'events by outcome',
      () => byLabel(`sum by (outcome) (spark_exec_svc_events_total{job="${JOB}"})`, 'outcome'),
      Object.fromEntries(Object.entries(expectedEvents).sort(([a], [b]) => a.localeCompare(b))),
    );
    await eventually('events by type', () => byLabel(`sum by (type) (spark_exec_svc_events_total{job="${JOB}"})`, 'type'), {
      'dev.knative.apiserver.resource.add': 4,
      'dev.knative.apiserver.resource.delete': 2,
      'dev.knative.sources.ping': 1,
    });
    await eventually('events by HTTP code', () => byLabel(`sum by (code) (spark_exec_svc_events_total{job="${JOB}"})`, 'code'), {
      '200': 7,
    });
    await eventually('event latencies observed', () => scalar(`sum(spark_exec_svc_event_duration_seconds_count{job="${JOB}"})`), 7);
    await eventually(
      'Services created by events',
      () => scalar(`sum(spark_exec_svc_service_outcomes_total{job="${JOB}",outcome="created",trigger="event"})`),
      3,
    );
    await eventually(
      'creates the API server answered 201',
      () => scalar(`sum(spark_exec_svc_kube_requests_total{job="${JOB}",verb="create",resource="services",code="201"})`),
      3,
    );
    const apiRequests = h.emulator.countRequests({});
    await eventually('every API request counted', () => scalar(`sum(spark_exec_svc_kube_requests_total{job="${JOB}"})`), apiRequests);
    await eventually(
      'API latencies observed',
      () => scalar(`sum(spark_exec_svc_kube_request_duration_seconds_count{job="${JOB}"})`),
      apiRequests,
    );
    await eventually('sweep runs', () => byLabel(`sum by (result) (spark_exec_svc_sweep_runs_total{job="${JOB}"})`, 'result'), {
      'round-completed': 1,
    });
    await eventually(
      'the sweep found nothing to repair',
      () => scalar(`spark_exec_svc_sweep_last_clean_run_timestamp_seconds{job="${JOB}"} > 0`).then((v) => v !== undefined),
      true,
    );
    await eventually('no sweep had to repair', () => scalar(`spark_exec_svc_sweep_last_repairing_run_timestamp_seconds{job="${JOB}"}`), 0);
    // The sweep counted again after garbage collection: none left.
    await eventually(
      'Services managed in spark after the driver went',
      () => scalar(`spark_exec_svc_managed_services{job="${JOB}",service_namespace="${NS}"}`),
      0,
    );
    await eventually(
      'the cap next to it',
      () => scalar(`spark_exec_svc_managed_services_limit{job="${JOB}",service_namespace="${NS}"}`),
      h.config.maxServicesPerNamespace,
    );
    await eventually('retries', () => scalar(`sum(spark_exec_svc_kube_retries_total{job="${JOB}"}) or vector(0)`), 0);
    await eventually('Node process metrics', () => scalar(`count(process_start_time_seconds{job="${JOB}"})`), 1);
  }, 90_000);

  it('the monitoring overlay’s alert rules evaluate on the live series without error, and none fires on a healthy day', async (ctx) => {
    if (!rulesLoaded) return ctx.skip();
    await eventually(
      'rule health',
      async () => {
        const response = await fetch(`${promUrl}/api/v1/rules`);
        const body = (await response.json()) as {
          data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> };
        };
        return body.data.groups.flatMap((g) => g.rules).map((r) => `${r.name}: ${r.health}${r.lastError ? ` ${r.lastError}` : ''}`);
      },
      [
        'SparkExecSvcEventsFailing',
        'SparkExecSvcIdentityConflicts',
        'SparkExecSvcRbacDenied',
        'SparkExecSvcSweepKeepsRepairing',
        'SparkExecSvcServicesNearLimit',
      ].map((n) => `${n}: ok`),
    );
    const alerts = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as { data: { alerts: unknown[] } };
    expect(alerts.data.alerts).toEqual([]);
  });
});
