/**
 * Reading through real HTTP: discovery, Services created with their defaults and read back, pods,
 * the rest of the API surface the function and kubectl use, and lists (selectors, paging).
 */
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { emu, api, ns, type StatusBody, apiError, svcBody, podBody, seedPod } from './support.ts';
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
      [
        svcBody('dupnames', {
          ports: [
            { name: 'a', port: 80 },
            { name: 'a', port: 81 },
          ],
        }),
        'spec.ports[1].name',
      ],
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
      api.createNamespacedService({
        namespace: n,
        body: svcBody('o', {}, { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: '', uid: 'u' }] }),
      }),
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
    const warn = await fetch(`${emu.url}/api/v1/namespaces/${n}/services`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body,
    });
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
    const gen = await api.createNamespacedService({
      namespace: n,
      body: { metadata: { generateName: 'svc-' }, spec: { ports: [{ port: 80 }] } },
    });
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
    const created = await api.createNamespacedPod({
      namespace: n,
      body: { ...podBody('p'), status: { phase: 'Running', podIP: '10.0.0.1' } },
    });
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
    const noContainers = await apiError(
      api.createNamespacedPod({ namespace: n, body: { metadata: { name: 'x' }, spec: { containers: [] } } }),
    );
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
    expect((await apiError(api.createNamespacedPod({ namespace: 'Not_Valid', body: podBody('p') }))).status.message).toBe(
      'namespaces "Not_Valid" not found',
    );
    expect((await api.listNamespace({ labelSelector: 'team=spark' })).items.map((x) => x.metadata?.name)).toEqual([n]);

    const smp = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
    await api.createNamespacedPod({
      namespace: n,
      body: {
        metadata: { name: 'p' },
        spec: {
          containers: [
            { name: 'a', image: 'img:1' },
            { name: 'b', image: 'img:1' },
          ],
        },
      },
    });
    const p = await api.patchNamespacedPod(
      { namespace: n, name: 'p', body: { spec: { containers: [{ name: 'b', image: 'img:2' }] } } },
      smp,
    );
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
    expect(rv).toMatchObject({
      code: 500,
      status: { reason: 'Unknown', message: 'resourceVersion should not be set on objects to be created' },
    });
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
      (
        await api.listNamespacedPod({
          namespace: n,
          ...(labelSelector ? { labelSelector } : {}),
          ...(fieldSelector ? { fieldSelector } : {}),
        })
      ).items.map((p) => p.metadata?.name ?? '');
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
