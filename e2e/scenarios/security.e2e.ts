/**
 * Issue 16, "What must run against it" 3: the security classes a real API server can show. Forged
 * CloudEvents posted straight to the function (anyone in the cluster can reach its URL) and pods of
 * a tenant whose token may only create and delete pods, against the real API server, the real
 * adapter running beside; the invariant is read from the real API server after every step.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { podEventType, podSubject, postCloudEvent } from '../../testkit/apiserversource.ts';
import { rawGet, rawRequest } from '../adapter/kube-access.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { type Plane, startPlane } from './plane.ts';
import { createPod, driverPodBody, executorPodBody, markRunning, type PodRef } from './spark-pods.ts';

let cluster: ScenarioCluster;
let plane: Plane;
let driver: PodRef;
let exec: PodRef;
const APP = 'sec-app';
const genuine = new Set<string>();
let ip = 50;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function running(body: Record<string, unknown>): Promise<PodRef> {
  const pod = await createPod(plane.tenant, NS, body);
  if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, pod.name, `10.244.2.${ip++}`);
  return pod;
}

async function podJson(name: string): Promise<Record<string, unknown>> {
  return (await rawGet(cluster.endpoints.admin, `/api/v1/namespaces/${NS}/pods/${name}`)) as Record<string, unknown>;
}

async function service(execId: number): Promise<{ metadata: { annotations?: Record<string, string> } } | undefined> {
  const list = (await rawGet(
    cluster.endpoints.admin,
    `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${APP},spark-exec-id%3D${execId}`,
  )) as {
    items: Array<{ metadata: { annotations?: Record<string, string> } }>;
  };
  return list.items[0];
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, genuine), `invariant after: ${step}`).toEqual([]);
}

beforeAll(async () => {
  cluster = await scenarioCluster('security', { kubelet: false });
  plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 20_000 + (process.pid % 1000) });
  driver = await running(driverPodBody(NS, APP, `${APP}-driver`, `/tmp/spark-exec-svc-e2e-${process.pid}-${APP}.finished`));
  exec = await running(executorPodBody(NS, APP, driver, 1, `${APP}-exec-1`));
  genuine.add(exec.name);
  // Pods created right after the adapter starts may land in its initial LIST, which sends no
  // events (delivery.e2e.ts, first test): the setup then gets its Service as any install does for
  // pods that exist before the adapter, from one sweep. Nothing asserted here depends on which.
  for (let i = 0; i < 25 && (await service(1)) === undefined; i++) await sleep(200);
  if ((await service(1)) === undefined) await plane.sweep();
  for (let i = 0; i < 100 && (await service(1)) === undefined; i++) await sleep(200);
}, 30 * 60_000);

afterAll(async () => {
  try {
    await plane?.stop();
  } finally {
    await cluster?.stop();
  }
});

test('the tenant cannot read pods or touch Services: its token only creates and deletes pods', async () => {
  expect((await rawRequest(plane.tenant, 'GET', `/api/v1/namespaces/${NS}/pods`)).status).toBe(403);
  expect((await rawRequest(plane.tenant, 'GET', `/api/v1/namespaces/${NS}/services`)).status).toBe(403);
  await expectInvariant('setup');
});

test('a forged delete of a live executor (its real object, posted to the function) changes nothing', async () => {
  const obj = await podJson(exec.name);
  const reply = await postCloudEvent(plane.fn().url, { type: podEventType('delete'), data: obj, subject: podSubject(NS, exec.name) });
  expect(reply.status).toBeLessThan(300);
  expect((await service(1))?.metadata.annotations?.['spark-exec-svc/executor-gone-at']).toBeUndefined();
  await expectInvariant('forged delete');
});

test('a forged Succeeded update of the live driver changes nothing', async () => {
  const obj = await podJson(driver.name);
  const forged = { ...obj, status: { ...(obj['status'] as object), phase: 'Succeeded' } };
  const reply = await postCloudEvent(plane.fn().url, { type: podEventType('update'), data: forged, subject: podSubject(NS, driver.name) });
  expect(reply.status).toBeLessThan(300);
  expect(await service(1)).toBeDefined();
  await expectInvariant('forged driver Succeeded');
});

test('a forged add of an executor that does not exist creates nothing', async () => {
  const body = executorPodBody(NS, APP, driver, 9, `${APP}-exec-9`);
  const forged = {
    ...body,
    metadata: { ...(body['metadata'] as object), uid: '00000000-0000-0000-0000-000000000009' },
    status: { phase: 'Running', podIP: '10.244.2.250' },
  };
  const reply = await postCloudEvent(plane.fn().url, { type: podEventType('add'), data: forged, subject: podSubject(NS, `${APP}-exec-9`) });
  expect(reply.status).toBeLessThan(300);
  expect(await service(9)).toBeUndefined();
  await expectInvariant('forged add');
});

test("a tenant's pod claiming the live executor's slot (same app and executor id, owned by the live driver) does not take its Service", async () => {
  const impostor = executorPodBody(NS, APP, driver, 1, `${APP}-impostor-1`);
  await running(impostor);
  await sleep(3_000);
  await plane.sweep();
  await expectInvariant('impostor created + sweep');
  // The tenant deletes its impostor: the genuine executor's Service must stay unmarked.
  await rawRequest(plane.tenant, 'DELETE', `/api/v1/namespaces/${NS}/pods/${APP}-impostor-1?gracePeriodSeconds=0`);
  await sleep(3_000);
  expect((await service(1))?.metadata.annotations?.['spark-exec-svc/executor-gone-at']).toBeUndefined();
  await expectInvariant('impostor deleted');
});
