/**
 * Attack class: reaching beyond the function's lane. Events from unwatched namespaces (Resource
 * and Reference mode) and the sweep never touch anything outside WATCH_NAMESPACES, and Services
 * that are not the function's (same-name squatters, look-alikes with our label but another owner,
 * unrelated ones) are never written. The request-log audit (testkit/audit.ts) is checked too.
 */
import type { Harness } from '../../testkit/harness.ts';
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { postSweep } from '../../testkit/apiserversource.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, addForeign, audited, auditRequests, logsMatching, useAudit } from '../support/audited.ts';

useAudit();

function sparkApp(h: Harness, seed: number, namespace = NS): { appId: string; driver: PodBody; exec: (id: string) => PodBody } {
  const appId = sparkAppId(seed);
  const driver = h.createPod(driverPod({ namespace, appId, name: `s${seed}-driver` }));
  return {
    appId,
    driver,
    exec: (id) =>
      h.createPod(
        executorPod({
          namespace,
          appId,
          execId: id,
          name: `s${seed}-exec-${id}`,
          driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
          optIn: true,
        }),
      ),
  };
}

describe('scope: namespaces', () => {
  it('events from unwatched namespaces (resource and reference mode) and the sweep never reach beyond WATCH_NAMESPACES', async () => {
    const h = await audited({ WATCH_NAMESPACES: 'spark,spark-b' });
    const inside = sparkApp(h, 1);
    const outside = sparkApp(h, 2, 'kube-system');
    const e1 = inside.exec('1');
    const o1 = outside.exec('1');
    for (const verb of ['add', 'update', 'delete'] as const) {
      const reply = await h.send(verb, o1);
      expect(reply.data).toMatchObject({ action: 'ignored', reason: 'namespace kube-system is not watched' });
      expect((await h.sendRef(verb, 'kube-system', o1.metadata.name)).data?.action).toBe('ignored');
      expect((await h.send(verb, outside.driver)).data?.action).toBe('ignored');
    }
    expect(h.emulator.requests).toHaveLength(0);
    expect((await h.send('add', e1)).type).toBe('spark-exec-svc.service.created');
    expect((await postSweep(h.url)).status).toBe(200);
    expect(new Set(h.emulator.requests.map((r) => r.namespace))).toEqual(new Set(['spark', 'spark-b']));
    expect(h.emulator.listObjects('services', 'kube-system').filter((s) => JSON.stringify(s).includes('spark-exec-svc'))).toEqual([]);
  });

  it('the audit itself catches what it must (pod writes, other namespaces, cluster-wide calls, foreign writes)', () => {
    const r = (method: string, verb: string, resource: string, namespace?: string, name?: string) => ({
      method,
      path: '/x',
      query: '',
      status: 200,
      verb,
      resource,
      namespace,
      name,
    });
    const problems = auditRequests(
      [
        r('PATCH', 'patch', 'pods', NS, 'p'),
        r('DELETE', 'delete', 'pods', NS, 'p'),
        r('GET', 'list', 'services', 'kube-system'),
        r('GET', 'list', 'pods'),
        r('GET', 'get', 'namespaces', undefined, NS),
        r('DELETE', 'delete', 'services', NS, 'theirs'),
        r('GET', 'get', 'services', NS, 'ours'),
      ],
      { namespaces: [NS], foreign: [{ namespace: NS, name: 'theirs' }] },
    );
    expect(problems).toEqual([
      'pod write: PATCH /x',
      'pod write: DELETE /x',
      'request outside the watched namespaces: GET /x',
      'cluster-wide request: GET /x',
      'request outside pods/services: GET /x',
      'cluster-wide request: GET /x',
      'write to a foreign Service: DELETE /x',
    ]);
  });
});

describe('scope: Services the function does not own', () => {
  it('same-name squatters, look-alikes with our label but another owner, and unrelated Services are never written', async () => {
    const h = await audited({ COOLDOWN_SECONDS: '1' });
    const app = sparkApp(h, 3);
    const seed = (body: object) => h.emulator.seed(body) as { metadata: { name: string; namespace: string } };
    const foreign = [
      // Someone else's Service with exactly the name executor 1 needs.
      seed({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: executorServiceName(app.appId, '1'), namespace: NS, labels: { team: 'x' } },
        spec: { selector: { app: 'x' }, ports: [{ port: 80 }] },
      }),
      // Our label and app label, owned by a Deployment: not ours.
      seed({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {
          name: executorServiceName(app.appId, '2'),
          namespace: NS,
          labels: { 'app.kubernetes.io/managed-by': 'spark-exec-svc', 'spark-app-selector': app.appId, 'spark-exec-id': '2' },
          annotations: { 'spark-exec-svc/executor-gone-at': '2000-01-01T00:00:00Z' },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'd', uid: 'deploy-1' }],
        },
        spec: { selector: { app: 'y' }, ports: [{ port: 7079 }] },
      }),
      // Our label, two owners, one of them not a Pod: not ours.
      seed({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {
          name: 'mixed-owners',
          namespace: NS,
          labels: { 'app.kubernetes.io/managed-by': 'spark-exec-svc', 'spark-app-selector': app.appId, 'spark-exec-id': '3' },
          annotations: { 'spark-exec-svc/executor-pod': 's3-exec-3', 'spark-exec-svc/driver-pod': 's3-driver' },
          ownerReferences: [
            { apiVersion: 'v1', kind: 'Pod', name: app.driver.metadata.name, uid: app.driver.metadata.uid! },
            { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'rs-1' },
          ],
        },
        spec: { selector: { app: 'z' }, ports: [{ port: 7079 }] },
      }),
      seed({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'kubernetes-dashboard', namespace: NS },
        spec: { selector: { app: 'k' }, ports: [{ port: 443 }] },
      }),
    ].map((s) => ({ namespace: s.metadata.namespace, name: s.metadata.name }));
    addForeign(h.emulator, foreign);
    const before = foreign.map((f) => JSON.stringify(h.emulator.getObject('services', f.namespace, f.name)));

    const execs = ['1', '2', '3', '4'].map((id) => app.exec(id));
    for (const e of execs) expect((await h.send('add', e)).status).toBe(200);
    expect((await h.send('add', execs[0]!)).type).toBe('spark-exec-svc.service.conflict');
    for (const e of execs) {
      h.emulator.deleteObject('pods', NS, e.metadata.name);
      expect((await h.send('delete', e)).status).toBe(200);
      expect((await h.sendRef('delete', NS, e.metadata.name)).status).toBe(200);
    }
    await new Promise((r) => setTimeout(r, 1100)); // past the 1 s cool-down
    expect((await postSweep(h.url)).status).toBe(200);
    h.emulator.patchObject('pods', NS, app.driver.metadata.name, { status: { phase: 'Succeeded' } });
    expect((await h.send('update', h.emulator.getObject('pods', NS, app.driver.metadata.name) as unknown as PodBody)).status).toBe(200);
    expect((await postSweep(h.url)).status).toBe(200);

    expect(foreign.map((f) => JSON.stringify(h.emulator.getObject('services', f.namespace, f.name)))).toEqual(before);
    // The conflict is reported where an operator sees it.
    expect(logsMatching(h, /not managed by spark-exec-svc/).length).toBeGreaterThan(0);
  });
});
