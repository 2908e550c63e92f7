/**
 * Retries inside one event, over real HTTP against the emulator's fault injection: what is
 * retried (429, 5xx, 409 Conflict, timeouts, dropped connections, a server that is down for a
 * moment), how (capped exponential backoff with jitter, Retry-After honoured), for how long
 * (the event's deadline, then 503 so that Knative redelivers), and what is never retried.
 */
import { describe, expect, it } from 'vitest';
import type { Harness } from '../../testkit/harness.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, logsMatching, sleep, useAudit } from '../support/audited.ts';

useAudit();

const created = 'spark-exec-svc.service.created';

/** A driver and one opted-in executor in the emulator (seeded directly: no API request). */
function app(h: Harness, seed = 1): { driver: PodBody; exec: PodBody } {
  const appId = sparkAppId(seed);
  const driver = h.createPod(driverPod({ namespace: NS, appId, name: `app${seed}-driver` }));
  const exec = h.createPod(
    executorPod({
      namespace: NS,
      appId,
      execId: '1',
      name: `app${seed}-exec-1`,
      driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
      blockManagerPort: 7079,
    }),
  );
  return { driver, exec };
}

const count = (h: Harness, verb: string, resource = 'services'): number => h.emulator.countRequests({ verb, resource });
const retryLogs = (h: Harness): Array<Record<string, unknown>> => h.logs.filter((l) => l['msg'] === 'retrying API call');

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await work();
  return { value, ms: performance.now() - start };
}

describe('retryable failures are retried within the event', () => {
  it('429 with Retry-After: the retry waits at least that long, then succeeds', async () => {
    const h = await audited();
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 429, retryAfterSeconds: 1 } });
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    expect(reply.type).toBe(created);
    expect(ms).toBeGreaterThanOrEqual(1000);
    expect(count(h, 'create')).toBe(2);
    expect(h.metrics.retries).toBe(1);
    expect(retryLogs(h)[0]).toMatchObject({ status: 429, attempt: 1 });
    expect(Number(retryLogs(h)[0]?.['delayMs'])).toBeGreaterThanOrEqual(1000);
  });

  it('429 whose Retry-After lies past the deadline: answered 503 at once, not after waiting', async () => {
    const h = await audited({ EVENT_DEADLINE_MS: '1500' });
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'status', code: 429, retryAfterSeconds: 30 } });
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    expect(reply.status).toBe(503);
    expect(reply.text).toMatch(/deadline/);
    expect(ms).toBeLessThan(1000);
    expect(count(h, 'create')).toBe(1);
  });

  it.each([500, 503])('%i twice, then success: retried with capped, jittered exponential backoff', async (code) => {
    const h = await audited();
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: 2, fault: { kind: 'status', code } });
    const reply = await h.send('add', exec);
    expect(reply.type).toBe(created);
    expect(count(h, 'create')).toBe(3);
    expect(h.metrics.retries).toBe(2);
    const delays = retryLogs(h).map((l) => Number(l['delayMs']));
    // attempt n waits random × min(2000, 50 × 2^(n-1)) ms
    expect(delays[0]).toBeLessThanOrEqual(50);
    expect(delays[1]).toBeLessThanOrEqual(100);
    expect(retryLogs(h).map((l) => l['status'])).toEqual([code, code]);
  });

  it('a server that keeps failing: backoff grows, is capped, jittered, and the event ends by its deadline with 503', async () => {
    const deadline = 2000;
    const h = await audited({ EVENT_DEADLINE_MS: String(deadline) });
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: Infinity, fault: { kind: 'status', code: 500 } });
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    expect(reply.status).toBe(503);
    expect(JSON.parse(reply.text)).toMatchObject({ error: expect.stringMatching(/deadline exceeded.*create services/) });
    expect(ms).toBeLessThan(deadline + 500);
    const logs = retryLogs(h);
    const delays = logs.map((l) => Number(l['delayMs']));
    logs.forEach((l, i) => expect(delays[i]).toBeLessThanOrEqual(Math.min(2000, 50 * 2 ** (Number(l['attempt']) - 1)) + 1));
    // Bounded: exponential backoff, not a hot loop (a few dozen attempts at most in 2 s).
    expect(count(h, 'create')).toBeLessThan(30);
    expect(count(h, 'create')).toBe(logs.length + 1);
    expect(new Set(delays).size).toBeGreaterThan(1); // jitter
    expect(h.metrics.retries).toBe(logs.length);
    expect(h.metrics.eventsFailed).toBe(1);
  });

  it('409 Conflict on a patch (the cool-down mark): the Service is read again and the decision taken again', async () => {
    const h = await audited();
    const { exec } = app(h);
    expect((await h.send('add', exec)).type).toBe(created);
    h.emulator.deleteObject('pods', NS, exec.metadata.name);
    h.emulator.faults.add({ verb: 'patch', resource: 'services', fault: { kind: 'conflict' } });
    const reply = await h.send('delete', exec);
    expect(reply.type).toBe('spark-exec-svc.service.marked-gone');
    expect(count(h, 'patch')).toBe(2);
    // A stale resourceVersion is not retried blindly: the precondition is there to make us look again.
    expect(h.metrics.retries).toBe(0);
    expect(h.emulator.countRequests({ verb: 'get', resource: 'services' })).toBe(1);
  });

  it('409 Conflict on a drift repair patch: read again, decided again, repaired', async () => {
    const h = await audited();
    const { exec } = app(h);
    expect((await h.send('add', exec)).type).toBe(created);
    const name = `svc-${exec.metadata.labels['spark-app-selector']}-exec-1`;
    h.emulator.patchObject('services', NS, name, { spec: { ports: [{ name: 'x', port: 1, targetPort: 1, protocol: 'TCP' }] } });
    h.emulator.faults.add({ verb: 'patch', resource: 'services', times: 2, fault: { kind: 'conflict' } });
    const other = await audited({}, { emulator: h.emulator }); // no cache: it checks the Service
    const reply = await other.send('update', exec);
    expect(reply.type).toBe('spark-exec-svc.service.patched');
    expect(other.metrics.retries).toBe(0);
    expect(count(other, 'patch')).toBe(3);
    expect((h.emulator.getObject('services', NS, name) as { spec: { ports: Array<{ port: number }> } }).spec.ports[0]?.port).toBe(7079);
  });

  it('a response slower than REQUEST_TIMEOUT_MS is abandoned and retried', async () => {
    const h = await audited({ REQUEST_TIMEOUT_MS: '200' });
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'delay', ms: 1500 } });
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    expect(reply.status).toBe(200);
    expect(['spark-exec-svc.service.created', 'spark-exec-svc.service.verified']).toContain(reply.type);
    expect(ms).toBeGreaterThanOrEqual(200);
    expect(ms).toBeLessThan(1500);
    expect(h.metrics.retries).toBe(1);
    expect(retryLogs(h)[0]).toMatchObject({ status: 0, reason: 'Timeout' });
    expect(h.services(NS)).toHaveLength(1);
  });

  it('a request that hangs is abandoned after REQUEST_TIMEOUT_MS and retried', async () => {
    const h = await audited({ REQUEST_TIMEOUT_MS: '150' });
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'get', resource: 'pods', fault: { kind: 'hang' } });
    h.emulator.faults.add({ verb: 'create', resource: 'services', fault: { kind: 'hang' } });
    const reply = await h.send('add', exec);
    expect(reply.type).toBe(created);
    expect(h.metrics.retries).toBe(2);
    expect(retryLogs(h).map((l) => l['reason'])).toEqual(['Timeout', 'Timeout']);
  });

  it('hangs on every request: the event still ends by its deadline (not deadline + request timeout)', async () => {
    const deadline = 1000;
    const h = await audited({ EVENT_DEADLINE_MS: String(deadline), REQUEST_TIMEOUT_MS: '800' });
    const { exec } = app(h);
    h.emulator.faults.add({ resource: 'services', times: Infinity, fault: { kind: 'hang' } });
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    expect(reply.status).toBe(503);
    expect(ms).toBeLessThan(deadline + 500);
  });

  it('a dropped connection (reset) is retried', async () => {
    const h = await audited();
    const { exec } = app(h);
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: 2, fault: { kind: 'reset' } });
    const reply = await h.send('add', exec);
    expect(reply.type).toBe(created);
    expect(count(h, 'create')).toBe(3);
    expect(h.metrics.retries).toBe(2);
  });

  it('the API server down, then back after 300 ms: the event succeeds within its deadline', async () => {
    const h = await audited({ EVENT_DEADLINE_MS: '5000' });
    const { exec } = app(h);
    await h.emulator.setDown(true);
    const up = sleep(300).then(() => h.emulator.setDown(false));
    const { value: reply, ms } = await timed(() => h.send('add', exec));
    await up;
    expect(reply.type).toBe(created);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(5000);
    expect(h.metrics.retries).toBeGreaterThan(0);
    expect(retryLogs(h).some((l) => l['reason'] === 'ECONNREFUSED')).toBe(true);
    expect(h.services(NS)).toHaveLength(1);
  });

  it('the API server down for longer than the deadline: 503, then the redelivery succeeds', async () => {
    const h = await audited({ EVENT_DEADLINE_MS: '600' });
    const { exec } = app(h);
    await h.emulator.setDown(true);
    const first = await h.send('add', exec);
    expect(first.status).toBe(503);
    await h.emulator.setDown(false);
    expect((await h.send('add', exec)).type).toBe(created);
  });
});

describe('final failures are not retried', () => {
  it.each([
    [400, 'create'],
    [403, 'create'],
    [404, 'create'],
    [422, 'create'],
    [403, 'get'],
    [401, 'get'],
  ] as const)('%i on %s: exactly one API call, answered 500 with the reason', async (code, verb) => {
    const h = await audited();
    const { exec } = app(h);
    // The executor opts in through its driver, so the driver pod is read (get) before the create.
    const pod = exec;
    const resource = verb === 'get' ? 'pods' : 'services';
    h.emulator.faults.add({ verb, resource, fault: { kind: 'status', code } });
    const before = h.emulator.requests.length;
    const reply = await h.send('add', pod);
    expect(reply.status).toBe(500);
    const error = (JSON.parse(reply.text) as { error: string }).error;
    expect(error).toMatch(verb === 'get' ? /get pods "app1-driver" in namespace "spark"/ : /create services "svc-.*" in namespace "spark"/);
    expect(h.emulator.requests.slice(before).filter((r) => r.verb === verb && r.resource === resource)).toHaveLength(1);
    expect(h.metrics.retries).toBe(0);
    expect(logsMatching(h, /event failed/)).toHaveLength(1);
  });

  it('409 AlreadyExists is not an error: the existing Service is read and verified, no retry', async () => {
    const h = await audited();
    const { exec } = app(h);
    await h.send('add', exec);
    const other = await audited({}, { emulator: h.emulator });
    const reply = await other.send('add', exec);
    expect(reply.type).toBe('spark-exec-svc.service.verified');
    expect(other.metrics.retries).toBe(0);
  });
});
