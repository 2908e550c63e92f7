/**
 * Delivery as the real sender behaves (knative/eventing pkg/adapter/apiserver with cloudevents
 * sdk-go): one event at a time per namespace, each waited for; 5 retries, 50 ms × 2^n apart, only
 * on network errors and 404/413/425/429/502/503/504; then the event is dropped. The defaults
 * must keep one failing event from stalling its namespace for more than 15 s, every transient
 * failure must be answered with a code the sender retries, and no event may do unbounded work.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../testkit/harness.ts';
import { AdapterSender, type AttemptStatus, podEvent, postSweep } from '../../testkit/apiserversource.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

const NS = 'spark';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

interface Sent {
  readonly statuses: readonly AttemptStatus[];
  readonly elapsedMs: number;
  readonly delivered: boolean;
}

/** The ApiServerSource adapter's send: its event, its headers, its retry policy (testkit/apiserversource.ts). */
async function adapterSend(url: string, verb: 'add' | 'update' | 'delete', pod: PodBody): Promise<Sent> {
  const sender = new AdapterSender(url);
  try {
    const delivery = await sender.send(podEvent(verb, pod));
    return { statuses: delivery.statuses, elapsedMs: delivery.ms, delivered: delivery.delivered };
  } finally {
    sender.close();
  }
}

function app(harness: Harness, seed: number): { driver: PodBody; exec: (id: string) => PodBody } {
  const appId = sparkAppId(seed);
  const driver = harness.createPod(driverPod({ namespace: NS, appId, name: `d${seed}-driver` }));
  const exec = (id: string): PodBody =>
    harness.createPod(
      executorPod({
        namespace: NS,
        appId,
        execId: id,
        name: `d${seed}-exec-${id}`,
        driver: { name: driver.metadata.name, uid: driver.metadata.uid! },
      }),
    );
  return { driver, exec };
}

describe('deadlines fit the one-at-a-time sender', () => {
  it('with the API server down, one event stalls its namespace ≤ 15 s with the defaults, then is dropped (the sweep repairs later)', {
    timeout: 30_000,
  }, async () => {
    h = await startHarness({ EVENT_DEADLINE_MS: '', REQUEST_TIMEOUT_MS: '' }); // the defaults
    expect(h.config.eventDeadlineMs).toBe(1_500);
    const { exec } = app(h, 1);
    const pod = exec('1');
    await h.emulator.setDown(true);
    const sent = await adapterSend(h.url, 'add', pod);
    await h.emulator.setDown(false);
    expect(sent.statuses).toEqual([503, 503, 503, 503, 503, 503]);
    expect(sent.delivered).toBe(false);
    expect(sent.elapsedMs).toBeLessThanOrEqual(15_000);
    console.log(
      `delivery: API server down, one event stalled its namespace ${(sent.elapsedMs / 1000).toFixed(1)} s (6 tries × ${h.config.eventDeadlineMs} ms + backoff)`,
    );
    // The next event of the namespace goes through once the API server is back.
    expect((await adapterSend(h.url, 'add', exec('2'))).statuses).toEqual([200]);
  });

  it('a transient failure inside an event is answered with a code the sender retries, and the retry succeeds', async () => {
    h = await startHarness();
    const { exec } = app(h, 2);
    const pod = exec('1');
    // The API server is away for longer than one event's budget, then back.
    await h.emulator.setDown(true);
    setTimeout(() => void h?.emulator.setDown(false), h.config.eventDeadlineMs + 300);
    const sent = await adapterSend(h.url, 'add', pod);
    expect(sent.statuses[0]).toBe(503);
    expect(sent.statuses.every((s) => s === 503 || s === 200)).toBe(true);
    expect(sent.delivered).toBe(true);
    expect(h.services(NS)).toHaveLength(1);
  });

  it('a final failure (RBAC 403) is answered 500, which the sender does not retry: a retry cannot help', async () => {
    h = await startHarness();
    const { exec } = app(h, 3);
    h.emulator.faults.add({ verb: 'create', resource: 'services', times: 10, fault: { kind: 'status', code: 403 } });
    const sent = await adapterSend(h.url, 'add', exec('1'));
    expect(sent.statuses).toEqual([500]);
  });

  it('a finished driver with 1,000 Services: the event stays within 2 s at 20 ms per API call; the sweep finishes the rest', {
    timeout: 120_000,
  }, async () => {
    h = await startHarness({ EVENT_DEADLINE_MS: '', REQUEST_TIMEOUT_MS: '', LOG_LEVEL: 'warn' });
    const { driver } = app(h, 4);
    const appId = driver.metadata.labels['spark-app-selector']!;
    for (let i = 1; i <= 1000; i++) {
      h.emulator.seed({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {
          name: `svc-${appId}-exec-${i}`,
          namespace: NS,
          labels: { 'app.kubernetes.io/managed-by': 'spark-exec-svc', 'spark-app-selector': appId, 'spark-exec-id': String(i) },
          annotations: {
            'spark-exec-svc/executor-pod': `gone-${i}`,
            'spark-exec-svc/executor-uid': `gone-uid-${i}`,
            'spark-exec-svc/driver-pod': driver.metadata.name,
          },
          ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: driver.metadata.name, uid: driver.metadata.uid!, controller: true }],
        },
        spec: {
          selector: { 'spark-app-selector': appId, 'spark-exec-id': String(i) },
          ports: [{ name: 'spark-block-manager', port: 7079 }],
        },
      });
    }
    const finished = h.emulator.patchObject('pods', NS, driver.metadata.name, { status: { phase: 'Succeeded' } }) as unknown as PodBody;
    h.emulator.faults.add({ times: Number.POSITIVE_INFINITY, fault: { kind: 'delay', ms: 20 } });
    const sent = await adapterSend(h.url, 'update', finished);
    expect(sent.statuses).toEqual([200]);
    expect(sent.elapsedMs).toBeLessThan(2_000);
    const left = h.services(NS).length;
    expect(left).toBeLessThan(1000);
    console.log(
      `delivery: finished driver with 1,000 Services at 20 ms per call: the event took ${Math.round(sent.elapsedMs)} ms and deleted ${1000 - left}; the sweep does the rest`,
    );
    h.emulator.faults.clear();
    for (let i = 0; i < 40 && h.services(NS).length > 0; i++) expect((await postSweep(h.url, `s${i}`)).status).toBe(200);
    expect(h.services(NS)).toHaveLength(0);
  });
});

describe('replies', () => {
  it('REPLY_MODE=none answers 204 No Content (a Broker would republish a reply event); the work is done all the same', async () => {
    h = await startHarness({ REPLY_MODE: 'none' });
    const { exec } = app(h, 5);
    const sent = await adapterSend(h.url, 'add', exec('1'));
    expect(sent.statuses).toEqual([204]);
    expect(h.services(NS)).toHaveLength(1);
  });

  it('REPLY_MODE=event (the default) answers with a CloudEvent saying what was done', async () => {
    h = await startHarness();
    const { exec } = app(h, 6);
    const reply = await h.send('add', exec('1'));
    expect(reply.status).toBe(200);
    expect(reply.type).toBe('spark-exec-svc.service.created');
  });
});
