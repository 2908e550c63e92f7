/**
 * Bad and hostile input over real HTTP: a clear 4xx, a log line, the process stays up, and not
 * a single API call. Plus fuzzing: the event parser only ever returns a valid FunctionEvent or
 * throws InvalidEventError; the HTTP endpoint answers random requests below 500.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidEventError, type FunctionEvent, parseFunctionEvent } from '../../shared/model/events.ts';
import { NamespaceName, ObjectName, Pod, isLabelKey, isLabelValue } from '../../shared/model/k8s-objects.ts';
import { podEventType } from '../../testkit/apiserversource.ts';
import type { Harness } from '../../testkit/harness.ts';
import { OPT_IN, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';

useAudit();

const BINARY_ADD = {
  'ce-specversion': '1.0',
  'ce-id': 'e1',
  'ce-source': 'https://10.96.0.1:443',
  'ce-type': podEventType('add'),
  'content-type': 'application/json',
};

async function post(h: Harness, headers: Record<string, string>, body: string | Uint8Array): Promise<{ status: number; error: string }> {
  const response = await fetch(h.url, { method: 'POST', headers, body });
  const text = await response.text();
  let error = '';
  try {
    error = String((JSON.parse(text) as { error?: unknown }).error ?? '');
  } catch {
    error = text;
  }
  return { status: response.status, error };
}

/** The invariant for every bad request: 4xx with a reason, a warn log line saying it, no API call, still serving. */
async function expectRejected(
  h: Harness,
  headers: Record<string, string>,
  body: string | Uint8Array,
  status: number,
  reason: RegExp,
): Promise<void> {
  const before = { requests: h.emulator.requests.length, logs: h.logs.length };
  const reply = await post(h, headers, body);
  const label = `${JSON.stringify(headers).slice(0, 120)} ${typeof body === 'string' ? body.slice(0, 120) : `<${body.length} bytes>`}`;
  expect(reply.status, label).toBe(status);
  expect(reply.error, label).toMatch(reason);
  const lines = h.logs.slice(before.logs).filter((l) => l['level'] === 'warn' && /rejected/.test(String(l['msg'])));
  expect(lines, `log line for ${label}`).toHaveLength(1);
  expect(JSON.stringify(lines[0]), label).toMatch(reason);
  expect(h.emulator.requests.length - before.requests, `API calls for ${label}`).toBe(0);
  expect((await fetch(h.url.replace(/\/$/, '/health/liveness'))).status).toBe(200);
}

const executor = (labels: Record<string, string>, extra: { name?: string; namespace?: string; owner?: string } = {}) => {
  const pod = executorPod({
    namespace: extra.namespace ?? NS,
    appId: sparkAppId(5),
    execId: '1',
    driver: { name: extra.owner ?? 'app-driver', uid: 'd-uid' },
    blockManagerPort: 7079,
    optIn: true,
  });
  pod.metadata.uid = 'e-uid';
  if (extra.name !== undefined) pod.metadata.name = extra.name;
  Object.assign(pod.metadata.labels, labels);
  return pod;
};

describe('malformed requests', () => {
  it('malformed JSON, wrong content types, missing attributes: 400 with the reason, zero API calls', async () => {
    const h = await audited();
    const { 'ce-id': _id, ...noId } = BINARY_ADD;
    const { 'ce-source': _source, ...noSource } = BINARY_ADD;
    const { 'ce-type': _type, ...noType } = BINARY_ADD;
    const { 'ce-specversion': _sv, ...noSpecversion } = BINARY_ADD;
    const pod = JSON.stringify(executor({}));
    const structured = (event: Record<string, unknown>) =>
      JSON.stringify({
        specversion: '1.0',
        id: 'e1',
        source: 's',
        type: podEventType('add'),
        datacontenttype: 'application/json',
        ...event,
      });
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ 'content-type': 'application/cloudevents+json' }, '{not json', /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, '', /CloudEvent/],
      [BINARY_ADD, '{"metadata": ', /JSON|CloudEvent/],
      [BINARY_ADD, '', /CloudEvent|no data|not a JSON object/],
      [{ ...BINARY_ADD, 'content-type': 'application/xml' }, '<pod name="x"/>', /not a JSON object/],
      [{ ...BINARY_ADD, 'content-type': 'text/plain' }, 'hello', /not a JSON object/],
      [{ 'content-type': 'text/plain' }, pod, /CloudEvent/],
      [{}, pod, /CloudEvent/],
      [{ 'content-type': 'application/cloudevents-batch+json' }, `[${structured({ data: executor({}) })}]`, /batch|CloudEvent/],
      [noId, pod, /CloudEvent/],
      [noSource, pod, /CloudEvent/],
      [noType, pod, /CloudEvent/],
      [noSpecversion, pod, /CloudEvent/],
      [{ ...BINARY_ADD, 'ce-specversion': '0.1' }, pod, /CloudEvent/],
      [{ ...BINARY_ADD, 'ce-id': '' }, pod, /CloudEvent|attributes/],
      [{ 'content-type': 'application/cloudevents+json' }, structured({ id: undefined }), /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, structured({ type: 42 }), /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, structured({ source: '' }), /CloudEvent/],
      [{ 'content-type': 'application/cloudevents+json' }, structured({ data: 'not-json-object' }), /JSON object|Kubernetes object/],
    ];
    for (const [headers, body, reason] of cases) await expectRejected(h, headers, body, 400, reason);
  });

  it('payloads that are not Pods: 400 (or, for a valid object of another kind, 2xx ignored) with zero API calls', async () => {
    const h = await audited();
    for (const body of ['42', '"a string"', 'null', '[]', '[{"kind":"Pod"}]', '{"metadata":"x"}', '{"metadata":{"labels":"x"}}', 'true']) {
      await expectRejected(h, BINARY_ADD, body, 400, /Kubernetes object|JSON object|no data|invalid Pod/);
    }
    const noUid = executor({});
    delete noUid.metadata.uid;
    await expectRejected(h, BINARY_ADD, JSON.stringify(noUid), 400, /no metadata.uid/);
    const noName = executor({}) as unknown as { metadata: Record<string, unknown> };
    delete noName.metadata['name'];
    await expectRejected(h, BINARY_ADD, JSON.stringify(noName), 400, /invalid Pod/);
    await expectRejected(h, BINARY_ADD, JSON.stringify({ ...executor({}), spec: { containers: 'none' } }), 400, /invalid Pod/);
    // Reference mode: the data must be an object reference.
    await expectRejected(
      h,
      { ...BINARY_ADD, 'ce-type': podEventType('add', 'ref') },
      JSON.stringify({ kind: 'Pod', name: '../x', namespace: NS, apiVersion: 'v1' }),
      400,
      /object reference/,
    );
    // Documented: a valid object of another kind (or not a Spark pod) is acknowledged and ignored, with no API call.
    const before = h.emulator.requests.length;
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'x', namespace: NS, uid: 'u', labels: { 'spark-role': 'executor' } },
    };
    expect((await post(h, BINARY_ADD, JSON.stringify(service))).status).toBe(200);
    expect(
      (
        await post(
          h,
          { ...BINARY_ADD, 'ce-type': podEventType('add', 'ref') },
          JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', namespace: NS }),
        )
      ).status,
    ).toBe(200);
    expect((await post(h, { ...BINARY_ADD, 'ce-type': 'com.example.other' }, '{}')).status).toBe(200);
    expect(h.emulator.requests.length).toBe(before);
  });

  it('enormous payloads: 413 whether the size is declared or streamed, zero API calls', async () => {
    const h = await audited({ MAX_BODY_BYTES: '65536' });
    const big = JSON.stringify({ ...executor({}), padding: 'x'.repeat(70_000) });
    await expectRejected(h, BINARY_ADD, big, 413, /exceeds the limit of 65536 bytes/);
    // Chunked: no content-length, the limit is enforced while reading.
    const before = { requests: h.emulator.requests.length, logs: h.logs.length };
    const chunk = new TextEncoder().encode('x'.repeat(16_384));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 64) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const response = await fetch(h.url, { method: 'POST', headers: BINARY_ADD, body: stream, duplex: 'half' } as RequestInit & {
      duplex: 'half';
    });
    expect(response.status).toBe(413);
    expect(await response.text()).toMatch(/exceeds the limit/);
    expect(h.logs.slice(before.logs).some((l) => l['level'] === 'warn' && /exceeds the limit/.test(String(l['error'])))).toBe(true);
    expect(h.emulator.requests.length).toBe(before.requests);
    // At the limit is fine.
    const fits = executor({}, { namespace: 'elsewhere' });
    const room = 65536 - Buffer.byteLength(JSON.stringify({ ...fits, metadata: { ...fits.metadata, annotations: { pad: '' } } }));
    const atLimit = JSON.stringify({ ...fits, metadata: { ...fits.metadata, annotations: { pad: 'x'.repeat(room) } } });
    expect(Buffer.byteLength(atLimit)).toBe(65536);
    expect((await post(h, BINARY_ADD, atLimit)).status).toBe(200);
  });
});

describe('hostile labels, names and references', () => {
  const hostile = [
    'a,b=c',
    'x!=y',
    '../',
    '..',
    'a\nb',
    'x'.repeat(64),
    'ü',
    'spärk',
    '-a',
    'a-',
    'a b',
    '$(reboot)',
    "'; DROP TABLE",
    'a/b',
    'a=b',
    'in (x)',
    '%2F..',
    '\u0000',
    'a\u202eb',
  ];

  it('invalid values for spark-app-selector / spark-exec-id / spark-role: 400, zero API calls', async () => {
    const h = await audited();
    for (const value of hostile) {
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({ 'spark-app-selector': value })), 400, /invalid Pod/);
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({ 'spark-exec-id': value })), 400, /invalid Pod/);
    }
    // An invalid label key anywhere on a Spark pod.
    for (const key of ['a b', '../x', 'x/', '/x', 'ü', `${'k'.repeat(64)}`, 'a,b', 'a=b']) {
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({ [key]: 'v' })), 400, /invalid Pod/);
    }
  });

  it('invalid namespaces, pod names and owner names (path traversal): 400, zero API calls', async () => {
    const h = await audited();
    for (const namespace of ['../kube-system', 'Spark', 'a/b', '', '..', 'x'.repeat(64)]) {
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({}, { namespace })), 400, /invalid Pod/);
    }
    for (const name of ['../x', '..', '.', 'a/b', 'A', 'a b', '', 'x'.repeat(254)]) {
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({}, { name })), 400, /invalid Pod/);
    }
    for (const owner of ['..', '.', '../../api/v1/namespaces/kube-system/pods/x', 'a/b', '', 'UPPER']) {
      await expectRejected(h, BINARY_ADD, JSON.stringify(executor({}, { owner })), 400, /invalid Pod/);
    }
  });

  it('hostile but valid app ids and exec ids: the Service name is still a valid DNS label, selectors exact', async () => {
    const h = await audited();
    for (const [appId, execId] of [
      ['A.b_C', '1'],
      ['x'.repeat(63), '2'],
      ['a..b', '3'],
      ['a__b', '40'],
    ] as const) {
      const driver = h.createPod(driverPod({ namespace: NS, appId, name: `d-${execId.toLowerCase().replace('.', '-')}` }));
      const pod = h.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId,
          name: `e-${execId.toLowerCase().replace('.', '-')}`,
          driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
        }),
      );
      const reply = await h.send('add', pod);
      expect(reply.type, appId).toBe('spark-exec-svc.service.created');
      const name = reply.data!.outcomes[0]!.service;
      expect(name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
      expect(name.length).toBeLessThanOrEqual(63);
      const svc = h.emulator.getObject('services', NS, name) as { spec: { selector: Record<string, string> } };
      expect(svc.spec.selector).toEqual({ 'spark-app-selector': appId, 'spark-exec-id': execId });
    }
  });

  it('exec ids Spark never assigns (not a decimal integer ≥ 1) are ignored with a reason, with zero API calls', async () => {
    const h = await audited();
    for (const execId of ['Z.9', '0', '01', '1.0', 'driver', '1a', '1_2']) {
      const before = h.emulator.requests.length;
      const reply = await h.send('add', executor({ 'spark-exec-id': execId }));
      expect(reply.status, execId).toBe(200);
      expect(reply.data, execId).toMatchObject({ action: 'ignored', reason: expect.stringContaining('not an executor id Spark assigns') });
      expect(h.emulator.requests.length, execId).toBe(before);
    }
  });

  it('hostile block-manager port annotations: skipped with a reason, no write', async () => {
    const h = await audited();
    const driver = h.createPod(driverPod({ namespace: NS, appId: sparkAppId(5), name: 'app-driver' }));
    let n = 0;
    for (const port of ['7079,1', '../', '1e3', '-1', '0', '65536', '99999999999', ' ', 'x', '7079 1']) {
      const body = executorPod({
        namespace: NS,
        appId: sparkAppId(5),
        execId: String(++n),
        name: `port-${n}`,
        driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
        optIn: true,
      });
      body.metadata.annotations = { 'spark-exec-svc/block-manager-port': port, ...OPT_IN };
      const pod = h.createPod(body);
      const before = h.emulator.requests.length;
      const reply = await post(h, BINARY_ADD, JSON.stringify(pod));
      expect(reply.status, port).toBe(200);
      expect(
        h.emulator.requests.slice(before).filter((r) => r.verb !== 'get' && r.verb !== 'list'),
        port,
      ).toEqual([]);
    }
    expect(h.logs.filter((l) => l['action'] === 'skipped' && l['level'] === 'warn')).toHaveLength(10);
  });
});

// ---- fuzzing ----------------------------------------------------------------------------------

const TYPES = [
  'dev.knative.sources.ping',
  ...['add', 'update', 'delete'].flatMap((v) => [podEventType(v as 'add'), podEventType(v as 'add', 'ref')]),
  'dev.knative.apiserver.resource.bogus',
  'dev.knative.apiserver.ref.',
];

const labelValue = fc.oneof(
  fc.constantFrom('executor', 'driver', 'spark-1', '1', '', 'true', 'a,b=c', '..', 'ü', 'x'.repeat(64), 'A.b_C'),
  fc.string({ maxLength: 70 }),
);
const labelKey = fc.oneof(
  fc.constantFrom('spark-role', 'spark-app-selector', 'spark-exec-id', 'spark-exec-svc/enabled', 'a/b', '/x', '__proto__', 'constructor'),
  fc.string({ maxLength: 70 }),
);
const name = fc.oneof(fc.constantFrom('spark-pi-exec-1', 'd', '..', '.', 'a/b', 'A', ''), fc.string({ maxLength: 40 }));
const podLike = fc.record(
  {
    apiVersion: fc.constantFrom('v1', 'v2', undefined),
    kind: fc.oneof(fc.constantFrom('Pod', 'Service', undefined), fc.string()),
    metadata: fc.record(
      {
        name,
        namespace: fc.oneof(fc.constantFrom('spark', 'other', '..', ''), fc.string({ maxLength: 70 })),
        uid: fc.oneof(fc.string(), fc.constant(undefined)),
        labels: fc.oneof(fc.dictionary(labelKey, labelValue, { maxKeys: 6 }), fc.anything()),
        annotations: fc.oneof(fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }), fc.anything()),
        ownerReferences: fc.oneof(
          fc.array(
            fc.record({
              apiVersion: fc.constantFrom('v1', 'apps/v1'),
              kind: fc.constantFrom('Pod', 'ReplicaSet'),
              name,
              uid: fc.string(),
              controller: fc.boolean(),
            }),
            { maxLength: 2 },
          ),
          fc.anything(),
        ),
        deletionTimestamp: fc.oneof(fc.constant(undefined), fc.constant(null), fc.string(), fc.integer()),
      },
      { requiredKeys: [] },
    ),
    spec: fc.oneof(
      fc.record({ containers: fc.array(fc.record({ name: fc.string(), env: fc.anything() }), { maxLength: 2 }) }),
      fc.anything(),
    ),
    status: fc.oneof(fc.record({ phase: fc.constantFrom('Running', 'Failed', 'Succeeded', 'Pending') }), fc.anything()),
  },
  { requiredKeys: [] },
);
const refLike = fc.record(
  {
    apiVersion: fc.constantFrom('v1', 'v1', 'apps/v1'),
    kind: fc.constantFrom('Pod', 'Pod', 'Deployment'),
    name: fc.oneof({ arbitrary: fc.constantFrom('spark-pi-exec-1', 'd'), weight: 3 }, { arbitrary: name, weight: 1 }),
    namespace: fc.oneof(
      { arbitrary: fc.constant('spark'), weight: 3 },
      { arbitrary: fc.constantFrom('..', 'A', ''), weight: 1 },
      { arbitrary: fc.string(), weight: 1 },
    ),
  },
  { requiredKeys: [] },
);
const data = fc.oneof(
  { arbitrary: podLike, weight: 3 },
  { arbitrary: podLike.map((p) => JSON.stringify(p)), weight: 1 },
  { arbitrary: podLike.map((p) => new TextEncoder().encode(JSON.stringify(p))), weight: 1 },
  { arbitrary: refLike, weight: 3 },
  { arbitrary: fc.anything(), weight: 1 },
  { arbitrary: fc.string(), weight: 1 },
  { arbitrary: fc.json(), weight: 1 },
);
const cloudEventLike = fc.record({
  id: fc.oneof(fc.constant('e1'), fc.string()),
  type: fc.oneof({ arbitrary: fc.constantFrom(...TYPES), weight: 4 }, { arbitrary: fc.string(), weight: 1 }),
  source: fc.oneof(fc.constant('s'), fc.string()),
  data: fc.oneof(data, fc.constant(undefined)),
  data_base64: fc.oneof(
    fc.constant(undefined),
    fc.base64String(),
    podLike.map((p) => Buffer.from(JSON.stringify(p)).toString('base64')),
  ),
});

/** What a FunctionEvent must be, whatever the input was. */
function checkFunctionEvent(event: FunctionEvent): void {
  switch (event.kind) {
    case 'sweep':
      return;
    case 'ignored':
      expect(typeof event.reason).toBe('string');
      return;
    case 'pod-ref':
      expect(['add', 'update', 'delete']).toContain(event.verb);
      expect(NamespaceName.safeParse(event.namespace).success).toBe(true);
      expect(ObjectName.safeParse(event.name).success).toBe(true);
      return;
    case 'pod': {
      expect(['add', 'update', 'delete']).toContain(event.verb);
      expect(Pod.safeParse(event.pod).success).toBe(true);
      const { metadata } = event.pod;
      expect(typeof metadata.uid).toBe('string');
      expect(NamespaceName.safeParse(metadata.namespace).success).toBe(true);
      expect(ObjectName.safeParse(metadata.name).success).toBe(true);
      for (const [k, v] of Object.entries(metadata.labels ?? {})) expect(isLabelKey(k) && isLabelValue(v)).toBe(true);
      expect(['driver', 'executor']).toContain(metadata.labels?.['spark-role']);
      for (const owner of metadata.ownerReferences ?? [])
        if (owner.kind === 'Pod') expect(ObjectName.safeParse(owner.name).success).toBe(true);
      return;
    }
    default:
      throw new Error(`unknown FunctionEvent ${JSON.stringify(event)}`);
  }
}

describe('fuzzing', () => {
  it('parseFunctionEvent returns a valid FunctionEvent or throws InvalidEventError, nothing else', () => {
    const kinds = new Map<string, number>();
    fc.assert(
      fc.property(cloudEventLike, (event) => {
        let parsed: FunctionEvent;
        try {
          parsed = parseFunctionEvent(event);
        } catch (error) {
          if (!(error instanceof InvalidEventError)) throw error;
          kinds.set('invalid', (kinds.get('invalid') ?? 0) + 1);
          return;
        }
        kinds.set(parsed.kind, (kinds.get(parsed.kind) ?? 0) + 1);
        checkFunctionEvent(parsed);
      }),
      { seed: 4_2026, numRuns: Number(process.env['FUZZ_RUNS'] ?? 3000) },
    );
    // The generator reaches every outcome, so the property is not vacuous.
    for (const kind of ['invalid', 'ignored', 'sweep', 'pod-ref']) expect(kinds.get(kind) ?? 0, kind).toBeGreaterThan(0);
  });

  it('parseFunctionEvent on valid Spark pods with hostile-but-valid labels returns a pod event', () => {
    const validValue = fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?$/);
    fc.assert(
      fc.property(validValue, validValue, fc.constantFrom('add', 'update', 'delete'), (appId, execId, verb) => {
        const pod = executorPod({ namespace: NS, appId, execId, name: 'exec-pod', driver: { name: 'd', uid: 'u' } });
        pod.metadata.uid = 'x';
        const parsed = parseFunctionEvent({ id: '1', type: podEventType(verb), source: 's', data: pod });
        expect(parsed.kind).toBe('pod');
        checkFunctionEvent(parsed);
      }),
      { seed: 7, numRuns: 300 },
    );
  });

  it('the HTTP endpoint answers random requests below 500 and stays up', async () => {
    const h = await audited();
    const header = fc.string({ maxLength: 30 }).map((s) => s.replace(/[^\x20-\x7e]/g, '').trim());
    const headers = fc.record(
      {
        'ce-specversion': fc.oneof(fc.constant('1.0'), header),
        'ce-id': header,
        'ce-source': header,
        'ce-type': fc.oneof(fc.constantFrom(...TYPES), header),
        'content-type': fc.constantFrom(
          'application/json',
          'application/cloudevents+json',
          'text/plain',
          'application/cloudevents-batch+json',
          'application/octet-stream',
          '',
        ),
      },
      { requiredKeys: [] },
    );
    const body = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.json(),
      podLike.map((p) => JSON.stringify(p)),
      fc.uint8Array({ maxLength: 200 }),
    );
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(headers, body, async (hdrs, payload) => {
        const clean = Object.fromEntries(Object.entries(hdrs).filter(([, v]) => v !== ''));
        const response = await fetch(h.url, { method: 'POST', headers: clean, body: payload });
        await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        expect([200, 400, 413]).toContain(response.status);
      }),
      { seed: 99, numRuns: Number(process.env['HTTP_FUZZ_RUNS'] ?? 250) },
    );
    expect(statuses.get(400) ?? 0).toBeGreaterThan(0);
    expect((await fetch(h.url.replace(/\/$/, '/health/liveness'))).status).toBe(200);
    expect(h.logs.filter((l) => l['level'] === 'error')).toEqual([]);
  });
});
