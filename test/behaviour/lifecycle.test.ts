import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import type { ContentMode } from '../../testkit/apiserversource.ts';
import { type Harness, passingTime, startHarness } from '../../testkit/harness.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { requireKubectl, skipWithoutKubectl } from '../../testkit/kubectl.ts';

const NS = 'spark';
const SKIP_KUBECTL = skipWithoutKubectl('lifecycle.test', 'the independent kubectl client');
const run = promisify(execFile);

type Svc = {
  metadata: {
    name: string;
    uid: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ name: string; uid: string; kind: string; blockOwnerDeletion?: boolean }>;
  };
  spec: {
    type: string;
    clusterIP: string;
    selector: Record<string, string>;
    ports: Array<{ name: string; port: number; targetPort: number; protocol: string }>;
  };
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** A Spark application in the emulator: the driver pod and helpers to add executors. */
function sparkApp(harness: Harness, opts: { appId?: string; driverOptIn?: boolean; driverName?: string } = {}) {
  const appId = opts.appId ?? sparkAppId(42);
  const driver = harness.createPod(driverPod({ namespace: NS, appId, optIn: opts.driverOptIn, name: opts.driverName }));
  const driverRef = { name: driver.metadata.name, uid: driver.metadata.uid! };
  return {
    appId,
    driver,
    driverRef,
    executor: (execId: string, extra: { optIn?: boolean; port?: number | null } = {}): PodBody =>
      harness.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId,
          driver: driverRef,
          blockManagerPort: extra.port === null ? undefined : (extra.port ?? 7079),
          optIn: extra.optIn,
        }),
      ),
  };
}

const ours = (harness: Harness): Svc[] =>
  harness.services(NS).filter((s) => (s as Svc).metadata.labels['app.kubernetes.io/managed-by'] === 'spark-exec-svc') as Svc[];
const endpointsOf = (harness: Harness, svc: Svc): number =>
  harness.emulator.listObjects(
    'pods',
    NS,
    Object.entries(svc.spec.selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(','),
  ).length;

describe.each<ContentMode>(['binary', 'structured'])('a Spark application’s life (%s content mode)', (mode) => {
  it('driver → 3 executors → one decommissioned → driver deleted', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    expect((await h.send('add', app.driver, mode)).data?.action).toBe('ignored');

    // Spark creates them in one batch: the first add's list finds all three and serves them all.
    const executors = ['1', '2', '3'].map((id) => app.executor(id));
    for (const [k, pod] of executors.entries()) {
      const reply = await h.send('add', pod, mode);
      expect(reply.status).toBe(200);
      expect(reply.type).toBe(k === 0 ? 'spark-exec-svc.service.created' : 'spark-exec-svc.service.verified');
      expect(ours(h).some((s) => s.metadata.name === `svc-${app.appId}-exec-${k + 1}`)).toBe(true);
    }
    const services = ours(h);
    expect(services.map((s) => s.metadata.name).sort()).toEqual(['1', '2', '3'].map((id) => `svc-${app.appId}-exec-${id}`));
    for (const svc of services) {
      expect(svc.spec.type).toBe('ClusterIP');
      expect(svc.spec.clusterIP).not.toBe('None');
      expect(svc.spec.ports).toEqual([{ name: 'spark-block-manager', port: 7079, targetPort: 7079, protocol: 'TCP' }]);
      expect(svc.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Pod', name: app.driverRef.name, uid: app.driverRef.uid }),
      ]);
      expect(svc.metadata.ownerReferences?.[0]?.blockOwnerDeletion).toBeUndefined();
      expect(endpointsOf(h, svc)).toBe(1);
    }

    // Executor 2 is decommissioned: the pod goes, the Service stays with no endpoints.
    const lost = executors[1]!;
    h.emulator.deleteObject('pods', NS, lost.metadata.name);
    const goneReply = await h.send('delete', lost, mode);
    expect(goneReply.type).toBe('spark-exec-svc.service.marked-gone');
    const lostSvc = ours(h).find((s) => s.metadata.name === `svc-${app.appId}-exec-2`)!;
    expect(lostSvc).toBeDefined();
    expect(lostSvc.metadata.ownerReferences?.[0]?.uid).toBe(app.driverRef.uid);
    expect(lostSvc.metadata.annotations?.['spark-exec-svc/executor-gone-at']).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(endpointsOf(h, lostSvc)).toBe(0);
    expect(ours(h)).toHaveLength(3);

    // The driver is deleted: garbage collection removes every Service it owns.
    h.emulator.deleteObject('pods', NS, app.driver.metadata.name);
    expect(ours(h)).toHaveLength(0);
    const driverReply = await h.send('delete', app.driver, mode);
    expect(driverReply.status).toBe(200);
    expect(driverReply.data?.app).toBe(app.appId);
    expect(ours(h)).toHaveLength(0);
  });
});

describe('at-least-once and out-of-order delivery', () => {
  it('every event delivered twice converges to the same Services', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    const e2 = app.executor('2');
    for (const pod of [e1, e1, e2, e2]) expect((await h.send('add', pod)).status).toBe(200);
    expect((await h.send('update', e1)).type).toBe('spark-exec-svc.service.verified');
    h.emulator.deleteObject('pods', NS, e2.metadata.name);
    expect((await h.send('delete', e2)).type).toBe('spark-exec-svc.service.marked-gone');
    const mark = ours(h).find((s) => s.metadata.name.endsWith('-exec-2'))!.metadata.annotations!['spark-exec-svc/executor-gone-at'];
    expect((await h.send('delete', e2)).type).toBe('spark-exec-svc.service.verified');
    expect(ours(h).find((s) => s.metadata.name.endsWith('-exec-2'))!.metadata.annotations!['spark-exec-svc/executor-gone-at']).toBe(mark);
    expect(ours(h)).toHaveLength(2);
  });

  it('updates that change nothing cost zero API calls; non-opted-in updates too', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    await h.send('add', e1);
    const quiet = sparkApp(h, { appId: sparkAppId(77), driverOptIn: false });
    const q1 = quiet.executor('1');
    expect((await h.send('add', q1)).type).toBe('spark-exec-svc.ignored');
    h.emulator.resetRequests();
    for (let i = 0; i < 5; i++) {
      expect((await h.send('update', e1)).type).toBe('spark-exec-svc.service.verified');
      expect((await h.send('update', q1)).type).toBe('spark-exec-svc.ignored');
    }
    expect(h.emulator.countRequests()).toBe(0);
  });

  it('a scale-up reads its driver and its executors once: concurrent reads are shared, and trusted for a few seconds', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    h.emulator.resetRequests();
    const pods = Array.from({ length: 20 }, (_, i) => app.executor(String(i + 1)));
    // All at once: concurrent adds share one read of the driver.
    const replies = await Promise.all(pods.map((pod) => h!.send('add', pod)));
    // Each answered with its Service made — by itself, or by the event whose list found it first.
    expect(replies.map((r) => r.status)).toEqual(pods.map(() => 200));
    expect(replies.filter((r) => r.type === 'spark-exec-svc.service.created').length).toBeGreaterThanOrEqual(1);
    expect(replies.every((r) => r.type === 'spark-exec-svc.service.created' || r.type === 'spark-exec-svc.service.verified')).toBe(true);
    expect(
      ours(h)
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(pods.map((_, i) => `svc-${app.appId}-exec-${i + 1}`).sort());
    expect(h.emulator.countRequests({ verb: 'create', resource: 'services' })).toBe(20);
    expect(h.emulator.countRequests({ verb: 'get', resource: 'pods' })).toBe(1);
    // One list of the executors (ids 1–32: Spark creates executors in batches) proves they exist
    // before any Service is made for them; one count of our Services checks the namespace's cap.
    expect(h.emulator.countRequests({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(h.emulator.countRequests({ verb: 'list', resource: 'services' })).toBe(1);
    expect(h.emulator.countRequests()).toBe(23);
  });

  it('delete before add: no Service is ever made for an executor the API server does not show running', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    expect((await h.send('delete', e1)).data).toMatchObject({
      action: 'verified',
      outcomes: [expect.objectContaining({ detail: 'no Service and no running executor' })],
    });
    const late = await h.send('add', e1);
    expect(late.type).toBe('spark-exec-svc.service.verified');
    expect(ours(h)).toHaveLength(0);
  });

  it('an executor delete after the driver is gone deletes the Service (owner-driven cleanup)', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    await h.send('add', e1);
    // Orphan the Service (as if garbage collection were slow), then remove the driver.
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    const svc = ours(h)[0]!;
    await fetch(`${h.emulator.url}/api/v1/namespaces/${NS}/pods/${app.driver.metadata.name}`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ propagationPolicy: 'Orphan' }),
    });
    expect(ours(h)).toHaveLength(1);
    const reply = await h.send('delete', e1);
    expect(reply.type).toBe('spark-exec-svc.service.deleted');
    expect(ours(h).find((s) => s.metadata.uid === svc.metadata.uid)).toBeUndefined();
  });
});

describe('Reference mode', () => {
  it('reads the pod on add, finds the Service by annotation on delete, reports GC on driver delete', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    expect((await h.sendRef('add', NS, e1.metadata.name)).type).toBe('spark-exec-svc.service.created');
    expect((await h.sendRef('add', NS, 'no-such-pod')).data).toMatchObject({ action: 'ignored', reason: 'pod already gone' });
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    expect((await h.sendRef('delete', NS, e1.metadata.name)).type).toBe('spark-exec-svc.service.marked-gone');
    // Real garbage collection is asynchronous: orphan first to observe the report, then the function deletes the strays.
    await fetch(`${h.emulator.url}/api/v1/namespaces/${NS}/pods/${app.driver.metadata.name}`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ propagationPolicy: 'Orphan' }),
    });
    const reply = await h.sendRef('delete', NS, app.driver.metadata.name);
    expect(reply.status).toBe(200);
    expect(ours(h)).toHaveLength(0);
  });
});

describe('scope and safety', () => {
  it('non-Spark pods and other namespaces are acknowledged with zero API calls', async () => {
    h = await startHarness();
    h.emulator.resetRequests();
    const web = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web', namespace: NS, uid: 'u1', labels: { app: 'web' } },
      spec: { containers: [] },
      status: { phase: 'Running' },
    };
    for (const verb of ['add', 'update', 'delete'] as const) {
      const reply = await h.send(verb, web as unknown as PodBody);
      expect(reply.status).toBe(200);
      expect(reply.type).toBe('spark-exec-svc.ignored');
    }
    const elsewhere = executorPod({ namespace: 'other', appId: sparkAppId(1), execId: '1', driver: { name: 'd', uid: 'u' } });
    elsewhere.metadata.uid = 'u2';
    expect((await h.send('add', elsewhere)).data?.reason).toMatch(/not watched/);
    expect(h.emulator.countRequests()).toBe(0);
  });

  it('opt-in: nothing for apps that did not ask; the executor or the driver may opt in', async () => {
    h = await startHarness();
    const quiet = sparkApp(h, { appId: sparkAppId(1), driverOptIn: false });
    const reply = await h.send('add', quiet.executor('1'));
    expect(reply.data).toMatchObject({ action: 'ignored', reason: expect.stringContaining('not opted in') });
    expect(ours(h)).toHaveLength(0);
    expect((await h.send('add', quiet.executor('2', { optIn: true }))).type).toBe('spark-exec-svc.service.created');
    const loud = sparkApp(h, { appId: sparkAppId(2), driverOptIn: true });
    expect((await h.send('add', loud.executor('1'))).type).toBe('spark-exec-svc.service.created');
    expect(ours(h)).toHaveLength(2);
  });

  it('OPT_IN_MODE=all acts on every Spark executor in the watched namespaces', async () => {
    h = await startHarness({ OPT_IN_MODE: 'all' });
    const quiet = sparkApp(h, { appId: sparkAppId(5), driverOptIn: false });
    const e1 = quiet.executor('1');
    expect((await h.send('add', e1)).type).toBe('spark-exec-svc.service.created');
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    expect((await h.send('delete', e1)).type).toBe('spark-exec-svc.service.marked-gone');
    expect(ours(h)).toHaveLength(1);
  });

  it('a foreign Service with the same name is left untouched and reported as a conflict', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const name = executorServiceName(app.appId, '1');
    const foreign = h.emulator.seed({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: NS, labels: { team: 'someone-else' } },
      spec: { selector: { app: 'theirs' }, ports: [{ name: 'http', port: 80 }] },
    }) as Svc;
    const e1 = app.executor('1');
    const reply = await h.send('add', e1);
    expect(reply.type).toBe('spark-exec-svc.service.conflict');
    const after = h.emulator.getObject('services', NS, name) as Svc;
    expect(after).toEqual(foreign);
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    const gone = await h.send('delete', e1);
    expect(gone.type).toBe('spark-exec-svc.service.conflict');
    expect(h.emulator.getObject('services', NS, name)).toEqual(foreign);
  });

  it('drift is repaired by the sweep and by any process that has not cached the Service', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    const e1 = app.executor('1');
    await h.send('add', e1);
    const name = executorServiceName(app.appId, '1');
    await fetch(`${h.emulator.url}/api/v1/namespaces/${NS}/services/${name}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { selector: { 'spark-exec-id': '9' }, ports: [{ name: 'x', port: 1, targetPort: 1 }] } }),
    });
    const reply = await postSweep(h);
    expect(reply.data?.outcomes).toEqual([expect.objectContaining({ service: name, action: 'patched' })]);
    let svc = h.emulator.getObject('services', NS, name) as Svc;
    expect(svc.spec.selector).toEqual({ 'spark-app-selector': app.appId, 'spark-exec-id': '1' });
    // A second instance of the function (no cache) fixes drift on the next add/update too.
    await fetch(`${h.emulator.url}/api/v1/namespaces/${NS}/services/${name}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { ports: [{ name: 'x', port: 2, targetPort: 2 }] } }),
    });
    const other = await startHarness({}, { emulator: h.emulator });
    try {
      const fromOther = await other.send('update', e1);
      expect(fromOther.type).toBe('spark-exec-svc.service.patched');
    } finally {
      await other.close();
    }
    svc = h.emulator.getObject('services', NS, name) as Svc;
    expect(svc.spec.selector).toEqual({ 'spark-app-selector': app.appId, 'spark-exec-id': '1' });
    expect(svc.spec.ports).toEqual([expect.objectContaining({ name: 'spark-block-manager', port: 7079, targetPort: 7079 })]);
  });

  it('custom app ids that make the plain name invalid get the hashed form, without collisions', async () => {
    h = await startHarness();
    const a = sparkApp(h, { appId: 'My_Job.2026-12-02', driverName: 'job-a-driver' });
    const b = sparkApp(h, { appId: 'my-job-2026-12-02', driverName: 'job-b-driver' });
    const long = sparkApp(h, { appId: `nightly-${'x'.repeat(50)}` });
    for (const app of [a, b, long]) expect((await h.send('add', app.executor('12'))).type).toBe('spark-exec-svc.service.created');
    const names = ours(h).map((s) => s.metadata.name);
    expect(new Set(names).size).toBe(3);
    for (const name of names) {
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    }
    expect(names).toContain('svc-my-job-2026-12-02-exec-12');
    expect(names.filter((n) => n.startsWith('svc-my-job-2026-12-02-exec-12-'))).toHaveLength(1);
  });

  it('a pod without a usable block-manager port is skipped with a clear reason', async () => {
    h = await startHarness({ BLOCK_MANAGER_PORT: '' });
    const app = sparkApp(h);
    const reply = await h.send('add', app.executor('1', { port: null }));
    expect(reply.data).toMatchObject({ action: 'skipped', reason: expect.stringContaining('spark.blockManager.port') });
    expect(ours(h)).toHaveLength(0);
  });
});

describe('cool-down', () => {
  it('a Service whose executor went is deleted by the first sweep after the cool-down, and only then', async () => {
    let now = new Date('2026-12-02T12:00:00Z');
    h = await startHarness(
      { COOLDOWN_SECONDS: '60' },
      passingTime(() => now),
    );
    const app = sparkApp(h);
    const [e1, e2, e3] = [app.executor('1'), app.executor('2'), app.executor('3')];
    for (const pod of [e1, e2, e3]) await h.send('add', pod);
    h.emulator.deleteObject('pods', NS, e1.metadata.name);
    expect((await h.send('delete', e1)).type).toBe('spark-exec-svc.service.marked-gone');
    now = new Date('2026-12-02T12:00:59Z');
    h.emulator.deleteObject('pods', NS, e2.metadata.name);
    await h.send('delete', e2);
    expect(ours(h)).toHaveLength(3);
    now = new Date('2026-12-02T12:01:20Z');
    const reply = await postSweep(h);
    expect(reply.data?.outcomes).toEqual([expect.objectContaining({ service: executorServiceName(app.appId, '1'), action: 'deleted' })]);
    expect(
      ours(h)
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(['2', '3'].map((id) => executorServiceName(app.appId, id)).sort());
  });
});

describe('sweep (PingSource)', () => {
  it('repairs missing Services, marks and ends gone ones, removes strays, in pages', async () => {
    h = await startHarness({ SWEEP_PAGE_SIZE: '2', COOLDOWN_SECONDS: '300' });
    const app = sparkApp(h);
    const executors = ['1', '2', '3', '4', '5'].map((id) => app.executor(id));
    // Events were lost: no Services yet. Add a stray whose owner no longer exists and a foreign Service.
    h.emulator.seed({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: 'svc-old-app-exec-1',
        namespace: NS,
        labels: { 'app.kubernetes.io/managed-by': 'spark-exec-svc', 'spark-app-selector': 'old-app', 'spark-exec-id': '1' },
        ownerReferences: [],
      },
      spec: { selector: { 'spark-app-selector': 'old-app', 'spark-exec-id': '1' }, ports: [{ name: 'spark-block-manager', port: 7079 }] },
    });
    h.emulator.seed({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: NS, labels: { app: 'web' } },
      spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
    });
    h.emulator.deleteObject('pods', NS, executors[4]!.metadata.name);
    h.emulator.resetRequests();
    const reply = await postSweep(h);
    expect(reply.status).toBe(200);
    expect(reply.type).toBe('spark-exec-svc.swept');
    expect(
      ours(h)
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(['1', '2', '3', '4'].map((id) => executorServiceName(app.appId, id)).sort());
    expect(h.emulator.getObject('services', NS, 'web')).toBeDefined();
    expect(h.emulator.countRequests({ verb: 'list', resource: 'pods' })).toBeGreaterThanOrEqual(3); // 4 executor pods at page size 2: 2 pages, + drivers
    // Second sweep: nothing left to repair.
    const again = await postSweep(h);
    expect(again.data?.outcomes).toEqual([]);
  });
});

describe('independent client: kubectl', () => {
  it.skipIf(SKIP_KUBECTL)('kubectl sees the Services the function created', async () => {
    h = await startHarness();
    const app = sparkApp(h);
    await h.send('add', app.executor('1'));
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'sxs-kubectl-')), 'config');
    h.emulator.writeKubeconfig(kubeconfig);
    const { stdout } = await run(requireKubectl(), [
      '--kubeconfig',
      kubeconfig,
      '-n',
      NS,
      'get',
      'svc',
      '-l',
      'app.kubernetes.io/managed-by=spark-exec-svc',
      '-o',
      'json',
    ]);
    const list = JSON.parse(stdout) as { items: Svc[] };
    expect(list.items.map((s) => s.metadata.name)).toEqual([executorServiceName(app.appId, '1')]);
    expect(list.items[0]?.spec.ports[0]?.port).toBe(7079);
  });
});

async function postSweep(harness: Harness) {
  const { postCloudEvent } = await import('../../testkit/apiserversource.ts');
  return postCloudEvent(harness.url, {
    type: 'dev.knative.sources.ping',
    data: { action: 'sweep' },
    source: '/apis/v1/namespaces/spark/pingsources/sweep',
  });
}
