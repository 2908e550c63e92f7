import { afterEach, describe, expect, it } from 'vitest';
import type { RequestRecord } from '../../packages/kube-emulator/server.ts';
import { type Harness, passingTime, startHarness } from '../../testkit/harness.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

/**
 * Executors that end together — an application's end, a decommission wave — each send three
 * events (deletionTimestamp, a terminal phase, delete). Issue 11 asks that this termination cost
 * at most 2 API calls per executor, and teardown at most 1.5× a loop that only writes: an ended
 * executor's event also looks at the peers whose Services this process made, and marks every one
 * it finds ended. Written from that specification and the invariant of docs/reliability.md: a
 * Service is marked only when its own executor is ended, never when it runs, is being deleted
 * but runs, or a running pod with the same driver and port still uses it.
 */
const NS = 'spark';
const GONE = 'spark-exec-svc/executor-gone-at';
const HOLD = 'test.spark-exec-svc/hold';

interface Svc {
  metadata: { name: string; resourceVersion: string; annotations?: Record<string, string> };
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** An application of `n` executors, each with its Service made through the function. */
async function application(harness: Harness, n: number, appSeed = 11): Promise<{ appId: string; driver: PodBody; executors: PodBody[] }> {
  const appId = sparkAppId(appSeed);
  const driver = harness.createPod(driverPod({ namespace: NS, appId }));
  const driverRef = { name: driver.metadata.name, uid: driver.metadata.uid! };
  const executors: PodBody[] = [];
  for (let id = 1; id <= n; id++) {
    const body = executorPod({ namespace: NS, appId, execId: String(id), driver: driverRef, blockManagerPort: 7079 });
    executors.push(harness.createPod({ ...body, metadata: { ...body.metadata, finalizers: [HOLD] } } as PodBody));
  }
  for (const pod of executors) expect((await harness.send('add', pod)).status).toBe(200);
  for (let id = 1; id <= n; id++) expect(harness.emulator.getObject('services', NS, serviceName(appId, id))).toBeDefined();
  return { appId, driver, executors };
}

const serviceName = (appId: string, execId: number): string => `svc-${appId}-exec-${execId}`;
const service = (harness: Harness, name: string): Svc => harness.emulator.getObject('services', NS, name) as unknown as Svc;
const marked = (harness: Harness, name: string): boolean => service(harness, name).metadata.annotations?.[GONE] !== undefined;
const current = (harness: Harness, pod: PodBody): PodBody =>
  harness.emulator.getObject('pods', NS, pod.metadata.name) as unknown as PodBody;
const end = (harness: Harness, pod: PodBody): PodBody =>
  harness.emulator.patchObject('pods', NS, pod.metadata.name, { status: { phase: 'Failed' } }) as unknown as PodBody;
/** The graceful deletion's first step: deletionTimestamp set, the pod still runs (held by a finalizer). */
const startDeleting = (harness: Harness, pod: PodBody): PodBody => {
  harness.emulator.deleteObject('pods', NS, pod.metadata.name);
  return current(harness, pod);
};
const writes = (rs: readonly RequestRecord[]): RequestRecord[] =>
  rs.filter((r) => r.resource === 'services' && r.verb !== 'get' && r.verb !== 'list');
/** The exec ids a pod list asked for (`spark-exec-id in (…)`). */
const listedIds = (r: RequestRecord): string[] => {
  const selector = new URLSearchParams(r.query).get('labelSelector') ?? '';
  return /spark-exec-id in \(([^)]*)\)/.exec(selector)?.[1]?.split(',') ?? [];
};

describe('executors that end together', () => {
  it("an application's end: its 40 executors' three-event terminations cost at most 2 API calls each, every Service marked exactly once", async () => {
    h = await startHarness();
    const app = await application(h, 40);
    h.emulator.resetRequests();
    // Spark's driver deletes every executor (deletionTimestamp, still running) …
    const deleting = app.executors.map((pod) => startDeleting(h!, pod));
    for (const pod of deleting) expect((await h.send('update', pod)).status).toBe(200);
    // … they stop (phase Failed) …
    const failed = app.executors.map((pod) => end(h!, pod));
    for (const pod of failed) expect((await h.send('update', pod)).status).toBe(200);
    // … and the kubelet removes them.
    for (const pod of failed) {
      const last = current(h, pod);
      h.emulator.patchObject('pods', NS, pod.metadata.name, { metadata: { finalizers: null } });
      expect((await h.send('delete', last)).status).toBe(200);
    }
    for (let id = 1; id <= 40; id++) expect(marked(h, serviceName(app.appId, id)), `Service of executor ${id} marked gone`).toBe(true);
    const patches = writes(h.emulator.requests);
    expect(patches.every((r) => r.verb === 'patch' && r.status === 200)).toBe(true);
    expect(new Set(patches.map((r) => r.name)).size).toBe(40);
    expect(patches).toHaveLength(40);
    expect(h.emulator.countRequests()).toBeLessThanOrEqual(2 * 40);
    // Fewer than one look per executor: one list covers an ended executor and up to 31 peers.
    expect(h.emulator.countRequests({ verb: 'list', resource: 'pods' })).toBeLessThanOrEqual(3);
  });

  it('marks only Services whose own executor ended: running, being-deleted and still-claimed peers are left untouched', async () => {
    h = await startHarness();
    const app = await application(h, 12);
    const driverRef = { name: app.driver.metadata.name, uid: app.driver.metadata.uid! };
    // Executors 2–5 ended; 6 is being deleted but runs; 7's pod is gone but a running pod with
    // the same driver and port carries its labels; 8–12 run.
    for (const pod of app.executors.slice(1, 5)) end(h, pod);
    startDeleting(h, app.executors[5]!);
    h.emulator.patchObject('pods', NS, app.executors[6]!.metadata.name, { metadata: { finalizers: null } });
    h.emulator.deleteObject('pods', NS, app.executors[6]!.metadata.name);
    h.createPod(
      executorPod({ namespace: NS, appId: app.appId, execId: '7', driver: driverRef, blockManagerPort: 7079, name: 'copy-of-exec-7' }),
    );
    const before = new Map(
      Array.from({ length: 12 }, (_, k) => [k + 1, service(h!, serviceName(app.appId, k + 1)).metadata.resourceVersion]),
    );
    h.emulator.resetRequests();

    const reply = await h.send('update', end(h, app.executors[0]!));
    expect(reply.status).toBe(200);
    for (let id = 1; id <= 5; id++) expect(marked(h, serviceName(app.appId, id)), `executor ${id} ended`).toBe(true);
    for (let id = 6; id <= 12; id++) {
      const now = service(h, serviceName(app.appId, id));
      expect(now.metadata.resourceVersion, `Service of executor ${id} untouched`).toBe(before.get(id));
      expect(now.metadata.annotations?.[GONE]).toBeUndefined();
    }
    expect(
      writes(h.emulator.requests)
        .map((r) => r.name)
        .sort(),
    ).toEqual([1, 2, 3, 4, 5].map((id) => serviceName(app.appId, id)).sort());
    // The driver read afresh (the peers' marks rest on it), one list of the pods of all twelve
    // slots, then the five marks.
    expect(h.emulator.countRequests({ verb: 'get', resource: 'pods' })).toBe(1);
    expect(h.emulator.countRequests({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(h.emulator.countRequests()).toBe(7);
  });

  it('executors removed one at a time (dynamic allocation): after a look that found no other ended, the next ones read only their own slot for 10 s', async () => {
    let now = Date.parse('2026-12-03T12:00:00Z');
    h = await startHarness(
      {},
      passingTime(() => new Date(now)),
    );
    const app = await application(h, 20);
    const terminate = async (index: number): Promise<RequestRecord[]> => {
      h!.emulator.resetRequests();
      expect((await h!.send('update', end(h!, app.executors[index]!))).status).toBe(200);
      expect(marked(h!, serviceName(app.appId, index + 1))).toBe(true);
      return [...h!.emulator.requests];
    };
    const wide = await terminate(4);
    expect(wide.map((r) => `${r.verb} ${r.resource}`)).toEqual(['get pods', 'list pods', 'patch services']);
    expect(listedIds(wide[1]!)).toHaveLength(20);
    now += 2_000;
    const narrow = await terminate(8);
    expect(narrow.map((r) => `${r.verb} ${r.resource}`)).toEqual(['list pods', 'patch services']);
    expect(listedIds(narrow[0]!)).toEqual(['9']);
    now += 10_000;
    const wideAgain = await terminate(12);
    expect(listedIds(wideAgain.find((r) => r.verb === 'list')!).length).toBeGreaterThan(1);
    // Nothing but the ended executors' Services was ever written.
    expect([...Array(20).keys()].filter((k) => marked(h!, serviceName(app.appId, k + 1))).map((k) => k + 1)).toEqual([5, 9, 13]);
  });

  it('a peer Service changed by someone else since it was remembered is read again, not written blind', async () => {
    h = await startHarness();
    const app = await application(h, 5);
    for (const pod of app.executors) end(h, pod);
    // Another writer touches executor 3's Service: what this process remembers is now stale.
    h.emulator.patchObject('services', NS, serviceName(app.appId, 3), { metadata: { annotations: { 'example.com/owner-team': 'data' } } });
    h.emulator.resetRequests();
    expect((await h.send('update', current(h, app.executors[0]!))).status).toBe(200);
    for (let id = 1; id <= 5; id++) expect(marked(h, serviceName(app.appId, id)), `executor ${id}`).toBe(true);
    expect(service(h, serviceName(app.appId, 3)).metadata.annotations?.['example.com/owner-team']).toBe('data');
    // Its patch was refused on the stale resourceVersion (409), then it was read and marked.
    const svc3 = h.emulator.requests.filter((r) => r.name === serviceName(app.appId, 3));
    expect(svc3.map((r) => `${r.verb} ${r.status}`)).toEqual(['patch 409', 'get 200', 'patch 200']);
  });

  it("a process that did not make the peers' Services looks at the ended executor's slot only", async () => {
    const first = await startHarness();
    try {
      const app = await application(first, 6);
      for (const pod of app.executors) end(first, pod);
      h = await startHarness({}, { emulator: first.emulator });
      first.emulator.resetRequests();
      expect((await h.send('update', current(h, app.executors[0]!))).status).toBe(200);
      expect(marked(h, serviceName(app.appId, 1))).toBe(true);
      for (let id = 2; id <= 6; id++) expect(marked(h, serviceName(app.appId, id))).toBe(false);
      expect(writes(first.emulator.requests)).toHaveLength(1);
    } finally {
      await h?.close();
      h = undefined;
      await first.close();
    }
  });
});
