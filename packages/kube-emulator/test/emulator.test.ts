/**
 * The emulator exercised only through real HTTP: the real @kubernetes/client-node CoreV1Api,
 * plain fetch for raw protocol details, and the real kubectl binary.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeEmulator, startEmulator } from '../index.ts';

const run = promisify(execFile);
const KUBECTL = '/usr/bin/kubectl';

let emu: KubeEmulator;
let api: k8s.CoreV1Api;
let nsCounter = 0;

/** A fresh namespace per test keeps tests independent in the shared emulator. */
function ns(): string {
  nsCounter += 1;
  return `t${nsCounter}`;
}

interface StatusBody {
  kind: string;
  apiVersion: string;
  status: string;
  message: string;
  reason: string;
  code: number;
  details?: { name?: string; kind?: string; causes?: Array<{ reason: string; message: string; field: string }>; retryAfterSeconds?: number };
}

/** client-node 2.x throws ApiException with the HTTP code and the Status JSON as a string body. */
async function apiError(p: Promise<unknown>): Promise<{ code: number; status: StatusBody; headers: Record<string, string> }> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof k8s.ApiException)) throw e;
    const err = e as k8s.ApiException<unknown>;
    expect(typeof err.body).toBe('string');
    return { code: err.code, status: JSON.parse(String(err.body)) as StatusBody, headers: err.headers };
  }
  throw new Error('expected the call to fail');
}

const svcBody = (name: string, extra: Partial<k8s.V1ServiceSpec> = {}, meta: Partial<k8s.V1ObjectMeta> = {}): k8s.V1Service => ({
  metadata: { name, ...meta },
  spec: { selector: { app: name }, ports: [{ name: 'bm', port: 7079 }], ...extra },
});

const podBody = (name: string, meta: Partial<k8s.V1ObjectMeta> = {}): k8s.V1Pod => ({
  metadata: { name, ...meta },
  spec: { containers: [{ name: 'main', image: 'spark:3.5.1' }] },
});

function seedPod(namespace: string, name: string, meta: Record<string, unknown> = {}, status: Record<string, unknown> = {}): k8s.V1Pod {
  return emu.seed({
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name, namespace, ...meta },
    spec: { containers: [{ name: 'main', image: 'spark:3.5.1' }] },
    status,
  }) as k8s.V1Pod;
}

const ownerRef = (pod: k8s.V1Pod): k8s.V1OwnerReference => ({
  apiVersion: 'v1',
  kind: 'Pod',
  name: pod.metadata?.name ?? '',
  uid: pod.metadata?.uid ?? '',
  controller: true,
  blockOwnerDeletion: true,
});

/** Middleware that aborts a client-node request after `ms` (client-node has no timeout option). */
function timeoutOptions(ms: number): k8s.ConfigurationOptions {
  const mw: k8s.ObservableMiddleware = {
    pre: (ctx) => {
      ctx.setSignal(AbortSignal.timeout(ms));
      return new k8s.Observable(Promise.resolve(ctx));
    },
    post: (res) => new k8s.Observable(Promise.resolve(res)),
  };
  return { middleware: [mw], middlewareMergeStrategy: 'append' };
}

beforeAll(async () => {
  emu = await startEmulator();
  api = emu.kubeConfig().makeApiClient(k8s.CoreV1Api);
});

afterAll(async () => {
  await emu.stop();
});

describe('discovery', () => {
  it('serves /version, /api, /api/v1 and /apis', async () => {
    const version = (await (await fetch(`${emu.url}/version`)).json()) as { major: string; minor: string };
    expect(version).toMatchObject({ major: '1', minor: '32' });
    const apiDoc = (await (await fetch(`${emu.url}/api`)).json()) as { kind: string; versions: string[] };
    expect(apiDoc).toMatchObject({ kind: 'APIVersions', versions: ['v1'] });
    const groups = (await (await fetch(`${emu.url}/apis`)).json()) as { kind: string; groups: unknown[] };
    expect(groups).toEqual({ kind: 'APIGroupList', apiVersion: 'v1', groups: [] });
    const list = await api.getAPIResources();
    const byName = new Map(list.resources.map((r) => [r.name, r]));
    expect(byName.get('pods')).toMatchObject({ kind: 'Pod', namespaced: true, shortNames: ['po'] });
    expect(byName.get('services')).toMatchObject({ kind: 'Service', namespaced: true, shortNames: ['svc'] });
    expect(byName.get('namespaces')).toMatchObject({ kind: 'Namespace', namespaced: false });
    expect(byName.get('pods')?.verbs).toEqual(expect.arrayContaining(['create', 'get', 'list', 'update', 'patch', 'delete']));
    expect(byName.get('pods')?.verbs).not.toContain('watch');
  });

  it('answers unknown paths with a 404 Status and watch with 405', async () => {
    const res = await fetch(`${emu.url}/apis/apps/v1/deployments`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ kind: 'Status', reason: 'NotFound', code: 404 });
    const watch = await fetch(`${emu.url}/api/v1/namespaces/default/pods?watch=true`);
    expect(watch.status).toBe(405);
    expect(await watch.json()).toMatchObject({ kind: 'Status', reason: 'MethodNotAllowed' });
  });
});

describe('services: create, defaults, get', () => {
  it('creates with the real defaults and system fields', async () => {
    const n = ns();
    const a = await api.createNamespacedService({ namespace: n, body: svcBody('svc-a') });
    const b = await api.createNamespacedService({ namespace: n, body: svcBody('svc-b', { clusterIP: 'None' }) });
    expect(a.metadata?.uid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a.metadata?.namespace).toBe(n);
    expect(Number(b.metadata?.resourceVersion)).toBeGreaterThan(Number(a.metadata?.resourceVersion));
    expect(a.spec).toMatchObject({
      type: 'ClusterIP',
      sessionAffinity: 'None',
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      internalTrafficPolicy: 'Cluster',
      ports: [{ name: 'bm', port: 7079, protocol: 'TCP', targetPort: 7079 }],
    });
    expect(a.spec?.clusterIP).toMatch(/^10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+$/);
    expect(a.spec?.clusterIPs).toEqual([a.spec?.clusterIP]);
    expect(b.spec?.clusterIP).toBe('None');
    expect(b.spec?.clusterIPs).toEqual(['None']);
    const c = await api.createNamespacedService({ namespace: n, body: svcBody('svc-c') });
    expect(c.spec?.clusterIP).not.toBe(a.spec?.clusterIP);
    // Raw JSON: RFC 3339 seconds, Go field order.
    const raw = await fetch(`${emu.url}/api/v1/namespaces/${n}/services/svc-a`);
    const text = await raw.text();
    expect(text.indexOf('"kind"')).toBeLessThan(text.indexOf('"metadata"'));
    const json = JSON.parse(text) as { metadata: { creationTimestamp: string } };
    expect(json.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const got = await api.readNamespacedService({ namespace: n, name: 'svc-a' });
    expect(got.metadata?.uid).toBe(a.metadata?.uid);
  });

  it('reports NotFound and AlreadyExists like the real server', async () => {
    const n = ns();
    const missing = await apiError(api.readNamespacedService({ namespace: n, name: 'nope' }));
    expect(missing.code).toBe(404);
    expect(missing.status).toMatchObject({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'NotFound',
      message: 'services "nope" not found',
      details: { name: 'nope', kind: 'services' },
      code: 404,
    });
    await api.createNamespacedService({ namespace: n, body: svcBody('dup') });
    const dup = await apiError(api.createNamespacedService({ namespace: n, body: svcBody('dup') }));
    expect(dup.code).toBe(409);
    expect(dup.status).toMatchObject({ reason: 'AlreadyExists', message: 'services "dup" already exists' });
  });

  it('rejects invalid services with 422 and field causes', async () => {
    const n = ns();
    const cases: Array<[k8s.V1Service, string]> = [
      [svcBody('Bad_Name'), 'metadata.name'],
      [svcBody(`s${'x'.repeat(63)}`), 'metadata.name'],
      [svcBody('a.b'), 'metadata.name'],
      [{ metadata: { name: 'noports' }, spec: { selector: { a: 'b' } } }, 'spec.ports'],
      [svcBody('port0', { ports: [{ port: 70000 }] }), 'spec.ports[0].port'],
      [svcBody('tp', { ports: [{ port: 80, targetPort: 'Not_A_Port' as unknown as k8s.IntOrString }] }), 'spec.ports[0].targetPort'],
      [svcBody('dupnames', { ports: [{ name: 'a', port: 80 }, { name: 'a', port: 81 }] }), 'spec.ports[1].name'],
      [svcBody('noname', { ports: [{ port: 80 }, { name: 'b', port: 81 }] }), 'spec.ports[0].name'],
      [svcBody('sel', { selector: { app: 'bad value!' } }), 'spec.selector'],
      [svcBody('lbl', {}, { labels: { k: 'v'.repeat(64) } }), 'metadata.labels'],
      [svcBody('lblkey', {}, { labels: { '-bad': 'v' } }), 'metadata.labels'],
      [svcBody('own', {}, { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'd', uid: '' }] }), 'metadata.ownerReferences.uid'],
      [svcBody('own2', {}, { ownerReferences: [{ apiVersion: '', kind: '', name: '', uid: 'u' }] }), 'metadata.ownerReferences.apiVersion'],
    ];
    for (const [body, field] of cases) {
      const { code, status } = await apiError(api.createNamespacedService({ namespace: n, body }));
      expect(code, field).toBe(422);
      expect(status.reason).toBe('Invalid');
      expect(status.details?.kind).toBe('Service');
      expect(status.details?.causes?.map((c) => c.field)).toContain(field);
      expect(status.message).toMatch(/^Service ".*" is invalid: /);
    }
    const one = await apiError(api.createNamespacedService({ namespace: n, body: svcBody('p', { ports: [{ port: 0, targetPort: 1 }] }) }));
    expect(one.status.message).toBe('Service "p" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive');
    expect(one.status.details?.causes).toEqual([
      { reason: 'FieldValueInvalid', message: 'Invalid value: 0: must be between 1 and 65535, inclusive', field: 'spec.ports[0].port' },
    ]);
    const own = await apiError(
      api.createNamespacedService({ namespace: n, body: svcBody('o', {}, { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: '', uid: 'u' }] }) }),
    );
    expect(own.status.message).toBe('Service "o" is invalid: metadata.ownerReferences.name: Invalid value: "": must not be empty');
  });

  it('rejects a namespace mismatch, malformed JSON, wrong kinds and bad content types with 400/415', async () => {
    const n = ns();
    const mismatch = await apiError(api.createNamespacedService({ namespace: n, body: svcBody('m', {}, { namespace: 'other' }) }));
    expect(mismatch.code).toBe(400);
    expect(mismatch.status).toMatchObject({
      reason: 'BadRequest',
      message: 'the namespace of the provided object does not match the namespace sent on the request',
    });
    const post = (body: string, type = 'application/json'): Promise<Response> =>
      fetch(`${emu.url}/api/v1/namespaces/${n}/services`, { method: 'POST', headers: { 'Content-Type': type }, body });
    const malformed = await post('{"metadata": ');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ kind: 'Status', reason: 'BadRequest' });
    const wrongKind = await post(JSON.stringify({ kind: 'Pod', apiVersion: 'v1', metadata: { name: 'x' } }));
    expect(wrongKind.status).toBe(400);
    expect(((await wrongKind.json()) as StatusBody).message).toMatch(/^Pod in version "v1" cannot be handled as a Service/);
    const wrongType = await post(JSON.stringify({ metadata: { name: 'x' }, spec: { ports: [{ port: '80' }] } }));
    expect(((await wrongType.json()) as StatusBody).message).toBe(
      'Service in version "v1" cannot be handled as a Service: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32',
    );
    const yaml = await post('metadata: {name: x}', 'application/yaml');
    expect(yaml.status).toBe(415);
  });

  it('handles unknown fields per fieldValidation (Warn by default, Strict rejects)', async () => {
    const n = ns();
    const body = JSON.stringify({ metadata: { name: 'u' }, spec: { ports: [{ port: 80, bogus: 1 }] } });
    const warn = await fetch(`${emu.url}/api/v1/namespaces/${n}/services`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    expect(warn.status).toBe(201);
    expect(warn.headers.get('warning')).toContain('unknown field \\"spec.ports[0].bogus\\"');
    expect(JSON.stringify(emu.getObject('services', n, 'u'))).not.toContain('bogus');
    const strict = await fetch(`${emu.url}/api/v1/namespaces/${n}/services?fieldValidation=Strict`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: body.replace('"u"', '"u2"'),
    });
    expect(strict.status).toBe(400);
    expect(((await strict.json()) as StatusBody).message).toBe(
      'Service in version "v1" cannot be handled as a Service: strict decoding error: unknown field "spec.ports[0].bogus"',
    );
  });

  it('supports generateName and dryRun', async () => {
    const n = ns();
    const gen = await api.createNamespacedService({ namespace: n, body: { metadata: { generateName: 'svc-' }, spec: { ports: [{ port: 80 }] } } });
    expect(gen.metadata?.name).toMatch(/^svc-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    const dry = await api.createNamespacedService({ namespace: n, body: svcBody('dry'), dryRun: 'All' });
    expect(dry.metadata?.uid).toBeTruthy();
    expect(dry.metadata?.resourceVersion).toBeUndefined();
    expect(emu.getObject('services', n, 'dry')).toBeUndefined();
  });
});

describe('pods', () => {
  it('resets status on create, keeps it on seed, and only /status changes it', async () => {
    const n = ns();
    const created = await api.createNamespacedPod({ namespace: n, body: { ...podBody('p'), status: { phase: 'Running', podIP: '10.0.0.1' } } });
    expect(created.status).toEqual({ phase: 'Pending', qosClass: 'BestEffort' });
    expect(created.spec).toMatchObject({ restartPolicy: 'Always', dnsPolicy: 'ClusterFirst', serviceAccountName: 'default' });
    const seeded = seedPod(n, 's', {}, { phase: 'Running', podIP: '10.0.0.2' });
    expect(seeded.status).toMatchObject({ phase: 'Running', podIP: '10.0.0.2' });
    expect(seedPod(n, 'nostatus').status?.phase).toBe('Pending');

    const current = await api.readNamespacedPod({ namespace: n, name: 's' });
    const replaced = await api.replaceNamespacedPod({
      namespace: n,
      name: 's',
      body: { ...current, metadata: { ...current.metadata, labels: { a: 'b' } }, status: { phase: 'Failed' } },
    });
    expect(replaced.metadata?.labels).toEqual({ a: 'b' });
    expect(replaced.status?.phase).toBe('Running');
    const st = await api.patchNamespacedPodStatus(
      { namespace: n, name: 's', body: { status: { phase: 'Succeeded' }, spec: { nodeName: 'ignored' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    expect(st.status?.phase).toBe('Succeeded');
    expect(st.spec?.nodeName).toBeUndefined();
  });

  it('validates pod names as DNS-1123 subdomains and forbids spec changes', async () => {
    const n = ns();
    await api.createNamespacedPod({ namespace: n, body: podBody('exec-1.driver') });
    const bad = await apiError(api.createNamespacedPod({ namespace: n, body: podBody('Pod_1') }));
    expect(bad.code).toBe(422);
    expect(bad.status.details?.kind).toBe('Pod');
    const noContainers = await apiError(api.createNamespacedPod({ namespace: n, body: { metadata: { name: 'x' }, spec: { containers: [] } } }));
    expect(noContainers.status.message).toBe('Pod "x" is invalid: spec.containers: Required value');
    const forbidden = await apiError(
      api.patchNamespacedPod(
        { namespace: n, name: 'exec-1.driver', body: { spec: { restartPolicy: 'Never' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
    expect(forbidden.code).toBe(422);
    expect(forbidden.status.message).toContain('spec: Forbidden: pod updates may not change fields other than');
  });
});

describe('more of the API surface', () => {
  it('serves implicit namespaces, node ports, strategic container merges and deletecollection', async () => {
    const n = ns();
    const created = await api.createNamespace({ body: { metadata: { name: n, labels: { team: 'spark' } } } });
    expect(created.status?.phase).toBe('Active');
    expect((await apiError(api.createNamespace({ body: { metadata: { name: n } } }))).status.reason).toBe('AlreadyExists');
    expect((await api.readNamespace({ name: 'any-valid-name' })).status?.phase).toBe('Active');
    expect((await apiError(api.createNamespacedPod({ namespace: 'Not_Valid', body: podBody('p') }))).status.message).toBe('namespaces "Not_Valid" not found');
    expect((await api.listNamespace({ labelSelector: 'team=spark' })).items.map((x) => x.metadata?.name)).toEqual([n]);

    const smp = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
    await api.createNamespacedPod({
      namespace: n,
      body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'a', image: 'img:1' }, { name: 'b', image: 'img:1' }] } },
    });
    const p = await api.patchNamespacedPod({ namespace: n, name: 'p', body: { spec: { containers: [{ name: 'b', image: 'img:2' }] } } }, smp);
    expect(p.spec?.containers.map((c) => `${c.name}=${c.image}`)).toEqual(['a=img:1', 'b=img:2']);

    await api.createNamespacedService({ namespace: n, body: svcBody('np') });
    const np = await api.patchNamespacedService({ namespace: n, name: 'np', body: { spec: { type: 'NodePort' } } }, smp);
    expect(np.spec?.ports?.[0]?.nodePort).toBeGreaterThanOrEqual(30000);
    expect(np.spec?.externalTrafficPolicy).toBe('Cluster');
    const back = await api.patchNamespacedService({ namespace: n, name: 'np', body: { spec: { type: 'ClusterIP' } } }, smp);
    expect(back.spec?.ports?.[0]?.nodePort).toBeUndefined();
    expect(back.spec?.externalTrafficPolicy).toBeUndefined();

    seedPod(n, 'x1', { labels: { k: 'yes' } });
    seedPod(n, 'x2', { labels: { k: 'no' } });
    await api.deleteCollectionNamespacedPod({ namespace: n, labelSelector: 'k=yes' });
    expect(emu.listObjects('pods', n).map((o) => (o['metadata'] as k8s.V1ObjectMeta).name)).toEqual(['p', 'x2']);

    // A real quirk kept on purpose: resourceVersion on create is a 500 from the storage layer.
    const rv = await apiError(api.createNamespacedPod({ namespace: n, body: podBody('rv', { resourceVersion: '7' }) }));
    expect(rv).toMatchObject({ code: 500, status: { reason: 'Unknown', message: 'resourceVersion should not be set on objects to be created' } });
  });
});

describe('list', () => {
  it('filters with the full label-selector syntax and field selectors', async () => {
    const n = ns();
    seedPod(n, 'a', { labels: { role: 'executor', app: 'x', tier: '1' } }, { phase: 'Running' });
    seedPod(n, 'b', { labels: { role: 'executor', app: 'y' } }, { phase: 'Succeeded' });
    seedPod(n, 'c', { labels: { role: 'driver', app: 'x' } }, { phase: 'Running' });
    seedPod(n, 'd', {}, { phase: 'Running' });
    const names = async (labelSelector?: string, fieldSelector?: string): Promise<string[]> =>
      (await api.listNamespacedPod({ namespace: n, ...(labelSelector ? { labelSelector } : {}), ...(fieldSelector ? { fieldSelector } : {}) })).items.map(
        (p) => p.metadata?.name ?? '',
      );
    expect(await names()).toEqual(['a', 'b', 'c', 'd']);
    expect(await names('role=executor')).toEqual(['a', 'b']);
    expect(await names('role==executor,app=x')).toEqual(['a']);
    expect(await names('role!=executor')).toEqual(['c', 'd']);
    expect(await names('app in (x, y)')).toEqual(['a', 'b', 'c']);
    expect(await names('app notin (x)')).toEqual(['b', 'd']);
    expect(await names('tier')).toEqual(['a']);
    expect(await names('!tier')).toEqual(['b', 'c', 'd']);
    expect(await names('tier>0')).toEqual(['a']);
    expect(await names(undefined, 'metadata.name=c')).toEqual(['c']);
    expect(await names(undefined, 'status.phase!=Running')).toEqual(['b']);
    expect(await names('app=x', `metadata.namespace=${n},status.phase=Running`)).toEqual(['a', 'c']);

    const bad = await apiError(api.listNamespacedPod({ namespace: n, labelSelector: 'app in (x' }));
    expect(bad.code).toBe(400);
    expect(bad.status.reason).toBe('BadRequest');
    expect(bad.status.message).toMatch(/^unable to parse requirement: /);
    const badKey = await apiError(api.listNamespacedPod({ namespace: n, labelSelector: 'a b' }));
    expect(badKey.status.message).toBe("unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
    const badField = await apiError(api.listNamespacedPod({ namespace: n, fieldSelector: 'spec.foo=bar' }));
    expect(badField.status.message).toBe('field label not supported: spec.foo');
  });

  it('lists across namespaces in etcd key order with list kind and resourceVersion', async () => {
    const n1 = ns();
    const n2 = `${n1}-b`;
    seedPod(n2, 'x', { labels: { sel: n1 } });
    seedPod(n1, 'y', { labels: { sel: n1 } });
    const all = await api.listPodForAllNamespaces({ labelSelector: `sel=${n1}` });
    // "t5-b/x" sorts before "t5/y": '-' < '/'.
    expect(all.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).toEqual([`${n2}/x`, `${n1}/y`]);
    const raw = (await (await fetch(`${emu.url}/api/v1/namespaces/${n1}/pods`)).json()) as {
      kind: string;
      metadata: { resourceVersion: string };
      items: Array<Record<string, unknown>>;
    };
    expect(raw.kind).toBe('PodList');
    expect(Number(raw.metadata.resourceVersion)).toBeGreaterThan(0);
    expect(raw.items[0]?.['kind']).toBeUndefined();
  });

  it('paginates with limit/continue on a consistent snapshot', async () => {
    const n = ns();
    for (const name of ['p5', 'p1', 'p4', 'p2', 'p3', 'p7', 'p6']) seedPod(n, name, { labels: { app: 'x' } });
    const page1 = await api.listNamespacedPod({ namespace: n, limit: 3 });
    expect(page1.items.map((p) => p.metadata?.name)).toEqual(['p1', 'p2', 'p3']);
    expect(page1.metadata?.remainingItemCount).toBe(4);
    const token = page1.metadata?._continue ?? '';
    expect(JSON.parse(Buffer.from(token, 'base64url').toString())).toEqual({
      v: 'meta.k8s.io/v1',
      rv: Number(page1.metadata?.resourceVersion),
      start: 'p3\u0000',
    });
    seedPod(n, 'p35'); // written after the first page: not part of this list
    emu.deleteObject('pods', n, 'p7');
    const page2 = await api.listNamespacedPod({ namespace: n, limit: 3, _continue: token });
    expect(page2.items.map((p) => p.metadata?.name)).toEqual(['p4', 'p5', 'p6']);
    expect(page2.metadata?.resourceVersion).toBe(page1.metadata?.resourceVersion);
    expect(page2.metadata?.remainingItemCount).toBe(1);
    const page3 = await api.listNamespacedPod({ namespace: n, limit: 3, _continue: page2.metadata?._continue ?? '' });
    expect(page3.items.map((p) => p.metadata?.name)).toEqual(['p7']);
    expect(page3.metadata?._continue).toBeUndefined();
    // With a selector the count is unknown, so it is omitted.
    const filtered = await api.listNamespacedPod({ namespace: n, limit: 2, labelSelector: 'app=x' });
    expect(filtered.metadata?._continue).toBeTruthy();
    expect(filtered.metadata?.remainingItemCount).toBeUndefined();

    const garbage = await apiError(api.listNamespacedPod({ namespace: n, limit: 3, _continue: 'not-a-token' }));
    expect(garbage.code).toBe(400);
    const old = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 1, start: 'p1\u0000' })).toString('base64url');
    const expired = await apiError(api.listNamespacedPod({ namespace: n, limit: 3, _continue: old }));
    expect(expired.code).toBe(410);
    expect(expired.status.reason).toBe('Expired');
  });
});

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
      message: 'Operation cannot be fulfilled on services "r": the object has been modified; please apply your changes to the latest version and try again',
      details: { name: 'r', kind: 'services' },
    });
    const same = await api.replaceNamespacedService({ namespace: n, name: 'r', body: v2 });
    expect(same.metadata?.resourceVersion).toBe(v2.metadata?.resourceVersion);
    // No resourceVersion: an unconditional update, allowed for services.
    const { resourceVersion: _rv, ...metaNoRv } = v2.metadata ?? {};
    const uncond = await api.replaceNamespacedService({ namespace: n, name: 'r', body: { ...v2, metadata: { ...metaNoRv, labels: { v: '3' } } } });
    expect(uncond.metadata?.labels).toEqual({ v: '3' });
    const immutable = await apiError(
      api.replaceNamespacedService({ namespace: n, name: 'r', body: { ...uncond, spec: { ...uncond.spec, clusterIP: '10.96.200.200', clusterIPs: undefined } } }),
    );
    expect(immutable.code).toBe(422);
    expect(immutable.status.message).toBe('Service "r" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.200.200"}: may not change once set');
    const missing = await apiError(api.replaceNamespacedService({ namespace: n, name: 'gone', body: svcBody('gone') }));
    expect(missing.code).toBe(404);
  });

  it('applies merge, JSON and strategic merge patches', async () => {
    const n = ns();
    const owner = seedPod(n, 'driver');
    const created = await api.createNamespacedService({
      namespace: n,
      body: svcBody('p', { ports: [{ name: 'a', port: 80 }, { name: 'b', port: 81 }] }, { labels: { keep: '1', drop: '1' } }),
    });
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    const json = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
    const smp = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);

    const m = await api.patchNamespacedService({ namespace: n, name: 'p', body: { metadata: { labels: { drop: null, add: 'x' } } } }, merge);
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
          spec: { ports: [{ port: 91, name: 'renamed' }, { port: 92, name: 'new' }] },
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
      api.patchNamespacedService({ namespace: n, name: 'p', body: { metadata: { resourceVersion: created.metadata?.resourceVersion, labels: { z: '1' } } } }, merge),
    );
    expect(stale.code).toBe(409);
    expect(stale.status.reason).toBe('Conflict');
    const notFound = await apiError(api.patchNamespacedService({ namespace: n, name: 'nope', body: {} }, merge));
    expect(notFound.code).toBe(404);
  });
});

describe('delete and garbage collection', () => {
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
    await api.createNamespacedService({ namespace: n, body: svcBody('shared', {}, { ownerReferences: [ownerRef(driver), { ...ownerRef(other), controller: false }] }) });

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
      body: svcBody('dangling', {}, { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'driver', uid: driver.metadata?.uid ?? '' }] }),
    });
    expect((await apiError(api.readNamespacedService({ namespace: n, name: 'dangling' }))).code).toBe(404);
    // Owners of kinds the emulator does not serve cannot be resolved and are left alone.
    await api.createNamespacedService({
      namespace: n,
      body: svcBody('crd-owned', {}, { ownerReferences: [{ apiVersion: 'sparkoperator.k8s.io/v1beta2', kind: 'SparkApplication', name: 'app', uid: 'x-1' }] }),
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
      api.patchNamespacedService({ namespace: n, name: 'f', body: { metadata: { labels: { a: 'b' } } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch)),
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
    expect(emu.requests[0]).toMatchObject({ method: 'GET', path: `/api/v1/namespaces/${n}/pods`, status: 200, verb: 'list', resource: 'pods' });
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
      ['apiVersion: v1', 'kind: Service', 'metadata:', '  name: svc-k', `  namespace: ${n}`, '  labels: {app: k}', 'spec:', '  selector: {app: k}', '  ports:', `  - {name: bm, port: ${port}}`, ''].join('\n');
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
