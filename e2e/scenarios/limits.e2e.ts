/**
 * Issue 16, "What must run against it" 4, and issue 17's admission policy and class 10 (selector
 * impostors), on the real kube-apiserver + kube-controller-manager with the real adapter and the
 * function as it ships: a ResourceQuota on count/services hit and raised, the
 * knative/overlays/admission-policy manifests applied to the real API server, and what the real
 * EndpointSlice controller does with a pod that carries only a victim's two selector labels.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { METRICS_PATH } from '../../shared/ops/metrics.ts';
import { NS } from '../../test/support/audited.ts';
import { type ApiAccess, createServiceAccountWithRole, rawGet, rawRequest, serviceAccountToken } from '../adapter/kube-access.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { runningPodIP, serviceEndpoints, waitUntil } from './observe.ts';
import { type Plane, startPlane, TENANT } from './plane.ts';
import { writeJsonReport } from './report-file.ts';
import { createPod, driverPodBody, executorPodBody, markRunning, type PodRef } from './spark-pods.ts';

let cluster: ScenarioCluster;
let plane: Plane;
let driver: PodRef;
/** The Spark driver's identity, the one the policy trusts (its variable trustedServiceAccounts). */
let sparkSa: ApiAccess;
const APP = 'lim-app';
const SPARK_SA = 'spark';
const QUOTA = 'lim-services';
const genuine = new Set<string>();
const report: Record<string, unknown> = {};
let ip = 10;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function running(who: ApiAccess, body: Record<string, unknown>): Promise<PodRef & { ip: string }> {
  const pod = await createPod(who, NS, body);
  if (cluster.kubelet) return { ...pod, ip: await runningPodIP(cluster.endpoints.admin, NS, pod.name) };
  const podIP = `10.244.3.${ip++}`;
  await markRunning(cluster.endpoints.admin, NS, pod.name, podIP);
  return { ...pod, ip: podIP };
}

interface ServiceView {
  metadata: { name: string; annotations?: Record<string, string> };
}

async function service(execId: number): Promise<ServiceView | undefined> {
  const list = (await rawGet(
    cluster.endpoints.admin,
    `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${APP},spark-exec-id%3D${execId}`,
  )) as { items: ServiceView[] };
  return list.items[0];
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, genuine), `invariant after: ${step}`).toEqual([]);
}

/** The function's /metrics lines whose name starts with `prefix`. */
async function metricLines(prefix: string): Promise<string[]> {
  const text = await (await fetch(new URL(METRICS_PATH, plane.fn().url))).text();
  return text.split('\n').filter((l) => l.startsWith(prefix));
}

function execBody(execId: number): Record<string, unknown> {
  return executorPodBody(NS, APP, driver, execId, `${APP}-exec-${execId}`);
}

/** The addresses the real EndpointSlice controller lists for a Service. */
async function endpointAddresses(serviceName: string): Promise<string[]> {
  return (await serviceEndpoints(cluster.endpoints.admin, NS, serviceName)).map((e) => e.address).sort();
}

beforeAll(async () => {
  // A Node and pods bound to it: the EndpointSlice controller leaves out a pod whose Node does not
  // exist (k8s.io/endpointslice v0.34.4 reconciler.go, "skipping Pod for Service, Node not found").
  cluster = await scenarioCluster('limits', { kubelet: true });
  plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 21_000 + (process.pid % 1000) });
  await createServiceAccountWithRole(cluster.endpoints.admin, NS, SPARK_SA, [
    { apiGroups: [''], resources: ['pods'], verbs: ['create', 'delete'] },
  ]);
  sparkSa = { ...cluster.endpoints.admin, token: await serviceAccountToken(cluster.endpoints.admin, NS, SPARK_SA) };
  // The tenant may also patch pods here: the relabeling case needs it (its base role only creates and deletes).
  await createServiceAccountWithRole(cluster.endpoints.admin, NS, TENANT, [{ apiGroups: [''], resources: ['pods'], verbs: ['patch'] }]);
  driver = await running(plane.tenant, driverPodBody(NS, APP, `${APP}-driver`, `/tmp/spark-exec-svc-e2e-${process.pid}-${APP}.finished`));
  const exec1 = await running(sparkSa, execBody(1));
  genuine.add(exec1.name);
  // A pod made right after the adapter starts may land in its initial LIST (no event): one sweep then.
  for (let i = 0; i < 25 && (await service(1)) === undefined; i++) await sleep(200);
  if ((await service(1)) === undefined) await plane.sweep();
  await waitUntil('Service of executor 1', 20_000, () => service(1));
}, 30 * 60_000);

afterAll(async () => {
  try {
    if (cluster !== undefined) {
      const file = writeJsonReport(cluster.endpoints.logDir, 'limits-report.json', report);
      console.log(`limits report (${file}):\n${JSON.stringify(report, null, 2)}`);
    }
    await plane?.stop();
  } finally {
    await cluster?.stop();
  }
});

test('ResourceQuota count/services hit: the create is refused 403 "exceeded quota"; raised, the sweep makes the missing Service', async () => {
  const admin = cluster.endpoints.admin;
  const used = (
    (await rawGet(admin, `/api/v1/namespaces/${NS}/services`)) as {
      items: unknown[];
    }
  ).items.length;
  const quota = {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: QUOTA, namespace: NS },
    spec: { hard: { 'count/services': String(used) } },
  };
  expect((await rawRequest(admin, 'POST', `/api/v1/namespaces/${NS}/resourcequotas`, quota)).status).toBe(201);
  // Admission enforces status.hard, which the resourcequota controller writes.
  const quotaHard = async (): Promise<string | undefined> =>
    ((await rawGet(admin, `/api/v1/namespaces/${NS}/resourcequotas/${QUOTA}`)) as { status?: { hard?: Record<string, string> } }).status
      ?.hard?.['count/services'];
  await waitUntil('quota status', 30_000, async () => ((await quotaHard()) === String(used) ? true : undefined));

  const before = Date.now();
  const exec2 = await running(sparkSa, execBody(2));
  genuine.add(exec2.name);
  // What the function answered the adapter for executor 2's events, and how often the adapter sent them.
  await plane.proxy.waitFor(
    (r) => r.body.includes(exec2.uid) && r.status !== undefined && r.status !== 200 && r.status !== 202,
    30_000,
    'a refused event',
  );
  await sleep(5_000);
  const answers = plane.proxy.requests.filter((r) => r.receivedAtMs >= before && r.body.includes(exec2.uid)).map((r) => r.status);
  const kubeCreates = (await metricLines('spark_exec_svc_kube_requests_total')).filter(
    (l) => l.includes('create') && l.includes('services'),
  );
  const log = readFileSync(join(cluster.endpoints.logDir, 'function-resource-0.log'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('exceeded quota'));
  report['quota'] = {
    limit: used,
    answersToAdapterForExec2: answers,
    kubeCreateMetric: kubeCreates,
    logLines: log.slice(0, 2),
    logLineCount: log.length,
  };
  expect(await service(2)).toBeUndefined();
  expect(log.length, 'the function logs the quota refusal').toBeGreaterThan(0);
  expect(log[0]).toMatch(/exceeded quota: lim-services, requested: count\/services=1/);
  // Named as what it is, not as a missing RBAC permission (shared/kube/errors.ts).
  expect(log[0]).toContain('refused by a ResourceQuota: create services');
  expect(log[0]).not.toContain('RBAC');
  // Executor 1's Service is untouched.
  expect((await service(1))?.metadata.annotations?.['spark-exec-svc/executor-gone-at']).toBeUndefined();

  // Raise the quota: the next sweep makes the missing Service.
  const raised = String(used + 5);
  expect(
    (
      await rawRequest(
        admin,
        'PATCH',
        `/api/v1/namespaces/${NS}/resourcequotas/${QUOTA}`,
        { spec: { hard: { 'count/services': raised } } },
        'application/merge-patch+json',
      )
    ).status,
  ).toBe(200);
  await waitUntil('raised quota status', 30_000, async () => ((await quotaHard()) === raised ? true : undefined));
  const sweptAt = Date.now();
  await plane.sweep();
  await waitUntil('Service of executor 2 after the sweep', 20_000, () => service(2));
  report['quota'] = { ...(report['quota'] as object), sweepToServiceMs: Date.now() - sweptAt };
  await expectInvariant('quota raised + sweep');
});

test("class 10 without the policy: a tenant pod with only the victim executor's two selector labels becomes an endpoint of its Service", async () => {
  const victim = await waitUntil('Service of executor 1', 5_000, () => service(1));
  const exec1Ip = await endpointAddresses(victim.metadata.name);
  const impostor = await running(plane.tenant, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${APP}-selector-impostor`, namespace: NS, labels: { 'spark-app-selector': APP, 'spark-exec-id': '1' } },
    spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'none', command: ['sleep', 'infinity'] }] },
  });
  const started = Date.now();
  const addresses = await waitUntil('the impostor in the EndpointSlice', 30_000, async () => {
    const a = await endpointAddresses(victim.metadata.name);
    return a.includes(impostor.ip) ? a : undefined;
  });
  report['selectorImpostorWithoutPolicy'] = {
    service: victim.metadata.name,
    endpointsBefore: exec1Ip,
    endpointsAfter: addresses,
    impostorIp: impostor.ip,
    msUntilEndpoint: Date.now() - started,
  };
  expect(addresses).toContain(impostor.ip);
  expect(addresses.length).toBe(exec1Ip.length + 1);
  expect((await rawRequest(plane.tenant, 'DELETE', `/api/v1/namespaces/${NS}/pods/${impostor.name}?gracePeriodSeconds=0`)).status).toBe(
    200,
  );
});

test("the admission-policy overlay on the real API server: tenant copies, selector impostors and relabels refused; Spark's executors admitted", async () => {
  const admin = cluster.endpoints.admin;
  const dir = new URL('../../knative/overlays/admission-policy/', import.meta.url);
  const policy = load(readFileSync(new URL('policy.yaml', dir), 'utf8')) as Record<string, unknown>;
  const binding = load(readFileSync(new URL('binding.yaml', dir), 'utf8')) as Record<string, unknown>;
  const group = '/apis/admissionregistration.k8s.io/v1';
  const created = await rawRequest(admin, 'POST', `${group}/validatingadmissionpolicies`, policy);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const bound = await rawRequest(admin, 'POST', `${group}/validatingadmissionpolicybindings`, binding);
  expect(bound.status, JSON.stringify(bound.body)).toBe(201);

  const copy = { ...execBody(1), metadata: { ...(execBody(1)['metadata'] as object), name: `${APP}-copy-1` } };
  // The API server loads policies asynchronously: dry-run creates until the policy answers.
  const appliedAt = Date.now();
  const refusal = await waitUntil('the policy to refuse', 30_000, async () => {
    const a = await rawRequest(plane.tenant, 'POST', `/api/v1/namespaces/${NS}/pods?dryRun=All`, copy);
    return a.status === 403 ? a : undefined;
  });
  const msUntilEnforced = Date.now() - appliedAt;
  const tenantCopy = await rawRequest(plane.tenant, 'POST', `/api/v1/namespaces/${NS}/pods`, copy);
  expect(tenantCopy.status).toBe(403);
  const message = (tenantCopy.body as { message?: string }).message ?? '';
  expect(message).toContain('only the Spark drivers and the Spark operator may create Spark executor pods');
  expect(message).toContain(`system:serviceaccount:${NS}:${TENANT}`);

  const selectorOnly = await rawRequest(plane.tenant, 'POST', `/api/v1/namespaces/${NS}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${APP}-selector-impostor-2`, namespace: NS, labels: { 'spark-app-selector': APP, 'spark-exec-id': '1' } },
    spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'none', command: ['sleep', 'infinity'] }] },
  });
  expect(selectorOnly.status).toBe(403);

  const sparkExec = await running(sparkSa, execBody(3));
  genuine.add(sparkExec.name);
  // Its Service comes from its add event (a sweep if it has not come within 10 s).
  for (let i = 0; i < 50 && (await service(3)) === undefined; i++) await sleep(200);
  if ((await service(3)) === undefined) await plane.sweep();
  await waitUntil('Service of executor 3', 20_000, () => service(3));

  const plain = await createPod(plane.tenant, NS, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${APP}-plain`, namespace: NS, labels: { app: 'tenant' } },
    spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'none', command: ['sleep', 'infinity'] }] },
  });
  const relabel = await rawRequest(
    plane.tenant,
    'PATCH',
    `/api/v1/namespaces/${NS}/pods/${plain.name}`,
    { metadata: { labels: { 'spark-role': 'executor', 'spark-app-selector': APP, 'spark-exec-id': '1' } } },
    'application/merge-patch+json',
  );
  expect(relabel.status).toBe(403);
  const plainLabelChange = await rawRequest(
    plane.tenant,
    'PATCH',
    `/api/v1/namespaces/${NS}/pods/${plain.name}`,
    { metadata: { labels: { app: 'tenant-2' } } },
    'application/merge-patch+json',
  );
  expect(plainLabelChange.status).toBe(200);
  report['admissionPolicy'] = {
    msUntilEnforced,
    tenantCopy: { status: tenantCopy.status, message },
    selectorOnlyPod: { status: selectorOnly.status, message: (selectorOnly.body as { message?: string }).message },
    relabel: { status: relabel.status, message: (relabel.body as { message?: string }).message },
    sparkExecutorAdmitted: sparkExec.name,
    firstDryRunRefusal: (refusal.body as { reason?: string }).reason,
  };
  await expectInvariant('policy applied');
});
