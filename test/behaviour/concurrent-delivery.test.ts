/**
 * Two instances of the function (two servers, one API server) handling the same events at the
 * same time, as Knative does when it scales out or redelivers while the first attempt still
 * runs: they converge, never duplicate a Service, and never delete a Service whose executor lives.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import type { RequestRecord } from '../../packages/kube-emulator/index.ts';
import type { Harness } from '../../testkit/harness.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { type RecordedEvent, World, chance, deliver, expectedServicesOf, planApps, rngFrom, shuffle } from '../model/world.ts';
import { postSweep } from '../../testkit/apiserversource.ts';
import { convergenceProblems } from '../../testkit/oracle.ts';
import { NS, auditAndClose, audited, useAudit } from '../support/audited.ts';

useAudit();

const ENV = { COOLDOWN_SECONDS: String(7 * 24 * 3600) };
const RUNS = Number(process.env['CONCURRENCY_RUNS'] ?? 8);
const BASE_SEED = Number(process.env['CONCURRENCY_SEED'] ?? 7_000);

async function twoInstances(): Promise<[Harness, Harness]> {
  const a = await audited(ENV);
  const b = await audited(ENV, { emulator: a.emulator });
  return [a, b];
}

type Svc = { metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> } };

describe('two instances, the same events at once', () => {
  it('the same add, 10 copies on each instance at once: one Service, every answer 2xx', async () => {
    const [a, b] = await twoInstances();
    const appId = sparkAppId(11);
    const driver = a.createPod(driverPod({ namespace: NS, appId, name: 'c-driver' }));
    const exec = a.createPod(
      executorPod({ namespace: NS, appId, execId: '1', name: 'c-exec-1', driver: { name: 'c-driver', uid: driver.metadata.uid! } }),
    );
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).send('add', exec)));
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 200));
    expect(replies.filter((r) => r.type === 'spark-exec-svc.service.created')).toHaveLength(1);
    expect(a.services(NS)).toHaveLength(1);
    expect(replies.filter((r) => r.type !== 'spark-exec-svc.service.created').map((r) => r.type)).toEqual(
      Array(19).fill('spark-exec-svc.service.verified'),
    );
  });

  it('a late add and the delete of the same gone executor, at once on two instances: no Service is made for it', async () => {
    const [a, b] = await twoInstances();
    for (let i = 0; i < 20; i++) {
      const appId = sparkAppId(100 + i);
      const driver = a.createPod(driverPod({ namespace: NS, appId, name: `r${i}-driver` }));
      const exec = a.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId: '1',
          name: `r${i}-exec-1`,
          driver: { name: `r${i}-driver`, uid: driver.metadata.uid! },
        }),
      );
      a.emulator.deleteObject('pods', NS, exec.metadata.name);
      const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
      const replies = await Promise.all([first.send('add', exec), second.send('delete', exec)]);
      expect(replies.map((r) => r.status)).toEqual([200, 200]);
      expect(a.emulator.getObject('services', NS, executorServiceName(appId, '1')), `round ${i}`).toBeUndefined();
    }
    expect(a.emulator.countRequests({ verb: 'create', resource: 'services' })).toBe(0);
  });

  it('an executor that goes while its add is handled on one instance and its delete on the other: the Service ends marked gone', async () => {
    const [a, b] = await twoInstances();
    for (let i = 0; i < 20; i++) {
      const appId = sparkAppId(200 + i);
      const driver = a.createPod(driverPod({ namespace: NS, appId, name: `g${i}-driver` }));
      const exec = a.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId: '1',
          name: `g${i}-exec-1`,
          driver: { name: `g${i}-driver`, uid: driver.metadata.uid! },
        }),
      );
      const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
      const add = first.send('add', exec);
      a.emulator.deleteObject('pods', NS, exec.metadata.name);
      const replies = await Promise.all([add, second.send('delete', exec)]);
      expect(replies.map((r) => r.status)).toEqual([200, 200]);
      // The add may have created the Service (it saw the executor running) or not; either way, after
      // a sweep no unmarked Service of a gone executor is left.
      await postSweep(a.url);
      const svc = a.emulator.getObject('services', NS, executorServiceName(appId, '1')) as Svc | undefined;
      if (svc !== undefined) expect(svc.metadata.annotations?.['spark-exec-svc/executor-gone-at'], `round ${i}`).toBeDefined();
    }
  });

  it(
    `${RUNS} generated lifecycles, every step delivered to both instances concurrently: converge, no duplicates, no live executor loses its Service`,
    async () => {
      for (let run = 0; run < RUNS; run++) {
        const seed = BASE_SEED + run;
        const rng = rngFrom(seed);
        const [a, b] = await twoInstances();
        const apps = planApps(rng, 3, { watched: [NS], prefix: `k${run}x` });
        const world = new World(a.emulator, `c${seed}`);
        const context = `seed ${seed}; reproduce with CONCURRENCY_SEED=${seed} CONCURRENCY_RUNS=1`;
        const violations: string[] = [];
        const serviceToExecutor = new Map<string, string>();
        const deliverBatch = async (events: readonly RecordedEvent[]): Promise<void> => {
          const mark = a.emulator.requests.length;
          const sends = events.flatMap((e) => {
            const to = rng();
            return to < 0.4 ? [deliver(a.url, e), deliver(b.url, e)] : to < 0.7 ? [deliver(a.url, e)] : [deliver(b.url, e)];
          });
          const replies = await Promise.all(sends);
          for (const r of replies) if (r.status !== 200) violations.push(`answer ${r.status}: ${r.text}`);
          // State does not change while a batch is delivered: a delete of the Service of a live executor is a bug.
          for (const [key, rec] of world.executors) serviceToExecutor.set(executorServiceName(rec.app.appId, rec.plan.execId), key);
          violations.push(...deletesOfLiveExecutors(a.emulator.requests.slice(mark), serviceToExecutor, a));
          violations.push(...duplicates(a));
        };
        await world.runAll(apps, rng, async (recorded) => {
          const copies = recorded.flatMap((e) => (chance(rng, 0.3) ? [e, e] : [e]));
          await deliverBatch(shuffle(rng, copies));
        });
        // Redeliver everything once more, all at once: stale events must not undo anything.
        await deliverBatch(shuffle(rng, world.events));
        expect(violations, context).toEqual([]);
        expect(convergenceProblems(a.emulator, expectedServicesOf(world, [NS], 7079), [NS]), context).toEqual([]);
        await auditAndClose(a, b);
      }
    },
    Math.max(30_000, RUNS * 3_000),
  );
});

function deletesOfLiveExecutors(requests: readonly RequestRecord[], serviceToExecutor: Map<string, string>, h: Harness): string[] {
  const problems: string[] = [];
  for (const r of requests) {
    if (r.resource !== 'services' || r.verb !== 'delete' || r.status !== 200 || r.name === undefined) continue;
    const key = serviceToExecutor.get(r.name);
    if (key === undefined) continue;
    const [ns, name] = key.split('/') as [string, string];
    const pod = h.emulator.getObject('pods', ns, name) as
      | { metadata: { ownerReferences?: Array<{ name: string; uid: string }> }; status?: { phase?: string } }
      | undefined;
    if (pod === undefined || pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded') continue;
    const owner = pod.metadata.ownerReferences?.[0];
    const driver =
      owner === undefined
        ? undefined
        : (h.emulator.getObject('pods', ns, owner.name) as { metadata: { uid: string }; status?: { phase?: string } } | undefined);
    const driverLives =
      driver !== undefined &&
      driver.metadata.uid === owner?.uid &&
      driver.status?.phase !== 'Succeeded' &&
      driver.status?.phase !== 'Failed';
    if (driverLives) problems.push(`deleted Service ${r.name} while its executor ${key} lives`);
  }
  return problems;
}

function duplicates(h: Harness): string[] {
  const byExecutor = new Map<string, string[]>();
  for (const raw of h.services(NS)) {
    const svc = raw as unknown as Svc;
    const labels = svc.metadata.labels ?? {};
    if (labels['app.kubernetes.io/managed-by'] !== 'spark-exec-svc') continue;
    const key = `${labels['spark-app-selector']}/${labels['spark-exec-id']}`;
    byExecutor.set(key, [...(byExecutor.get(key) ?? []), svc.metadata.name]);
  }
  return [...byExecutor]
    .filter(([, names]) => names.length > 1)
    .map(([key, names]) => `duplicate Services for ${key}: ${names.join(', ')}`);
}
