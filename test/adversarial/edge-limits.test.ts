/**
 * Issue 17, class 9: what one request may cost the function, over real HTTP against the running
 * function and the kube-emulator. Each test states the bound from the configuration and measures
 * (CPU time, wall time to close, API requests); none knows how the server enforces it.
 *
 * On the code before the fix: a 1 MiB structured CloudEvent nested ~500,000 levels deep cost
 * ≈ 0.6 s of CPU and was answered 200; a stalled body was held ≈ 60 s with a configured 30 s
 * (REQUEST_RECEIVE_TIMEOUT_MS did not exist); any number of connections were held; every sweep
 * event swept.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { podEventType, postCloudEvent } from '../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import type { Counter } from 'prom-client';

const NS = 'spark';
let h: Harness | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await h?.close();
  h = undefined;
});

/** A structured CloudEvent of about `bytes` whose extension is an array nested as deep as fits. */
function deeplyNested(bytes: number): string {
  const head = '{"specversion":"1.0","id":"deep","source":"/hostile","type":"dev.knative.apiserver.resource.add","ext":';
  const tail = ',"data":{}}';
  const depth = Math.floor((bytes - head.length - tail.length - 1) / 2);
  return `${head}${'['.repeat(depth)}1${']'.repeat(depth)}${tail}`;
}

/** The sum of a counter's series whose labels include `labels`. */
async function count(counter: Counter<string>, labels: Record<string, string>): Promise<number> {
  const { values } = await counter.get();
  return values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x)).reduce((sum, v) => sum + v.value, 0);
}

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

describe('parse cost is bounded before the CloudEvents SDK', () => {
  it('a 1 MiB structured CloudEvent nested 500,000 deep costs little CPU, is refused 400 and makes no API call', async () => {
    h = await startHarness({ LOG_LEVEL: 'warn' });
    const body = deeplyNested(1024 * 1024 - 512);
    // Warm up the path (JIT) with one of each.
    await (await fetch(h.url, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body })).text();
    h.emulator.resetRequests();
    const N = 5;
    const before = cpuMs();
    for (let i = 0; i < N; i++) {
      const response = await fetch(h.url, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body });
      expect(response.status).toBe(400);
      expect(await response.text()).toMatch(/nests deeper than 64 levels/);
    }
    // Test process = client + function: sending 1 MiB is in it too, so the bound is generous;
    // parsing such a body once costs ~300 ms, and the unbounded path parsed it three times.
    const perBody = (cpuMs() - before) / N;
    expect(perBody).toBeLessThan(150);
    expect(h.emulator.requests.length).toBe(0);
    expect(await count(h.metrics.refused, { reason: 'json-too-deep' })).toBe(N + 1);
  });

  it('depth is bounded in binary data, in data_base64, in string data, and the bound is MAX_JSON_DEPTH', async () => {
    h = await startHarness({ MAX_JSON_DEPTH: '16' });
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const binary = {
      'ce-specversion': '1.0',
      'ce-id': '1',
      'ce-source': 's',
      'ce-type': podEventType('add'),
      'content-type': 'application/json',
    };
    const post = async (headers: Record<string, string>, body: string) => {
      const response = await fetch(h!.url, { method: 'POST', headers, body });
      return { status: response.status, text: await response.text() };
    };
    // 16 levels in all is within the bound (data nested 16 deep in binary mode): not refused for depth.
    expect((await post(binary, nested(16))).text).not.toMatch(/nests deeper/);
    expect(await post(binary, nested(17))).toMatchObject({ status: 400, text: expect.stringMatching(/nests deeper than 16/) });
    // Brackets inside strings are not nesting.
    expect((await post(binary, JSON.stringify({ kind: 'Pod', metadata: { name: '['.repeat(1000) } }))).text).not.toMatch(/nests deeper/);
    const structured = { 'content-type': 'application/cloudevents+json' };
    const envelope = (extra: Record<string, unknown>) =>
      JSON.stringify({ specversion: '1.0', id: '1', source: 's', type: podEventType('add'), ...extra });
    expect(await post(structured, envelope({ data_base64: Buffer.from(nested(40)).toString('base64') }))).toMatchObject({
      status: 400,
      text: expect.stringMatching(/data_base64 nests deeper/),
    });
    expect(await post(structured, envelope({ data: nested(40) }))).toMatchObject({
      status: 400,
      text: expect.stringMatching(/data nests deeper/),
    });
    expect(await post({ ...binary, 'content-type': 'text/plain' }, nested(40))).toMatchObject({
      status: 400,
      text: expect.stringMatching(/nests deeper/),
    });
    expect(h.emulator.requests.length).toBe(0);
  });

  it('a normal pod event still works in both content modes, and a JSON scalar as data is a 400', async () => {
    h = await startHarness();
    const appId = sparkAppId(17);
    const driver = h.createPod(driverPod({ namespace: NS, appId }));
    const exec1 = h.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId: '1',
        driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
        blockManagerPort: 7079,
      }),
    );
    const exec2 = h.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId: '2',
        driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
        blockManagerPort: 7079,
      }),
    );
    expect((await h.send('add', exec1, 'binary')).type).toBe('spark-exec-svc.service.created');
    // The first add's list covers exec 2 as well (its batch window): made then, verified now.
    expect((await h.send('add', exec2, 'structured')).type).toBe('spark-exec-svc.service.verified');
    expect(h.services(NS)).toHaveLength(2);
    const scalar = await fetch(h.url, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-id': '1',
        'ce-source': 's',
        'ce-type': podEventType('add'),
        'content-type': 'application/json',
      },
      body: '"{abc"',
    });
    expect(scalar.status).toBe(400);
  });
});

/** Opens a raw connection that sends `head` (and `bodyBytes` of body) and then stalls; resolves when the function closes it. */
function stalled(port: number, head: string, bodyBytes = 0): { closed: Promise<{ afterMs: number; answer: string }>; socket: Socket } {
  const started = performance.now();
  let answer = '';
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  socket.on('data', (d: Buffer) => (answer += d.toString()));
  socket.on('connect', () => {
    socket.write(head);
    if (bodyBytes > 0) socket.write(Buffer.alloc(bodyBytes, 0x20));
  });
  const closed = new Promise<{ afterMs: number; answer: string }>((resolve) =>
    socket.on('close', () => resolve({ afterMs: performance.now() - started, answer })),
  );
  return { closed, socket };
}

describe('request timeouts hold as configured', () => {
  const SLACK_MS = 1_500;

  it('a body that stalls near its end is answered 408 and closed within REQUEST_RECEIVE_TIMEOUT_MS + slack', async () => {
    h = await startHarness({ REQUEST_RECEIVE_TIMEOUT_MS: '2000', LOG_LEVEL: 'warn' });
    const size = 512 * 1024;
    const { closed } = stalled(
      h.fn.port,
      `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/cloudevents+json\r\ncontent-length: ${size}\r\n\r\n`,
      size - 10,
    );
    const { afterMs, answer } = await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(afterMs).toBeGreaterThanOrEqual(2_000 - 50);
    expect(afterMs).toBeLessThan(2_000 + SLACK_MS);
    expect(h.logs.some((l) => l['msg'] === 'request body not received' && l['level'] === 'warn')).toBe(true);
    expect(h.logs.some((l) => l['level'] === 'error')).toBe(false);
    expect(h.emulator.requests.length).toBe(0);
  }, 20_000);

  it('headers that never end are closed within the headers timeout (≤ the receive timeout) + slack', async () => {
    h = await startHarness({ REQUEST_RECEIVE_TIMEOUT_MS: '1500' });
    const { closed } = stalled(h.fn.port, 'POST / HTTP/1.1\r\nhost: x\r\nx-slow: ');
    const { afterMs } = await closed;
    expect(afterMs).toBeLessThan(1_500 + SLACK_MS);
  }, 20_000);

  it('the default bound (10 s) holds too: closed well before the 60 s the old interval allowed', async () => {
    h = await startHarness({});
    expect(h.config.requestReceiveTimeoutMs).toBe(10_000);
    const { closed } = stalled(
      h.fn.port,
      'POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n',
      50,
    );
    const { afterMs, answer } = await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(afterMs).toBeLessThan(10_000 + SLACK_MS);
  }, 30_000);
});

describe('concurrent connections are bounded', () => {
  it('beyond MAX_CONNECTIONS a connection is closed on accept and counted; the held ones end at the receive timeout, then the function serves again', async () => {
    h = await startHarness({ MAX_CONNECTIONS: '8', REQUEST_RECEIVE_TIMEOUT_MS: '1500', LOG_LEVEL: 'warn' });
    const head = 'POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n';
    const conns = Array.from({ length: 20 }, () => stalled(h!.fn.port, head, 500));
    const results = await Promise.all(conns.map((c) => c.closed));
    const dropped = results.filter((r) => r.answer === '');
    const timedOut = results.filter((r) => /^HTTP\/1\.1 408/.test(r.answer));
    expect(timedOut.length).toBeLessThanOrEqual(8);
    expect(timedOut.length + dropped.length).toBe(20);
    expect(dropped.length).toBeGreaterThanOrEqual(12);
    // Dropped at once, not after the timeout.
    for (const r of dropped) expect(r.afterMs).toBeLessThan(1_000);
    expect(await count(h.metrics.refused, { reason: 'too-many-connections' })).toBe(dropped.length);
    expect(h.logs.some((l) => l['msg'] === 'connection refused: MAX_CONNECTIONS reached')).toBe(true);
    expect((await fetch(`${h.url}health/liveness`)).status).toBe(200);
  }, 20_000);
});

describe('sweeps are coalesced', () => {
  const sweep = (url: string, id: string) =>
    postCloudEvent(url, {
      type: 'dev.knative.sources.ping',
      data: { action: 'sweep' },
      id,
      source: '/apis/v1/namespaces/spark/pingsources/sweep',
    });

  it('back-to-back sweep events: one sweeps, the rest are answered 2xx at once, counted, and cost no API request', async () => {
    h = await startHarness({ SWEEP_MIN_INTERVAL_MS: '60000' });
    const appId = sparkAppId(3);
    const driver = h.createPod(driverPod({ namespace: NS, appId }));
    for (let i = 1; i <= 5; i++)
      h.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId: String(i),
          driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
          blockManagerPort: 7079,
        }),
      );
    const first = await sweep(h.url, 'tick-0');
    expect(first.status).toBe(200);
    expect(h.services(NS)).toHaveLength(5);
    const afterFirst = h.emulator.requests.length;
    expect(afterFirst).toBeGreaterThan(0);
    const replies = [];
    for (let i = 1; i <= 20; i++) replies.push(await sweep(h.url, `tick-${i}`));
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(replies.every((r) => r.type === 'spark-exec-svc.swept' && /coalesced/.test(r.data?.reason ?? ''))).toBe(true);
    expect(h.emulator.requests.length).toBe(afterFirst);
    expect(await count(h.metrics.sweepRuns, { result: 'too-soon' })).toBe(20);
  });

  it('concurrent sweep events: one runs, the others are answered without waiting for it', async () => {
    h = await startHarness({ SWEEP_MIN_INTERVAL_MS: '0', REPLY_MODE: 'none' });
    h.emulator.faults.add({ verb: 'list', resource: 'services', fault: { kind: 'delay', ms: 500 } });
    const started = performance.now();
    const slow = sweep(h.url, 'slow');
    await new Promise((r) => setTimeout(r, 100));
    const quick = await Promise.all(Array.from({ length: 5 }, (_, i) => sweep(h!.url, `quick-${i}`)));
    expect(quick.map((r) => r.status)).toEqual(Array(5).fill(204));
    expect(performance.now() - started).toBeLessThan(500);
    expect((await slow).status).toBe(204);
    expect(await count(h.metrics.sweepRuns, { result: 'already-running' })).toBe(5);
  });

  it('after the interval a sweep runs again', async () => {
    h = await startHarness({ SWEEP_MIN_INTERVAL_MS: '300' });
    await sweep(h.url, 'a');
    const afterFirst = h.emulator.requests.length;
    await new Promise((r) => setTimeout(r, 350));
    const again = await sweep(h.url, 'b');
    expect(again.data?.reason ?? '').not.toMatch(/coalesced/);
    expect(h.emulator.requests.length).toBeGreaterThan(afterFirst);
  });
});
