/**
 * Issue 16, "What must run against it" 6: the sequential bench's scale-up and teardown of an
 * application of 100 executors on the REAL API server with the REAL ApiServerSource adapter as
 * the sender, beside the emulator's figures of the bench's own sequential section
 * (bench/sections/sequential.ts, run here in the same process and on the same machine).
 *
 * Real side: control plane only (no kubelet: pods' Running and Failed are written through the
 * status subresource as a kubelet would), the function as it ships, the adapter posting through
 * the recording proxy. Figures: time from the first pod create to the last Service existing (polled
 * every 100 ms), the function's Kubernetes API requests per executor life (its own
 * `kube_requests_total`, scraped before and after), and the longest event (proxy: request
 * arrival → answer). Asserted is only what the spec demands and what holds on any machine:
 * every Service made, the invariant after scale-up and after teardown, no Service left, at
 * least one API call per executor (its Service's create). Times are reported, never asserted.
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { type SequentialResult, runSequential } from '../../bench/sections/sequential.ts';
import { REPO_ROOT } from '../../bench/lib/procs.ts';
import { METRIC_PREFIX } from '../../shared/ops/metrics.ts';
import { NS } from '../../test/support/audited.ts';
import { rawGet } from '../adapter/kube-access.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { type Plane, startPlane } from './plane.ts';
import { reportAndStop, writeReportFile } from './report-file.ts';
import { createPod, deletePod, driverPodBody, executorPodBody, markPhase, markRunning, type PodRef } from './spark-pods.ts';

const EXECUTORS = 100;
const APP = 'app-perf';
/** The bench's latencies: 0 (the function alone) and its target latency (where it records the longest event). */
const EMULATOR_LATENCIES_MS = [0, 20] as const;

const report: Record<string, unknown> = {};
let cluster: ScenarioCluster;
let plane: Plane;
let functionPort: number;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function serviceCount(): Promise<number> {
  const list = (await rawGet(cluster.endpoints.admin, `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${APP}`)) as {
    items: unknown[];
  };
  return list.items.length;
}

async function waitForServices(count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await serviceCount();
    if (n === count) return performance.now();
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${n} Services of ${APP}, waiting for ${count}`);
    await sleep(100);
  }
}

/** The function's Kubernetes API requests so far, per kube_requests_total series (verb, resource, code). */
async function functionKubeRequests(): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${functionPort}/metrics`)).text();
  const name = `${METRIC_PREFIX}kube_requests_total`;
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const at = line.lastIndexOf(' ');
    const value = Number(line.slice(at + 1));
    if (!Number.isFinite(value)) throw new Error(`unreadable metrics line: ${line}`);
    series.set(line.slice(name.length, at), value);
  }
  return series;
}

const total = (m: ReadonlyMap<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
function delta(after: ReadonlyMap<string, number>, before: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) !== 0) out.set(k, v - (before.get(k) ?? 0));
  return out;
}

/** Longest event the adapter sent from request `from` on: arrival at the proxy → answer. */
function longestEvent(from: number): { ms: number; what: string } | undefined {
  let longest: { ms: number; what: string } | undefined;
  for (const r of plane.proxy.requests.slice(from)) {
    if (r.answeredMonoMs === undefined) continue;
    const ms = r.answeredMonoMs - r.receivedMonoMs;
    if (longest === undefined || ms > longest.ms) longest = { ms, what: `${r.headers['ce-type']} ${r.headers['ce-subject']}` };
  }
  return longest;
}

function answersByStatus(from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of plane.proxy.requests.slice(from)) out[String(r.status)] = (out[String(r.status)] ?? 0) + 1;
  return out;
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, new Set()), `invariant after: ${step}`).toEqual([]);
}

beforeAll(async () => {
  cluster = await scenarioCluster('performance', { kubelet: false });
  functionPort = 19_000 + (process.pid % 1000);
  plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort });
  report['functionEnv'] = plane.fn().env;
  report['functionOverrides'] = plane.fn().overrides;
}, 30 * 60_000);

afterAll(async () => {
  await reportAndStop(cluster, plane, 'performance-report.json', report);
});

interface RealFigures {
  readonly podsCreatedMs: number;
  readonly lastServiceMs: number;
  readonly teardownMs: number;
  readonly callsScaleUp: number;
  readonly callsTeardown: number;
  readonly events: number;
  readonly longest: { ms: number; what: string } | undefined;
  readonly callsBySeries: { scaleUp: Record<string, number>; teardown: Record<string, number> };
  /** Services the driver's Succeeded event (with the adapter's retries) left, and the sweeps that removed them. */
  readonly leftByDriverEvent: number;
  readonly sweepsNeeded: number;
  /** The function's answers to the adapter, by HTTP status. */
  readonly answers: Record<string, number>;
}
let real: RealFigures | undefined;
let emulator: SequentialResult | undefined;

test(
  `real API server, real adapter: ${EXECUTORS} executors scale up and tear down`,
  async () => {
    const admin = cluster.endpoints.admin;
    const tenant = plane.tenant;
    let ip = 10;
    const nextIp = (): string => `10.244.${Math.floor(ip / 250)}.${(ip++ % 250) + 2}`;
    const fromRequest = plane.proxy.requests.length;
    const callsBefore = await functionKubeRequests();

    const t0 = performance.now();
    const driver = await createPod(
      tenant,
      NS,
      driverPodBody(NS, APP, `${APP}-driver`, `/tmp/spark-exec-svc-e2e-${process.pid}-${APP}.finished`),
    );
    await markRunning(admin, NS, driver.name, nextIp());
    const executors: PodRef[] = [];
    for (let i = 1; i <= EXECUTORS; i++) {
      const pod = await createPod(tenant, NS, executorPodBody(NS, APP, driver, i, `${APP}-exec-${i}`));
      await markRunning(admin, NS, pod.name, nextIp());
      executors.push(pod);
    }
    const podsCreated = performance.now();
    const lastService = await waitForServices(EXECUTORS, 120_000);
    await expectInvariant(`scale-up of ${EXECUTORS} executors`);
    // The adapter's last events may still be arriving after the Services exist: wait for quiet.
    await quiet();
    const callsAfterScaleUp = await functionKubeRequests();

    // Teardown as the bench's: executors stop (Failed) and are removed, the driver finishes and is deleted.
    const t1 = performance.now();
    for (const pod of executors) {
      await markPhase(admin, NS, pod.name, 'Failed');
      await deletePod(tenant, NS, pod.name, 0);
    }
    await markPhase(admin, NS, driver.name, 'Succeeded');
    // The driver's Succeeded event deletes its Services within EVENT_DEADLINE_MS; what it could not
    // delete in time is left to the sweep (a PingSource tick, every 5 min in knative/base): send
    // ticks until none is left, and report how many the event left.
    const afterDriverEvent = await servicesWhenSettled();
    let sweeps = 0;
    while ((await serviceCount()) > 0 && sweeps < 10) {
      await plane.sweep();
      sweeps++;
    }
    const gone = await waitForServices(0, 60_000);
    await deletePod(tenant, NS, driver.name, 0);
    await quiet();
    await expectInvariant('teardown');
    const callsAfter = await functionKubeRequests();

    const figures: RealFigures = {
      podsCreatedMs: podsCreated - t0,
      lastServiceMs: lastService - t0,
      teardownMs: gone - t1,
      callsScaleUp: total(delta(callsAfterScaleUp, callsBefore)),
      callsTeardown: total(delta(callsAfter, callsAfterScaleUp)),
      callsBySeries: {
        scaleUp: Object.fromEntries(delta(callsAfterScaleUp, callsBefore)),
        teardown: Object.fromEntries(delta(callsAfter, callsAfterScaleUp)),
      },
      events: plane.proxy.requests.length - fromRequest,
      longest: longestEvent(fromRequest),
      answers: answersByStatus(fromRequest),
      leftByDriverEvent: afterDriverEvent.left,
      sweepsNeeded: sweeps,
    };
    real = figures;
    report['real'] = figures;
    // Each executor's Service was created: at least one API call per executor life.
    expect(figures.callsScaleUp + figures.callsTeardown).toBeGreaterThanOrEqual(EXECUTORS);
    expect(await serviceCount()).toBe(0);
  },
  10 * 60_000,
);

/** Polls the Services until none is left or the adapter has been quiet for 3 s. */
async function servicesWhenSettled(): Promise<{ left: number }> {
  let lastCount = plane.proxy.requests.length;
  let quietSince = performance.now();
  for (;;) {
    const left = await serviceCount();
    if (left === 0) return { left };
    if (plane.proxy.requests.length !== lastCount || plane.proxy.requests.some((r) => r.answeredMonoMs === undefined)) {
      lastCount = plane.proxy.requests.length;
      quietSince = performance.now();
    } else if (performance.now() - quietSince > 3_000) return { left };
    await sleep(100);
  }
}

/** Until the proxy has seen no request for 2 s (the adapter sends one event at a time). */
async function quiet(): Promise<void> {
  for (;;) {
    const n = plane.proxy.requests.length;
    await sleep(2_000);
    if (plane.proxy.requests.length === n && plane.proxy.requests.every((r) => r.answeredMonoMs !== undefined)) return;
  }
}

test(
  `emulator, the bench's sender: the sequential section at ${EXECUTORS} executors, same run`,
  async () => {
    const resultsDir = join(cluster.endpoints.logDir, 'bench');
    emulator = await runSequential({
      entry: join(REPO_ROOT, 'functions', 'executor-service', 'main.ts'),
      resultsDir,
      profileDir: join(resultsDir, 'profiles'),
      latenciesMs: EMULATOR_LATENCIES_MS,
      executors: EXECUTORS,
      reps: 1,
      pacedRates: [],
      pacedBatches: 0,
      noopEvents: 20,
      largeApp: 0,
      profile: false,
      log: (line) => console.log(line),
    });
    report['emulator'] = {
      latencies: emulator.latencies.map((l) => ({ latencyMs: l.latencyMs, median: l.median })),
      perExecutor: emulator.perExecutor,
      longestEvent: emulator.longestEvent,
      failures: emulator.failures,
    };
    // Timed targets of the bench are reported, not asserted (a loaded 2-core box); the run itself must have happened.
    expect(emulator.latencies.map((l) => l.latencyMs)).toEqual([...EMULATOR_LATENCIES_MS]);
  },
  10 * 60_000,
);

test('side-by-side table', () => {
  expect(real, 'the real run').toBeDefined();
  expect(emulator, 'the emulator run').toBeDefined();
  const r = real!;
  const e = emulator!;
  const fmt = (ms: number | undefined): string => (ms === undefined ? '-' : `${Math.round(ms)} ms`);
  const rows: string[][] = [
    ['', 'real API server + real adapter', ...e.latencies.map((l) => `emulator ${l.latencyMs} ms/call + bench sender`)],
    [
      'time until the last Service exists',
      `${fmt(r.lastServiceMs)} (pods created by ${fmt(r.podsCreatedMs)})`,
      ...e.latencies.map((l) => fmt(l.median.lastServiceMs)),
    ],
    [
      'teardown until no Service left',
      `${fmt(r.teardownMs)}${r.sweepsNeeded === 0 ? '' : ` (the driver's Succeeded event left ${r.leftByDriverEvent}: ${r.sweepsNeeded} sweep(s))`}`,
      ...e.latencies.map((l) => fmt(l.median.servicesGoneMs)),
    ],
    [
      'API calls per executor life',
      `${((r.callsScaleUp + r.callsTeardown) / EXECUTORS).toFixed(2)} (scale-up ${(r.callsScaleUp / EXECUTORS).toFixed(2)}, teardown ${(r.callsTeardown / EXECUTORS).toFixed(2)})`,
      ...e.perExecutor.map((p) => `${p.total} (scale-up ${p.scaleUp}, termination ${p.termination}, driver ${p.driver})`),
    ],
    [
      'longest event',
      r.longest === undefined ? '-' : `${r.longest.ms.toFixed(1)} ms (${r.longest.what})`,
      ...e.latencies.map((l) =>
        e.longestEvent !== undefined && l.latencyMs === 20 ? `${e.longestEvent.ms} ms (${e.longestEvent.what})` : '-',
      ),
    ],
    ['events sent', `${r.events} (answers ${JSON.stringify(r.answers)})`, ...e.latencies.map((l) => String(l.apps[0]?.events ?? '-'))],
  ];
  const table = [
    `performance, ${EXECUTORS} executors, ${new Date().toISOString()}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    ...(e.failures.length === 0 ? [] : ['', 'bench targets not met (reported, not asserted):', ...e.failures.map((f) => `- ${f}`)]),
  ].join('\n');
  console.log(`${table}\n\nreal API server, the function's requests by series: ${JSON.stringify(r.callsBySeries, null, 1)}`);
  writeReportFile(cluster.endpoints.logDir, 'performance.md', `${table}\n`);
});
