/**
 * Issue 16, "What must run against it" 1: the lifecycle of opted-in executors on the real cluster,
 * with the real adapter (Resource mode, then Reference mode) and the function as it ships. Pods are
 * created by the tenant's token and run by the process kubelet; connects go from another pod's
 * network namespace through kube-proxy's rules to the Service's ClusterIP. The invariant is read
 * from the real API server after every step.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { rawGet } from '../adapter/kube-access.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { runningPodIP, serviceEndpoints, waitUntil } from './observe.ts';
import { type Plane, startPlane } from './plane.ts';
import { writeJsonReport } from './report-file.ts';
import {
  BLOCK_MANAGER_PORT,
  createPod,
  deletePod,
  driverPodBody,
  executorPodBody,
  markPhase,
  markRunning,
  type PodRef,
} from './spark-pods.ts';

const COOLDOWN_SECONDS = 5;
const PROBE = fileURLToPath(new URL('./connect-probe.ts', import.meta.url));
const report: Record<string, unknown> = {};
let cluster: ScenarioCluster;
let podIpSeq = 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const finishFile = (appId: string): string => `/tmp/spark-exec-svc-e2e-${process.pid}-${appId}.finished`;

interface Svc {
  metadata: { name: string; uid: string; annotations?: Record<string, string>; ownerReferences?: Array<{ name: string; uid: string }> };
  spec: { clusterIP: string; ports: Array<{ port: number }> };
}

async function serviceOf(appId: string, execId: number): Promise<Svc | undefined> {
  const list = (await rawGet(
    cluster.endpoints.admin,
    `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${appId},spark-exec-id%3D${execId}`,
  )) as { items: Svc[] };
  return list.items[0];
}

async function readyEndpoints(serviceName: string): Promise<string[]> {
  return (await serviceEndpoints(cluster.endpoints.admin, NS, serviceName)).filter((e) => e.ready).map((e) => e.address);
}

function podIP(name: string): Promise<string> {
  return runningPodIP(cluster.endpoints.admin, NS, name);
}

async function running(plane: Plane, body: Record<string, unknown>): Promise<PodRef> {
  const pod = await createPod(plane.tenant, NS, body);
  const name = (body['metadata'] as { name: string }).name;
  if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, name, `10.244.1.${podIpSeq++}`);
  else await podIP(name);
  return pod;
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, new Set()), `invariant after: ${step}`).toEqual([]);
}

/** Runs the connect probe in the client pod's network namespace; resolves with its outcome lines. */
async function probeFromPod(
  clientPod: string,
  ip: string,
  port: number,
  until: string,
  deadlineMs: number,
): Promise<Array<{ atMs: number; outcome: string }>> {
  const harness = cluster.harness;
  if (harness === undefined) throw new Error('connecting from a pod needs the harness cluster (process kubelet, kube-proxy)');
  const result = await harness.execInPod(
    NS,
    clientPod,
    [process.execPath, PROBE, ip, String(port), '--until', until, '--deadline-ms', String(deadlineMs)],
    {
      timeoutMs: deadlineMs + 10_000,
    },
  );
  return result.stdout
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { atMs: number; outcome: string });
}

beforeAll(async () => {
  cluster = await scenarioCluster('lifecycle', { kubelet: true });
}, 30 * 60_000);

afterAll(async () => {
  try {
    if (cluster !== undefined) writeJsonReport(cluster.endpoints.logDir, 'lifecycle-report.json', report);
  } finally {
    await cluster?.stop();
  }
});

describe.each([
  { mode: 'resource' as const, port: 0 },
  { mode: 'reference' as const, port: 1 },
])('lifecycle with the adapter in $mode mode', ({ mode, port }) => {
  let plane: Plane;
  const app = `life-${mode}`;
  const app2 = `gc-${mode}`;
  const figures: Record<string, unknown> = {};
  report[mode] = figures;
  let driver: PodRef;
  let execs: PodRef[] = [];
  let client: string;

  beforeAll(async () => {
    plane = await startPlane(cluster.endpoints, {
      mode,
      functionPort: 19_000 + (process.pid % 500) * 2 + port,
      functionOverrides: { COOLDOWN_SECONDS: String(COOLDOWN_SECONDS), LOG_LEVEL: 'debug' },
    });
    figures['adapterEnv'] = plane.adapter().env;
    figures['functionOverrides'] = plane.fn().overrides;
  }, 15 * 60_000);

  afterAll(async () => {
    figures['events'] = plane?.proxy.requests.map((r) => `${r.headers['ce-type']} ${r.headers['ce-subject'] ?? ''} → ${String(r.status)}`);
    figures['sampleExecutorEventBody'] = plane?.proxy.requests
      .find((r) => (r.headers['ce-subject'] ?? '').includes('-exec-'))
      ?.body.slice(0, 300);
    figures['collectedLogLines'] = plane?.fn().process.lines.filter((l) => l.includes('"collected"')).length;
    await plane?.stop();
    for (const a of [app, app2]) rmSync(finishFile(a), { force: true });
  });

  test('opted-in executors get their Service, owned by the driver, whose EndpointSlice lists the executor', async () => {
    client = `client-${mode}`;
    await running(plane, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: client, namespace: NS },
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'c', image: 'busybox', command: ['sleep', '3600'] }],
      },
    });
    driver = await running(plane, driverPodBody(NS, app, `${app}-driver`, finishFile(app)));
    execs = [];
    for (let i = 1; i <= 2; i++) execs.push(await running(plane, executorPodBody(NS, app, driver, i, `${app}-exec-${i}`)));
    for (let i = 1; i <= 2; i++) {
      const svc = await waitUntil(`Service of ${app} exec ${i}`, 30_000, () => serviceOf(app, i));
      expect(svc.metadata.ownerReferences?.map((o) => o.uid)).toEqual([driver.uid]);
      if (cluster.kubelet) {
        const ip = await podIP(`${app}-exec-${i}`);
        await waitUntil(`EndpointSlice of ${svc.metadata.name} listing ${ip}`, 30_000, async () =>
          (await readyEndpoints(svc.metadata.name)).includes(ip) ? true : undefined,
        );
      }
    }
    await expectInvariant('executors running');
  });

  test('executor deleted: Service stays with its gone mark, endpoints go, a connect to ClusterIP:port is refused', async () => {
    const svc = (await serviceOf(app, 1))!;
    if (!cluster.kubelet) throw new Error('the refusal needs the process kubelet and kube-proxy (run with the harness cluster)');
    const connected = await probeFromPod(client, svc.spec.clusterIP, BLOCK_MANAGER_PORT, 'connected', 20_000);
    expect(connected[connected.length - 1]?.outcome, 'connect to the live executor through its Service').toBe('connected');
    const probe = probeFromPod(client, svc.spec.clusterIP, BLOCK_MANAGER_PORT, 'refused', 60_000);
    await sleep(500);
    const deletedAt = Date.now();
    await deletePod(plane.tenant, NS, execs[0]!.name);
    const outcomes = await probe;
    const refused = outcomes.find((o) => o.outcome === 'refused');
    figures['deletionToFirstRefusedMs'] = refused === undefined ? null : refused.atMs - deletedAt;
    figures['probeOutcomes'] = outcomes;
    expect(refused, 'a refused connect').toBeDefined();
    const marked = await waitUntil('the gone mark', 30_000, async () => {
      const s = await serviceOf(app, 1);
      return s?.metadata.annotations?.['spark-exec-svc/executor-gone-at'] !== undefined ? s : undefined;
    });
    expect(marked.metadata.uid).toBe(svc.metadata.uid);
    expect(await readyEndpoints(svc.metadata.name)).toEqual([]);
    await expectInvariant('executor deleted');
  });

  test('cool-down over: a sweep deletes the Service', async () => {
    await sleep((COOLDOWN_SECONDS + 1) * 1000);
    await plane.sweep();
    await waitUntil(`Service of ${app} exec 1 deleted`, 20_000, async () => ((await serviceOf(app, 1)) === undefined ? true : undefined));
    expect(await serviceOf(app, 2), 'the live executor keeps its Service').toBeDefined();
    await expectInvariant('cool-down sweep');
  });

  test('driver finished: its Services are deleted', async () => {
    if (cluster.kubelet) writeFileSync(finishFile(app), '');
    else await markPhase(cluster.endpoints.admin, NS, driver.name, 'Succeeded');
    await waitUntil(`Service of ${app} exec 2 deleted after the driver finished`, 60_000, async () =>
      (await serviceOf(app, 2)) === undefined ? true : undefined,
    );
    expect(existsSync(finishFile(app)) || !cluster.kubelet).toBe(true);
    await expectInvariant('driver finished');
  });

  test('driver deleted: the real garbage collector removes its Services, and the function reports them collected', async () => {
    const d2 = await running(plane, driverPodBody(NS, app2, `${app2}-driver`, finishFile(app2)));
    await running(plane, executorPodBody(NS, app2, d2, 1, `${app2}-exec-1`));
    const svc = await waitUntil(`Service of ${app2}`, 30_000, () => serviceOf(app2, 1));
    const before = plane.fn().process.lines.length;
    const deletedAt = Date.now();
    // Grace 0: the driver object is gone at once, so only the garbage collector can remove the
    // Service (the function never deletes a Service whose driver is already gone).
    await deletePod(plane.tenant, NS, d2.name, 0);
    await waitUntil(`GC of ${svc.metadata.name}`, 60_000, async () => ((await serviceOf(app2, 1)) === undefined ? true : undefined));
    figures['driverDeletionToServiceGoneMs'] = Date.now() - deletedAt;
    await sleep(2_000);
    const mentions = plane
      .fn()
      .process.lines.slice(before)
      .filter((l) => l.includes(svc.metadata.name));
    figures['functionOnDriverDeletion'] = mentions;
    expect(
      mentions.filter((l) => /"action":"deleted"/.test(l) && l.includes(`"service":"${svc.metadata.name}"`)),
      'the function did not delete it itself',
    ).toEqual([]);
    figures['functionReportedCollected'] = mentions.some((l) => l.includes('"collected"'));
    await expectInvariant('driver deleted');
  });
});
