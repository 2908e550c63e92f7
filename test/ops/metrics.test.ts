/**
 * GET /metrics: the function's own Prometheus metrics (shared/ops/metrics.ts) after a day in
 * miniature — creates, an update, a conflict, a retried 503, an RBAC denial, every kind of
 * refused input, hostile event types, a lost executor and a sweep — read back from the
 * exposition, which the real `promtool check metrics` must accept. Label values must stay
 * bounded: no pod, Service or application name, and no event id, ever becomes one.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics, newMetrics } from '../../shared/ops/metrics.ts';
import { withRequestMetrics } from '../../shared/kube/middleware.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { KubeApiError } from '../../shared/kube/errors.ts';
import { FactCache } from '../../shared/engine/memory.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { type PostedReply, podEventType, podSubject, postCloudEvent } from '../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { prometheusTools, runTool } from './prometheus-tools.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

const NS = 'spark';
const tools = prometheusTools('metrics.test');

// ---- a minimal reader of the text exposition ------------------------------------------------------

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) types.set(type[1]!, type[2]!);
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`unparsable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types };
}

/** Sum of the samples of `name` whose labels include `match`. */
function total(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

// ---- the day ---------------------------------------------------------------------------------------

let h: Harness;
let exposition = '';
let contentType = '';
let parsed: ReturnType<typeof parseExposition>;
const replies: Record<string, PostedReply> = {};
/** Strings from events that must never appear in the exposition. */
const secrets: string[] = [];

const sweep = (): Promise<PostedReply> =>
  postCloudEvent(h.url, {
    type: 'dev.knative.sources.ping',
    data: { action: 'sweep' },
    source: `/apis/v1/namespaces/${NS}/pingsources/spark-exec-svc-sweep`,
  });

beforeAll(async () => {
  h = await startHarness({}, { metrics: newMetrics({ processMetrics: true }) });
  const appId = sparkAppId(7);
  const driver = h.createPod(driverPod({ namespace: NS, appId, name: 'metrics-app-driver' }));
  const driverRef = { name: driver.metadata.name, uid: driver.metadata.uid! };
  const executor = (execId: string): PodBody =>
    h.createPod(
      executorPod({ namespace: NS, appId, execId, name: `metrics-app-exec-${execId}`, driver: driverRef, blockManagerPort: 7079 }),
    );
  secrets.push(appId, driver.metadata.name, driver.metadata.uid!);

  replies['driver add'] = await h.send('add', driver);
  // One at a time, each created just before its add (else the first add's list would serve all three).
  const execs: PodBody[] = [];
  for (const id of ['1', '2', '3']) {
    execs.push(executor(id));
    replies[`exec ${id} add`] = await h.send('add', execs[execs.length - 1]!);
  }
  replies['exec 1 update'] = await h.send('update', execs[0]!);

  // Executor 4's name is taken by someone else's Service: a conflict.
  h.emulator.seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: executorServiceName(appId, '4'), namespace: NS },
    spec: { selector: { app: 'other' }, ports: [{ port: 80 }] },
  });
  replies['exec 4 add'] = await h.send('add', executor('4'));
  // Executor 5: the API server is unavailable once (retried inside the event).
  h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 503 } });
  replies['exec 5 add'] = await h.send('add', executor('5'));
  // Executor 6: RBAC denies the create (answered 500, never retried).
  h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 403, message: 'services is forbidden' } });
  replies['exec 6 add'] = await h.send('add', executor('6'));

  // Executor 2 is lost; its Service is marked.
  h.emulator.deleteObject('pods', NS, execs[1]!.metadata.name);
  replies['exec 2 delete'] = await h.send('delete', execs[1]!);

  // Refused inputs, one of each class.
  replies['too large'] = await postRaw(
    { 'ce-id': '1', 'ce-source': 's', 'ce-specversion': '1.0', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
    'x'.repeat(h.config.maxBodyBytes + 1),
  );
  replies['no id'] = await postRaw(
    { 'ce-source': 's', 'ce-specversion': '1.0', 'ce-type': podEventType('add'), 'content-type': 'application/json' },
    '{}',
  );
  replies['batch'] = await postRaw(
    { 'content-type': 'application/cloudevents-batch+json' },
    JSON.stringify([{ id: 'b1', source: 's', specversion: '1.0', type: podEventType('add'), data: {} }]),
  );
  replies['invalid pod'] = await postCloudEvent(h.url, {
    type: podEventType('add'),
    data: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x', namespace: NS, labels: { 'spark-role': 'executor' } } },
    subject: podSubject(NS, 'x'),
  });
  replies['GET /'] = toReply(await fetch(h.url));
  replies['GET /nope'] = toReply(await fetch(new URL('/nope', h.url)));

  // Hostile senders: every event type and id different. Types become `other`, ids nothing.
  for (let i = 0; i < 40; i++) {
    const type = `com.example.attack.${randomUUID()}`;
    const id = `evil-${randomUUID()}`;
    secrets.push(type, id);
    await postCloudEvent(h.url, { type, id, data: { hello: i } });
  }

  replies['sweep'] = await sweep();

  const response = await fetch(new URL('/metrics', h.url));
  expect(response.status).toBe(200);
  contentType = response.headers.get('content-type') ?? '';
  exposition = await response.text();
  parsed = parseExposition(exposition);
}, 60_000);

afterAll(async () => {
  await h?.close();
});

async function postRaw(headers: Record<string, string>, body: string): Promise<PostedReply> {
  return toReply(await fetch(h.url, { method: 'POST', headers, body }));
}

function toReply(response: Response): PostedReply {
  void response.body?.cancel();
  return { status: response.status, headers: response.headers, text: '', data: undefined, type: undefined };
}

const value = (name: string, match: Record<string, string> = {}): number => total(parsed.samples, name, match);

describe('GET /metrics', () => {
  it('the day went as planned (the events the metrics describe)', () => {
    expect(replies['driver add']?.type).toBe('spark-exec-svc.ignored');
    for (const n of [1, 2, 3]) expect(replies[`exec ${n} add`]?.type).toBe('spark-exec-svc.service.created');
    expect(replies['exec 1 update']?.type).toBe('spark-exec-svc.service.verified');
    expect(replies['exec 4 add']?.type).toBe('spark-exec-svc.service.conflict');
    expect(replies['exec 5 add']?.type).toBe('spark-exec-svc.service.created');
    expect(replies['exec 6 add']?.status).toBe(500);
    expect(replies['exec 2 delete']?.type).toBe('spark-exec-svc.service.marked-gone');
    expect([replies['too large']?.status, replies['no id']?.status, replies['batch']?.status, replies['invalid pod']?.status]).toEqual([
      413, 400, 400, 400,
    ]);
    expect([replies['GET /']?.status, replies['GET /nope']?.status]).toEqual([405, 404]);
    expect(replies['sweep']?.type).toBe('spark-exec-svc.swept');
  });

  it('is Prometheus text format 0.0.4, and the real promtool accepts it (`promtool check metrics`)', async (ctx) => {
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    if (tools.skip(['promtool'], 'promtool check metrics')) return ctx.skip();
    const { code, output } = await runTool(tools.require('promtool'), ['check', 'metrics'], { input: exposition });
    expect(output.trim(), 'promtool lint findings').toBe('');
    expect(code).toBe(0);
  });

  it('names follow the conventions: our prefix, _total only on counters, units in the name', () => {
    const families = [...parsed.types.entries()];
    const ours = families.filter(([name]) => name.startsWith('spark_exec_svc_'));
    expect(ours.length).toBeGreaterThanOrEqual(18);
    for (const [name, type] of families) {
      expect(name, name).toMatch(/^(spark_exec_svc|process|nodejs)_[a-z0-9_]+$/);
      expect(name.endsWith('_total'), `${name} (${type}): _total iff counter`).toBe(type === 'counter');
      if (type === 'histogram') expect(name, `${name}: a histogram of seconds`).toMatch(/_seconds$/);
    }
    // Node's default process metrics are there too.
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_gc_duration_seconds',
    ]) {
      expect(parsed.types.has(name), name).toBe(true);
    }
  });

  it('label values are bounded: no pod, app, Service name, event id or sender-chosen type appears', () => {
    for (const secret of [...secrets, 'metrics-app-exec-1', executorServiceName(sparkAppId(7), '1')])
      expect(exposition).not.toContain(secret);
    const typeValues = new Set(parsed.samples.filter((s) => s.name === 'spark_exec_svc_events_total').map((s) => s.labels['type']));
    expect([...typeValues].sort()).toEqual([
      'dev.knative.apiserver.resource.add',
      'dev.knative.apiserver.resource.delete',
      'dev.knative.apiserver.resource.update',
      'dev.knative.sources.ping',
      'other',
      'unknown',
    ]);
    const seriesPerFamily = new Map<string, number>();
    for (const s of parsed.samples)
      if (s.name.startsWith('spark_exec_svc_')) seriesPerFamily.set(s.name, (seriesPerFamily.get(s.name) ?? 0) + 1);
    // 40 distinct hostile types made one `other` series, not forty.
    expect(value('spark_exec_svc_events_total', { type: 'other' })).toBe(40);
    expect(parsed.samples.filter((s) => s.name === 'spark_exec_svc_events_total' && s.labels['type'] === 'other')).toHaveLength(1);
    for (const [name, n] of seriesPerFamily) expect(n, name).toBeLessThan(200);
  });

  it('events by type, outcome and HTTP status code, with their latency', () => {
    const ev = (type: string, outcome: string, code: string) =>
      value('spark_exec_svc_events_total', { type: `dev.knative.apiserver.resource.${type}`, outcome, code });
    expect(ev('add', 'ignored', '200')).toBe(1); // the driver
    expect(ev('add', 'created', '200')).toBe(4);
    expect(ev('update', 'verified', '200')).toBe(1);
    expect(ev('add', 'conflict', '200')).toBe(1);
    expect(ev('add', 'failed', '500')).toBe(1);
    expect(ev('delete', 'marked-gone', '200')).toBe(1);
    expect(ev('add', 'rejected', '413')).toBe(1);
    expect(ev('add', 'rejected', '400')).toBe(2); // no id (type from the header), invalid pod
    expect(value('spark_exec_svc_events_total', { type: 'unknown', outcome: 'rejected', code: '400' })).toBe(1); // the batch
    expect(value('spark_exec_svc_events_total', { type: 'other', outcome: 'ignored', code: '200' })).toBe(40);
    expect(value('spark_exec_svc_events_total', { type: 'dev.knative.sources.ping', outcome: 'swept', code: '200' })).toBe(1);
    const events = value('spark_exec_svc_events_total');
    expect(events).toBe(1 + 4 + 1 + 1 + 1 + 1 + 4 + 40 + 1);
    expect(value('spark_exec_svc_event_duration_seconds_count')).toBe(events);
    expect(value('spark_exec_svc_event_duration_seconds_sum')).toBeGreaterThan(0);
    expect(value('spark_exec_svc_event_duration_seconds_bucket', { le: '+Inf' })).toBe(events);
    expect(value('spark_exec_svc_events_in_flight')).toBe(0);
  });

  it('per-Service outcomes by trigger; identity conflicts are outcome="conflict"', () => {
    expect(value('spark_exec_svc_service_outcomes_total', { outcome: 'created', trigger: 'event' })).toBe(4);
    expect(value('spark_exec_svc_service_outcomes_total', { outcome: 'conflict' })).toBeGreaterThanOrEqual(2); // the event, and the sweep again
    expect(value('spark_exec_svc_service_outcomes_total', { outcome: 'conflict', trigger: 'event' })).toBe(1);
    expect(value('spark_exec_svc_service_outcomes_total', { outcome: 'marked-gone', trigger: 'event' })).toBe(1);
  });

  it('refused inputs by reason class', () => {
    const refused = Object.fromEntries(
      parsed.samples.filter((s) => s.name === 'spark_exec_svc_refused_total').map((s) => [s.labels['reason'], s.value]),
    );
    expect(refused).toEqual({
      'body-too-large': 1,
      'not-a-cloudevent': 1,
      batch: 1,
      'invalid-event': 1,
      'method-not-allowed': 1,
      'unknown-path': 1,
    });
  });

  it('Kubernetes API requests by verb, resource and code (403 = RBAC), timed; retries by code', () => {
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'create', resource: 'services', code: '201' })).toBe(5); // 4 by events, 1 by the sweep
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'create', resource: 'services', code: '503' })).toBe(1);
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'create', resource: 'services', code: '403' })).toBe(1);
    // Executor 4's create met the squatter (AlreadyExists), in the event and again in the sweep.
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'create', resource: 'services', code: '409' })).toBe(2);
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'list', resource: 'pods', code: '200' })).toBeGreaterThan(0);
    expect(value('spark_exec_svc_kube_requests_total', { verb: 'get', resource: 'pods', code: '200' })).toBeGreaterThan(0);
    const requests = value('spark_exec_svc_kube_requests_total');
    expect(requests).toBe(h.emulator.countRequests({}));
    expect(value('spark_exec_svc_kube_request_duration_seconds_count')).toBe(requests);
    expect(value('spark_exec_svc_kube_retries_total', { code: '503' })).toBe(1);
    expect(value('spark_exec_svc_kube_retries_total')).toBe(1);
  });

  it('the sweep: runs by result, duration, repairs by kind, and when it last repaired or found nothing', () => {
    expect(value('spark_exec_svc_sweep_runs_total', { result: 'round-completed' })).toBe(1);
    expect(value('spark_exec_svc_sweep_duration_seconds_count')).toBe(1);
    // Executor 6 (its create was denied) gets its Service from the sweep: a lost event repaired.
    expect(value('spark_exec_svc_sweep_repairs_total', { kind: 'created' })).toBe(1);
    expect(value('spark_exec_svc_sweep_last_repairing_run_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(value('spark_exec_svc_sweep_last_clean_run_timestamp_seconds')).toBe(0);
  });

  it('Services we manage per watched namespace, next to the cap', () => {
    // 4 created by events, 1 by the sweep; counted by the sweep's pass over our Services, kept current by our writes.
    expect(value('spark_exec_svc_managed_services', { service_namespace: NS })).toBe(5);
    expect(value('spark_exec_svc_managed_services_limit', { service_namespace: NS })).toBe(h.config.maxServicesPerNamespace);
  });

  it('fact cache entries, bytes and evictions by kind', () => {
    for (const kind of ['pods', 'services', 'claimants']) {
      expect(
        parsed.samples.some((s) => s.name === 'spark_exec_svc_fact_cache_entries' && s.labels['kind'] === kind),
        kind,
      ).toBe(true);
      expect(value('spark_exec_svc_fact_cache_evictions_total', { kind })).toBe(0);
    }
    expect(value('spark_exec_svc_fact_cache_entries', { kind: 'pods' })).toBeGreaterThan(0);
    expect(value('spark_exec_svc_fact_cache_bytes')).toBeGreaterThan(0);
  });

  it('the small view the soak and older tests read agrees', () => {
    expect(h.metrics.retries).toBe(1);
    expect(h.metrics.eventsHandled).toBe(value('spark_exec_svc_events_total', { code: '200' }));
    // Answered by the handler with an error: the RBAC denial and the invalid pod (the server refuses the rest earlier).
    expect(h.metrics.eventsFailed).toBe(2);
  });
});

describe('sweep ticks that overlap', () => {
  it('a tick that finds a sweep running counts as already-running: no duration, no verdict', async () => {
    const m = newMetrics();
    const other = await startHarness({}, { metrics: m });
    try {
      other.emulator.faults.add({ verb: 'list', resource: 'services', fault: { kind: 'delay', ms: 300 } });
      const tick = () =>
        postCloudEvent(other.url, {
          type: 'dev.knative.sources.ping',
          data: { action: 'sweep' },
          source: '/apis/v1/namespaces/spark/pingsources/sweep',
        });
      const first = tick();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const replies = await Promise.all([first, tick()]);
      expect(replies.map((r) => r.type)).toEqual(['spark-exec-svc.swept', 'spark-exec-svc.swept']);
      const { samples } = parseExposition((await m.exposition()).body);
      expect(total(samples, 'spark_exec_svc_sweep_runs_total', { result: 'round-completed' })).toBe(1);
      expect(total(samples, 'spark_exec_svc_sweep_runs_total', { result: 'already-running' })).toBe(1);
      expect(total(samples, 'spark_exec_svc_sweep_duration_seconds_count')).toBe(1);
    } finally {
      await other.close();
    }
  });
});

describe('metrics units', () => {
  it('each Metrics has its own registry: two function instances in one process do not share counters', async () => {
    const a = newMetrics();
    const b = newMetrics();
    a.recordEvent('dev.knative.sources.ping', 'swept', 200, 0.1);
    const textA = (await a.exposition()).body;
    const textB = (await b.exposition()).body;
    expect(textA).toContain('spark_exec_svc_events_total{type="dev.knative.sources.ping",outcome="swept",code="200"} 1');
    expect(textB).not.toContain('outcome="swept"');
  });

  it('the fact cache gauges follow the cache, evictions included', async () => {
    const m = new Metrics();
    const facts = new FactCache({ entries: 2, bytes: 1 << 20 });
    m.attach({ facts, namespaces: ['a', 'b'], maxServicesPerNamespace: 10 });
    for (const name of ['p1', 'p2', 'p3']) facts.claimants.set(`a/${name}`, { value: [name], at: 0 });
    facts.setServiceCount('a', 7, 0);
    const { samples } = parseExposition((await m.exposition()).body);
    expect(total(samples, 'spark_exec_svc_fact_cache_entries', { kind: 'claimants' })).toBe(2);
    expect(total(samples, 'spark_exec_svc_fact_cache_evictions_total', { kind: 'claimants' })).toBe(1);
    expect(total(samples, 'spark_exec_svc_managed_services', { service_namespace: 'a' })).toBe(7);
    // Not counted yet: no series rather than a made-up 0.
    expect(samples.some((s) => s.name === 'spark_exec_svc_managed_services' && s.labels['service_namespace'] === 'b')).toBe(false);
    expect(total(samples, 'spark_exec_svc_managed_services_limit', { service_namespace: 'b' })).toBe(10);
  });

  it('the instrumented client reports the code the API server sent, and nothing for requests it never sends', async () => {
    const calls: string[] = [];
    const recorder = {
      recordKubeRequest: (verb: string, resource: string, code: string) => void calls.push(`${verb} ${resource} ${code}`),
    };
    const fail = (status: number, reason: string) => Promise.reject(new KubeApiError('x', status, reason, status === 0, undefined));
    const client: KubeClient = {
      readPod: async () => undefined,
      listPods: () => fail(0, 'Timeout'),
      readService: () => fail(502, 'InvalidResponse'),
      listServices: () => fail(0, 'ECONNRESET'),
      createService: async () => ({ outcome: 'exists' }),
      patchService: async () => 'conflict',
      deleteService: async () => 'precondition-failed',
    };
    const measured = withRequestMetrics(client, recorder);
    await measured.readPod(NS, 'gone');
    await measured.readPod(NS, '..'); // never sent by the real client
    await expect(measured.listPods(NS, 'a=b', 10)).rejects.toThrow();
    await expect(measured.readService(NS, 'svc')).rejects.toThrow();
    await expect(measured.listServices(NS, 'a=b', 10)).rejects.toThrow();
    await measured.createService({ metadata: { namespace: NS, name: 'svc' } } as never);
    await measured.patchService(NS, 'svc', {});
    await measured.deleteService(NS, 'svc', 'uid');
    expect(calls).toEqual([
      'get pods 404',
      'list pods timeout',
      'get services invalid-response',
      'list services error',
      'create services 409',
      'patch services 409',
      'delete services 409',
    ]);
  });
});
