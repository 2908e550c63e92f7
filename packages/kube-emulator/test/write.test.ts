/**
 * Writing through real HTTP: update and patch (merge, strategic, JSON; preconditions), delete and
 * garbage collection, fault injection, request accounting, and the real kubectl.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, KUBECTL, emu, api, ns, apiError, svcBody, seedPod, ownerRef, timeoutOptions } from './support.ts';
describe('update and patch', () => {
  it('replace enforces resourceVersion and skips no-op writes', async () => {
    const n = ns();
    const created = await api.createNamespacedService({ namespace: n, body: svcBody('r') });
    const stale = structuredClone(created);
    const v2 = await api.replaceNamespacedService({
      namespace: n,
      name: 'r',
      body: { ...created, metadata: { ...created.metadata, labels: { v: '2' } } },
    });
    expect(Number(v2.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));
    const conflict = await apiError(api.replaceNamespacedService({ namespace: n, name: 'r', body: stale }));
    expect(conflict.code).toBe(409);
    expect(conflict.status).toMatchObject({
      reason: 'Conflict',
      message:
        'Operation cannot be fulfilled on services "r": the object has been modified; please apply your changes to the latest version and try again',
      details: { name: 'r', kind: 'services' },
    });
    const same = await api.replaceNamespacedService({ namespace: n, name: 'r', body: v2 });
    expect(same.metadata?.resourceVersion).toBe(v2.metadata?.resourceVersion);
    // No resourceVersion: an unconditional update, allowed for services.
    const { resourceVersion: _rv, ...metaNoRv } = v2.metadata ?? {};
    const uncond = await api.replaceNamespacedService({
      namespace: n,
      name: 'r',
      body: { ...v2, metadata: { ...metaNoRv, labels: { v: '3' } } },
    });
    expect(uncond.metadata?.labels).toEqual({ v: '3' });
    const immutable = await apiError(
      api.replaceNamespacedService({
        namespace: n,
        name: 'r',
        body: { ...uncond, spec: { ...uncond.spec, clusterIP: '10.96.200.200', clusterIPs: undefined } },
      }),
    );
    expect(immutable.code).toBe(422);
    expect(immutable.status.message).toBe(
      'Service "r" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.200.200"}: may not change once set',
    );
    const missing = await apiError(api.replaceNamespacedService({ namespace: n, name: 'gone', body: svcBody('gone') }));
    expect(missing.code).toBe(404);
  });

  it('applies merge, JSON and strategic merge patches', async () => {
    const n = ns();
    const owner = seedPod(n, 'driver');
    const created = await api.createNamespacedService({
      namespace: n,
      body: svcBody(
        'p',
        {
          ports: [
            { name: 'a', port: 80 },
            { name: 'b', port: 81 },
          ],
        },
        { labels: { keep: '1', drop: '1' } },
      ),
    });
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    const json = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
    const smp = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);

    const m = await api.patchNamespacedService(
      { namespace: n, name: 'p', body: { metadata: { labels: { drop: null, add: 'x' } } } },
      merge,
    );
    expect(m.metadata?.labels).toEqual({ add: 'x', keep: '1' });
    // Merge patch replaces lists wholesale.
    const m2 = await api.patchNamespacedService({ namespace: n, name: 'p', body: { spec: { ports: [{ name: 'c', port: 90 }] } } }, merge);
    expect(m2.spec?.ports?.map((p) => p.port)).toEqual([90]);

    const j = await api.patchNamespacedService(
      {
        namespace: n,
        name: 'p',
        body: [
          { op: 'add', path: '/metadata/annotations', value: { 'a/b': 'c' } },
          { op: 'replace', path: '/spec/ports/0/port', value: 91 },
          { op: 'remove', path: '/metadata/labels/add' },
        ],
      },
      json,
    );
    expect(j.metadata?.annotations).toEqual({ 'a/b': 'c' });
    expect(j.spec?.ports?.[0]?.port).toBe(91);
    const failedTest = await apiError(
      api.patchNamespacedService({ namespace: n, name: 'p', body: [{ op: 'test', path: '/spec/type', value: 'NodePort' }] }, json),
    );
    expect(failedTest.code).toBe(422);
    expect(failedTest.status.reason).toBe('Invalid');

    // Strategic: ports merge by "port", ownerReferences by "uid".
    const s = await api.patchNamespacedService(
      {
        namespace: n,
        name: 'p',
        body: {
          metadata: { ownerReferences: [ownerRef(owner)] },
          spec: {
            ports: [
              { port: 91, name: 'renamed' },
              { port: 92, name: 'new' },
            ],
          },
        },
      },
      smp,
    );
    expect(s.spec?.ports?.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['renamed', 91, 90],
      ['new', 92, 92],
    ]);
    expect(s.metadata?.ownerReferences?.map((r) => r.uid)).toEqual([owner.metadata?.uid]);
    const del = await api.patchNamespacedService(
      { namespace: n, name: 'p', body: { spec: { ports: [{ port: 91, $patch: 'delete' }] } } },
      smp,
    );
    expect(del.spec?.ports?.map((p) => p.port)).toEqual([92]);

    // A stale resourceVersion inside a patch is a precondition, like the real server.
    const stale = await apiError(
      api.patchNamespacedService(
        { namespace: n, name: 'p', body: { metadata: { resourceVersion: created.metadata?.resourceVersion, labels: { z: '1' } } } },
        merge,
      ),
    );
    expect(stale.code).toBe(409);
    expect(stale.status.reason).toBe('Conflict');
    const notFound = await apiError(api.patchNamespacedService({ namespace: n, name: 'nope', body: {} }, merge));
    expect(notFound.code).toBe(404);
  });
});

describe('delete and garbage collection', () => {
  // Measured against kube-apiserver v1.34.4 (e2e/scenarios/emulator-fidelity.e2e.ts); wording from
  // k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete, the conflict named by the Kind.
  it('refuses a delete whose uid or resourceVersion precondition does not match, as the real server words it', async () => {
    const n = ns();
    const created = await api.createNamespacedService({ namespace: n, body: svcBody('p') });
    const uid = created.metadata?.uid ?? '';
    const rv = created.metadata?.resourceVersion ?? '';
    const wrongUid = await apiError(
      api.deleteNamespacedService({ namespace: n, name: 'p', body: { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } } }),
    );
    expect(wrongUid.code).toBe(409);
    expect(wrongUid.status).toMatchObject({
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on Service "p": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record (${uid}). The object might have been deleted and then recreated`,
      details: { name: 'p', kind: 'Service' },
    });
    const staleRv = await apiError(
      api.deleteNamespacedService({ namespace: n, name: 'p', body: { preconditions: { uid, resourceVersion: '1' } } }),
    );
    expect(staleRv.status).toMatchObject({
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on Service "p": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${rv}). The object might have been modified`,
      details: { name: 'p', kind: 'Service' },
    });
    await api.deleteNamespacedService({ namespace: n, name: 'p', body: { preconditions: { uid, resourceVersion: rv } } });
    expect(emu.getObject('services', n, 'p')).toBeUndefined();
  });

  // Measured against kube-apiserver v1.34.4 (e2e/scenarios/emulator-fidelity.e2e.ts): an unscheduled
  // pod is deleted at once, and the answer carries the deletionTimestamp BeforeDelete stamped.
  it('answers a pod delete with the pod stamped for deletion (grace 0), a service delete without', async () => {
    const n = ns();
    seedPod(n, 'gone');
    const deleted = await api.deleteNamespacedPod({ namespace: n, name: 'gone' });
    expect(deleted.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    expect(deleted.metadata?.deletionGracePeriodSeconds).toBe(0);
    expect(emu.getObject('pods', n, 'gone')).toBeUndefined();
    await api.createNamespacedService({ namespace: n, body: svcBody('s') });
    const svc = await api.deleteNamespacedService({ namespace: n, name: 's' });
    expect(JSON.stringify(svc)).not.toContain('deletionTimestamp');
  });

  it('cascades from a driver pod to its executors and their services (background, by UID)', async () => {
    const n = ns();
    const driver = seedPod(n, 'driver', { labels: { 'spark-role': 'driver' } }, { phase: 'Running' });
    const e1 = seedPod(n, 'exec-1', { ownerReferences: [ownerRef(driver)] });
    seedPod(n, 'exec-2', { ownerReferences: [ownerRef(driver)] });
    await api.createNamespacedService({ namespace: n, body: svcBody('svc-exec-1', {}, { ownerReferences: [ownerRef(driver)] }) });
    await api.createNamespacedService({ namespace: n, body: svcBody('svc-of-exec', {}, { ownerReferences: [ownerRef(e1)] }) });
    const unrelated = await api.createNamespacedService({ namespace: n, body: svcBody('other') });
    // Two owners: survives while one is alive, losing the dangling reference.
    const other = seedPod(n, 'other-owner');
    await api.createNamespacedService({
      namespace: n,
      body: svcBody('shared', {}, { ownerReferences: [ownerRef(driver), { ...ownerRef(other), controller: false }] }),
    });

    const deleted = await api.deleteNamespacedPod({ namespace: n, name: 'driver' });
    expect(deleted.metadata?.name).toBe('driver');
    expect(emu.listObjects('pods', n).map((p) => (p['metadata'] as k8s.V1ObjectMeta).name)).toEqual(['other-owner']);
    const svcs = (await api.listNamespacedService({ namespace: n })).items;
    expect(svcs.map((s) => s.metadata?.name)).toEqual(['other', 'shared']);
    expect(svcs[0]?.metadata?.uid).toBe(unrelated.metadata?.uid);
    expect(svcs[1]?.metadata?.ownerReferences?.map((r) => r.name)).toEqual(['other-owner']);
    emu.deleteObject('pods', n, 'other-owner');
    expect(emu.listObjects('services', n).map((s) => (s['metadata'] as k8s.V1ObjectMeta).name)).toEqual(['other']);
  });

  it('orphans on propagationPolicy=Orphan and collects dependents of absent owners at creation', async () => {
    const n = ns();
    const driver = seedPod(n, 'driver');
    await api.createNamespacedService({ namespace: n, body: svcBody('s1', {}, { ownerReferences: [ownerRef(driver)] }) });
    await api.deleteNamespacedPod({ namespace: n, name: 'driver', body: { propagationPolicy: 'Orphan' } });
    const orphan = await api.readNamespacedService({ namespace: n, name: 's1' });
    expect(orphan.metadata?.ownerReferences).toBeUndefined();

    // Owner UID that does not exist: the garbage collector deletes the dependent.
    await api.createNamespacedService({
      namespace: n,
      body: svcBody(
        'dangling',
        {},
        { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'driver', uid: driver.metadata?.uid ?? '' }] },
      ),
    });
    expect((await apiError(api.readNamespacedService({ namespace: n, name: 'dangling' }))).code).toBe(404);
    // Owners of kinds the emulator does not serve cannot be resolved and are left alone.
    await api.createNamespacedService({
      namespace: n,
      body: svcBody(
        'crd-owned',
        {},
        { ownerReferences: [{ apiVersion: 'sparkoperator.k8s.io/v1beta2', kind: 'SparkApplication', name: 'app', uid: 'x-1' }] },
      ),
    });
    expect(emu.getObject('services', n, 'crd-owned')).toBeDefined();
    const badPolicy = await apiError(api.deleteNamespacedService({ namespace: n, name: 's1', propagationPolicy: 'Sideways' }));
    expect(badPolicy.code).toBe(422);
  });

  it('keeps objects with finalizers terminating until the last finalizer is removed', async () => {
    const n = ns();
    const driver = seedPod(n, 'driver', { finalizers: ['example.com/hold'] });
    await api.createNamespacedService({ namespace: n, body: svcBody('dep', {}, { ownerReferences: [ownerRef(driver)] }) });
    const terminating = await api.deleteNamespacedPod({ namespace: n, name: 'driver' });
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();
    expect(emu.getObject('services', n, 'dep')).toBeDefined();
    await api.patchNamespacedPod(
      { namespace: n, name: 'driver', body: { metadata: { finalizers: null } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    expect(emu.getObject('pods', n, 'driver')).toBeUndefined();
    expect(emu.getObject('services', n, 'dep')).toBeUndefined();
  });
});

describe('faults', () => {
  it('injects status codes with Retry-After, then serves normally', async () => {
    const n = ns();
    emu.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 429, retryAfterSeconds: 2 } });
    const before = emu.faults.injected();
    const throttled = await apiError(api.createNamespacedService({ namespace: n, body: svcBody('f') }));
    expect(throttled.code).toBe(429);
    expect(throttled.headers['retry-after']).toBe('2');
    expect(throttled.status).toMatchObject({ reason: 'TooManyRequests', details: { retryAfterSeconds: 2 } });
    expect(emu.faults.injected()).toBe(before + 1);
    await api.createNamespacedService({ namespace: n, body: svcBody('f') });

    emu.faults.add({ path: `/namespaces/${n}/services/f`, times: 2, fault: { kind: 'status', code: 503 } });
    expect((await apiError(api.readNamespacedService({ namespace: n, name: 'f' }))).status.reason).toBe('ServiceUnavailable');
    expect((await apiError(api.readNamespacedService({ namespace: n, name: 'f' }))).code).toBe(503);
    expect((await api.readNamespacedService({ namespace: n, name: 'f' })).metadata?.name).toBe('f');

    emu.faults.add({ method: 'PATCH', fault: { kind: 'conflict' } });
    const conflict = await apiError(
      api.patchNamespacedService(
        { namespace: n, name: 'f', body: { metadata: { labels: { a: 'b' } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
    expect(conflict.status).toMatchObject({ code: 409, reason: 'Conflict', details: { name: 'f', kind: 'services' } });
    emu.faults.add({ resource: 'services', verb: 'get', fault: { kind: 'status', code: 403 } });
    expect((await apiError(api.readNamespacedService({ namespace: n, name: 'f' }))).status.reason).toBe('Forbidden');
  });

  it('resets connections, hangs until the client times out, and delays', async () => {
    const n = ns();
    emu.resetRequests();
    emu.faults.add({ verb: 'list', fault: { kind: 'reset' } });
    await expect(api.listNamespacedService({ namespace: n })).rejects.toThrow();
    emu.faults.add({ verb: 'list', fault: { kind: 'hang' } });
    const started = Date.now();
    await expect(api.listNamespacedService({ namespace: n }, timeoutOptions(300))).rejects.toThrow(/abort|timeout/i);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(emu.requests.map((r) => r.status)).toEqual([0, 0]);

    emu.faults.add({ verb: 'list', fault: { kind: 'delay', ms: 200 } });
    const t0 = Date.now();
    const list = await api.listNamespacedService({ namespace: n });
    expect(list.items).toEqual([]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(emu.requests.at(-1)?.status).toBe(200);
  });

  it('fires probabilistic rules reproducibly with a seed and can be cleared', async () => {
    const n = ns();
    const outcomes = async (): Promise<number[]> => {
      emu.faults.clear();
      emu.faults.seed(42);
      emu.faults.add({ verb: 'list', resource: 'pods', times: Infinity, probability: 0.5, fault: { kind: 'status', code: 500 } });
      const codes: number[] = [];
      for (let i = 0; i < 12; i++) {
        try {
          await api.listNamespacedPod({ namespace: n });
          codes.push(200);
        } catch (e) {
          codes.push((e as k8s.ApiException<unknown>).code);
        }
      }
      return codes;
    };
    const first = await outcomes();
    expect(await outcomes()).toEqual(first);
    expect(first).toContain(500);
    expect(first).toContain(200);
    emu.faults.clear();
    expect((await api.listNamespacedPod({ namespace: n })).items).toEqual([]);
  });

  it('goes down (connection refused) and comes back on the same port', async () => {
    const n = ns();
    await api.createNamespacedService({ namespace: n, body: svcBody('persist') });
    await emu.setDown(true);
    await expect(fetch(`${emu.url}/version`)).rejects.toThrow();
    const err = await api.readNamespacedService({ namespace: n, name: 'persist' }).catch((e: unknown) => e);
    expect(String((err as Error & { cause?: { code?: string } }).cause?.code ?? err)).toMatch(/ECONNREFUSED/);
    await emu.setDown(false);
    expect((await api.readNamespacedService({ namespace: n, name: 'persist' })).metadata?.name).toBe('persist');
  });
});

describe('request accounting', () => {
  it('counts API calls by verb and resource; store access is not counted', async () => {
    const n = ns();
    emu.resetRequests();
    seedPod(n, 'direct');
    emu.getObject('pods', n, 'direct');
    emu.listObjects('pods', n);
    expect(emu.countRequests()).toBe(0);
    await api.listNamespacedPod({ namespace: n });
    await api.readNamespacedPod({ namespace: n, name: 'direct' });
    await api.createNamespacedService({ namespace: n, body: svcBody('acc') });
    await api.deleteNamespacedService({ namespace: n, name: 'acc' });
    expect(emu.countRequests()).toBe(4);
    expect(emu.countRequests({ verb: 'list' })).toBe(1);
    expect(emu.countRequests({ resource: 'services' })).toBe(2);
    expect(emu.countRequests({ verb: 'delete', resource: 'services' })).toBe(1);
    expect(emu.requests[0]).toMatchObject({
      method: 'GET',
      path: `/api/v1/namespaces/${n}/pods`,
      status: 200,
      verb: 'list',
      resource: 'pods',
    });
  });
});

describe('kubectl', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kube-emulator-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!existsSync(KUBECTL))('gets, applies (create + strategic patch), selects and deletes with the real kubectl', async () => {
    const n = ns();
    const kubeconfig = join(dir, 'kubeconfig');
    emu.writeKubeconfig(kubeconfig);
    const kubectl = async (...args: string[]): Promise<string> =>
      (await run(KUBECTL, ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'cache'), ...args], { timeout: 10_000 })).stdout;

    seedPod(n, 'exec-1', { labels: { 'spark-role': 'executor' } }, { phase: 'Running' });
    const pods = JSON.parse(await kubectl('get', 'pods', '-n', n, '-o', 'json')) as { items: k8s.V1Pod[] };
    expect(pods.items.map((p) => [p.metadata?.name, p.status?.phase])).toEqual([['exec-1', 'Running']]);
    expect(await kubectl('get', 'pods', '-n', n)).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\nexec-1\s+0\/1\s+Running\s+0\s+/);

    const manifest = (port: number): string =>
      [
        'apiVersion: v1',
        'kind: Service',
        'metadata:',
        '  name: svc-k',
        `  namespace: ${n}`,
        '  labels: {app: k}',
        'spec:',
        '  selector: {app: k}',
        '  ports:',
        `  - {name: bm, port: ${port}}`,
        '',
      ].join('\n');
    const file = join(dir, 'svc.yaml');
    writeFileSync(file, manifest(7079));
    expect(await kubectl('apply', '-f', file)).toContain('service/svc-k created');
    writeFileSync(file, manifest(7080));
    expect(await kubectl('apply', '-f', file)).toContain('service/svc-k configured');
    const svc = emu.getObject('services', n, 'svc-k') as k8s.V1Service;
    expect(svc.spec?.ports?.map((p) => p.port)).toEqual([7080]);
    expect(svc.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration']).toContain('7080');
    expect(emu.requests.some((r) => r.method === 'PATCH' && r.path.endsWith('/services/svc-k'))).toBe(true);

    expect(await kubectl('get', 'svc', '-n', n, '-l', 'app=k', '-o', 'name')).toBe('service/svc-k\n');
    expect(await kubectl('get', 'svc', '-n', n, '-l', 'app=nope', '-o', 'name')).toBe('');
    expect(await kubectl('delete', 'pod', 'exec-1', '-n', n)).toContain('pod "exec-1" deleted');
    expect(emu.getObject('pods', n, 'exec-1')).toBeUndefined();
  });
});
