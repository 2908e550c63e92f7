/**
 * Issue 16, "What must run against it" 2: delivery as the REAL ApiServerSource receive adapter does
 * it, recorded by a proxy between the adapter and the function. Measures what it sends on start
 * and on re-list, its retries on 503 and on a dead function, compares its requests with our two
 * senders, and shows the sweep repairing what was lost (adapter restarted mid-application,
 * function killed mid-batch). Every figure goes to the run's report (report.json in the log dir).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NS } from '../../test/support/audited.ts';
import { rawGet } from '../adapter/kube-access.ts';
import type { RecordedRequest } from '../adapter/recording-proxy.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { realInvariantProblems } from './invariant-real.ts';
import { waitUntil } from './observe.ts';
import { type Plane, startPlane } from './plane.ts';
import { reportAndStop, writeReportFile } from './report-file.ts';
import { comparisonTable, compareWithOurSenders, type SenderComparison } from './sender-diff.ts';
import { createPod, deletePod, driverPodBody, executorPodBody, markRunning, type PodRef } from './spark-pods.ts';

const report: Record<string, unknown> = {};
let cluster: ScenarioCluster;
let plane: Plane;
let podIpSeq = 10;
const nextPodIp = (): string => `10.244.0.${podIpSeq++}`;

const subjectOf = (name: string): string => `/apis/v1/namespaces/${NS}/pods/${name}`;
const eventsFor = (name: string, from = 0): RecordedRequest[] =>
  plane.proxy.requests.slice(from).filter((r) => r.headers['ce-subject'] === subjectOf(name));
const typeSuffix = (r: RecordedRequest): string => (r.headers['ce-type'] ?? '').replace(/^dev\.knative\.apiserver\.(resource|ref)\./, '');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function serviceOf(appId: string, execId: number): Promise<Record<string, unknown> | undefined> {
  const list = (await rawGet(
    cluster.endpoints.admin,
    `/api/v1/namespaces/${NS}/services?labelSelector=spark-app-selector%3D${appId},spark-exec-id%3D${execId}`,
  )) as {
    items: Array<Record<string, unknown>>;
  };
  return list.items[0];
}

/** A driver and its executors, opted in, created by the tenant; "running" written as a kubelet would when there is none. */
async function application(
  appId: string,
  executors: number,
  opts: { run?: boolean } = {},
): Promise<{ driver: PodRef; executors: PodRef[] }> {
  const tenant = plane.tenant;
  const driver = await createPod(
    tenant,
    NS,
    driverPodBody(NS, appId, `${appId}-driver`, `/tmp/spark-exec-svc-e2e-${process.pid}-${appId}.finished`),
  );
  if (opts.run !== false && !cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, driver.name, nextPodIp());
  const execs: PodRef[] = [];
  for (let i = 1; i <= executors; i++) {
    const pod = await createPod(tenant, NS, executorPodBody(NS, appId, driver, i, `${appId}-exec-${i}`));
    if (opts.run !== false && !cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, pod.name, nextPodIp());
    execs.push(pod);
  }
  return { driver, executors: execs };
}

async function expectInvariant(step: string): Promise<void> {
  expect(await realInvariantProblems(cluster.endpoints.admin, undefined, new Set()), `invariant after: ${step}`).toEqual([]);
}

beforeAll(async () => {
  cluster = await scenarioCluster('delivery', { kubelet: false });
  plane = await startPlane(cluster.endpoints, {
    mode: 'resource',
    functionPort: 18_000 + (process.pid % 1000),
    // Exists before the adapter starts: does the adapter's initial LIST send anything for it?
    beforeAdapter: async (tenant) => {
      const driver = await createPod(
        tenant,
        NS,
        driverPodBody(NS, 'app-before', 'app-before-driver', `/tmp/spark-exec-svc-e2e-${process.pid}-app-before.finished`),
      );
      if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, driver.name, nextPodIp());
      const exec = await createPod(tenant, NS, executorPodBody(NS, 'app-before', driver, 1, 'app-before-exec-1'));
      if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, exec.name, nextPodIp());
    },
  });
  report['adapterEnv'] = plane.adapter().env;
  report['functionEnv'] = plane.fn().env;
  report['functionOverrides'] = plane.fn().overrides;
}, 30 * 60_000);

afterAll(async () => {
  report['requests'] = plane?.proxy.requests.map((r) => ({
    seq: r.seq,
    atMs: r.receivedAtMs,
    type: r.headers['ce-type'],
    subject: r.headers['ce-subject'],
    id: r.headers['ce-id'],
    status: r.status,
    disposition: r.disposition,
    port: r.remotePort,
  }));
  await reportAndStop(cluster, plane, 'delivery-report.json', report);
});

describe('the real ApiServerSource adapter (Resource mode) against the real API server', () => {
  test('on start it sends nothing for pods that already exist; the sweep creates their Services', async () => {
    // The adapter logged "Starting in resilient mode" before its reflectors listed; give the
    // initial LIST and any events it might produce time to arrive.
    await sleep(5_000);
    // An update made after the start (the scheduler's PodScheduled condition when no node fits)
    // is a new change and comes; the pods' existing state is never sent as an add.
    const aboutExisting = plane.proxy.requests.filter((r) => (r.headers['ce-subject'] ?? '').includes('/app-before-'));
    report['eventsOnStartForExistingPods'] = aboutExisting.map((r) => `${r.headers['ce-type']} ${r.headers['ce-subject']}`);
    expect(
      aboutExisting.filter((r) => typeSuffix(r) === 'add'),
      'add events for pods that existed before the adapter started',
    ).toEqual([]);
    // Without a later update (no scheduler), nothing has created it; with one, its event did.
    report['serviceOfExistingExecutorBeforeSweep'] = (await serviceOf('app-before', 1)) !== undefined;
    if (aboutExisting.length === 0) expect(await serviceOf('app-before', 1)).toBeUndefined();
    await plane.sweep();
    const svc = await serviceOf('app-before', 1);
    expect(svc, 'the sweep created the Service of the executor that existed before the adapter').toBeDefined();
    await expectInvariant('sweep after start');
  });

  test('create, status update, delete: one event each, in order, the whole object; compared with our senders', async () => {
    const from = plane.proxy.requests.length;
    const app = await application('app-life', 1);
    const exec = app.executors[0]!;
    await waitUntil('the Service of app-life exec 1', 20_000, () => serviceOf('app-life', 1));
    await deletePod(plane.tenant, NS, exec.name, 0);
    await plane.proxy.waitFor(
      (r) => r.headers['ce-subject'] === subjectOf(exec.name) && typeSuffix(r) === 'delete',
      20_000,
      'delete event',
    );
    const events = eventsFor(exec.name, from);
    report['executorLifeEvents'] = events.map((r) => ({ type: r.headers['ce-type'], status: r.status, bytes: r.body.length }));
    expect(events[0] && typeSuffix(events[0])).toBe('add');
    expect(typeSuffix(events[events.length - 1]!)).toBe('delete');
    // Every event of a pod in Resource mode carries the whole object, the delete too.
    for (const e of events) {
      const obj = JSON.parse(e.body) as { metadata: { name: string; uid: string } };
      expect(obj.metadata.uid).toBe(exec.uid);
    }
    const comparisons: SenderComparison[] = [];
    for (const verb of ['add', 'update', 'delete']) {
      const sample = events.find((e) => typeSuffix(e) === verb);
      if (sample !== undefined) comparisons.push(await compareWithOurSenders(sample));
    }
    report['senderComparisons'] = comparisons;
    writeReportFile(cluster.endpoints.logDir, 'sender-comparison.md', `${comparisons.map(comparisonTable).join('\n\n')}\n`);
    for (const c of comparisons) {
      expect(c.bodyReencodesIdentically, `goJson reproduces the adapter's body of ${c.eventType}`).toBe(true);
    }
    report['ceSource'] = events[0]?.headers['ce-source'];
  });

  test('retries: a 503 is retried with the same id after 0.1, 0.2 … s; after 5 retries the event is dropped and the next one goes', async () => {
    const seen = new Map<string, number>();
    // Two 503s for the next event, then let it through.
    plane.proxy.setFaultPlan((r) => {
      const id = r.headers['ce-id'] ?? '';
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      return n <= 2 ? { respond: 503 } : 'forward';
    });
    const from = plane.proxy.requests.length;
    const app = await application('app-retry', 1, { run: false });
    const add = await plane.proxy.waitFor(
      (r) => r.seq >= from && r.headers['ce-subject'] === subjectOf(app.executors[0]!.name) && r.disposition === 'forwarded',
      20_000,
      'the third attempt',
    );
    const attempts = plane.proxy.requests.filter((r) => r.headers['ce-id'] === add.headers['ce-id']);
    const gaps = attempts.slice(1).map((r, i) => Math.round(r.receivedMonoMs - attempts[i]!.answeredMonoMs!));
    report['retryTwice'] = { attempts: attempts.map((a) => a.status), gapsMs: gaps, sameConnection: attempts.map((a) => a.remotePort) };
    expect(attempts.map((a) => a.status)).toEqual([503, 503, expect.any(Number)]);

    // Always 503 for the next event: how many attempts, how far apart, and what comes after.
    const victimSeen = new Map<string, number>();
    let victimId: string | undefined;
    plane.proxy.setFaultPlan((r) => {
      if (victimId === undefined && r.headers['ce-subject'] === subjectOf('app-retry-exec-2')) victimId = r.headers['ce-id'];
      if (r.headers['ce-id'] === victimId) {
        victimSeen.set(victimId!, (victimSeen.get(victimId!) ?? 0) + 1);
        return { respond: 503 };
      }
      return 'forward';
    });
    const from2 = plane.proxy.requests.length;
    await createPod(plane.tenant, NS, executorPodBody(NS, 'app-retry', app.driver, 2, 'app-retry-exec-2'));
    await createPod(plane.tenant, NS, executorPodBody(NS, 'app-retry', app.driver, 3, 'app-retry-exec-3'));
    await plane.proxy.waitFor(
      (r) => r.seq >= from2 && r.headers['ce-subject'] === subjectOf('app-retry-exec-3'),
      30_000,
      'the event after the dropped one',
    );
    plane.proxy.setFaultPlan(() => 'forward');
    const victim = plane.proxy.requests.filter((r) => r.headers['ce-id'] === victimId);
    const vgaps = victim.slice(1).map((r, i) => Math.round(r.receivedMonoMs - victim[i]!.answeredMonoMs!));
    const next = plane.proxy.requests.find((r) => r.seq >= from2 && r.headers['ce-subject'] === subjectOf('app-retry-exec-3'))!;
    report['retryExhausted'] = {
      attempts: victim.length,
      gapsMs: vgaps,
      nextEventAfterLastAttemptMs: Math.round(next.receivedMonoMs - victim[victim.length - 1]!.answeredMonoMs!),
    };
    expect(victim.length).toBe(6);
    // The sweep repairs what the dropped event did not do (exec 2 has no Service yet if it runs).
    await plane.sweep();
  });

  test('the adapter restarted mid-application: what changed while it was down is not sent; the sweep repairs', async () => {
    const app = await application('app-restart', 2);
    await waitUntil('Services of app-restart', 20_000, async () => ((await serviceOf('app-restart', 2)) === undefined ? undefined : true));
    const adapterStoppedAt = plane.proxy.requests.length;
    await plane.adapter().process.stop(10_000);
    // While the adapter is down: one executor goes, another comes.
    await deletePod(plane.tenant, NS, app.executors[0]!.name, 0);
    const added = await createPod(plane.tenant, NS, executorPodBody(NS, 'app-restart', app.driver, 3, 'app-restart-exec-3'));
    if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, added.name, nextPodIp());
    await plane.restartAdapter();
    await sleep(5_000);
    const afterRestart = plane.proxy.requests.slice(adapterStoppedAt);
    report['eventsOnAdapterRestart'] = afterRestart.map((r) => ({ type: r.headers['ce-type'], subject: r.headers['ce-subject'] }));
    // Updates made after the restart (e.g. the scheduler's PodScheduled condition) are new changes
    // and do come; the delete and the add made while it was down never do.
    const missed = afterRestart.filter(
      (r) =>
        (r.headers['ce-subject'] === subjectOf(app.executors[0]!.name) && typeSuffix(r) === 'delete') ||
        (r.headers['ce-subject'] === subjectOf('app-restart-exec-3') && typeSuffix(r) === 'add'),
    );
    expect(missed, 'events for the delete and the add made while the adapter was down').toEqual([]);
    report['serviceOfExecutorAddedWhileDownBeforeSweep'] = (await serviceOf('app-restart', 3)) !== undefined;
    await plane.sweep();
    expect(await serviceOf('app-restart', 3), 'the sweep created the missing Service').toBeDefined();
    const gone = await serviceOf('app-restart', 1);
    expect(
      gone === undefined ||
        (gone['metadata'] as { annotations?: Record<string, string> }).annotations?.['spark-exec-svc/executor-gone-at'] !== undefined,
      "the deleted executor's Service is marked or gone",
    ).toBe(true);
    await expectInvariant('adapter restart + sweep');
  });

  test('the function killed mid-batch: the adapter retries into a closed port, drops, moves on; the sweep repairs', async () => {
    const app = await application('app-kill', 0);
    const from = plane.proxy.requests.length;
    let killed = false;
    plane.proxy.setFaultPlan(() => 'forward');
    const creates: Promise<PodRef>[] = [];
    for (let i = 1; i <= 6; i++)
      creates.push(createPod(plane.tenant, NS, executorPodBody(NS, 'app-kill', app.driver, i, `app-kill-exec-${i}`)));
    // Kill the function as soon as the first executor's event reached it.
    await plane.proxy.waitFor(
      (r) => r.seq >= from && (r.headers['ce-subject'] ?? '').includes('app-kill-exec-'),
      20_000,
      'the first app-kill event',
    );
    await plane.killFunction();
    killed = true;
    const pods = await Promise.all(creates);
    if (!cluster.kubelet) for (const p of pods) await markRunning(cluster.endpoints.admin, NS, p.name, nextPodIp());
    await sleep(8_000);
    await plane.restartFunction();
    await sleep(3_000);
    const during = plane.proxy.requests.slice(from);
    report['functionKilled'] = {
      requests: during.length,
      unreachable: during.filter((r) => r.disposition === 'upstream-unreachable').length,
      delivered: during.filter((r) => r.disposition === 'forwarded').length,
    };
    expect(killed).toBe(true);
    await plane.sweep();
    for (let i = 1; i <= 6; i++) expect(await serviceOf('app-kill', i), `Service of app-kill exec ${i} after the sweep`).toBeDefined();
    await expectInvariant('function killed + restarted + sweep');
  });

  // Measured (kube-apiserver v1.34.4, client-go v0.34.3 in the adapter): a 5 s partition does NOT
  // lose events — the reflector resumes its watch from the last resourceVersion and the API
  // server's watch cache replays what happened meanwhile. Only a re-list (adapter restart, a 410
  // after a long outage) folds changes into a Replace, which the adapter ignores.
  test('a partition between the adapter and the API server: what it sends once healed; the sweep leaves the invariant holding', async () => {
    const app = await application('app-relist', 1);
    await waitUntil('Service of app-relist', 30_000, () => serviceOf('app-relist', 1));
    const from = plane.proxy.requests.length;
    const acceptedBefore = plane.apiRelay.connectionsAccepted();
    plane.apiRelay.partition();
    await deletePod(plane.tenant, NS, app.executors[0]!.name, 0);
    const added = await createPod(plane.tenant, NS, executorPodBody(NS, 'app-relist', app.driver, 2, 'app-relist-exec-2'));
    if (!cluster.kubelet) await markRunning(cluster.endpoints.admin, NS, added.name, nextPodIp());
    await sleep(5_000);
    plane.apiRelay.heal();
    // The reflector backs off (about 1 s, growing) before it lists again.
    await sleep(15_000);
    const after = plane.proxy.requests.slice(from);
    report['relist'] = {
      connectionsDuringAndAfter: plane.apiRelay.connectionsAccepted() - acceptedBefore,
      events: after.map((r) => ({ type: r.headers['ce-type'], subject: r.headers['ce-subject'] })),
      adapterLog: plane
        .adapter()
        .process.lines.filter((l) => /reflector|watch|list/i.test(l))
        .slice(-10),
    };
    const replayed = after.filter(
      (r) => /app-relist-exec-[12]$/.test(r.headers['ce-subject'] ?? '') && !/update/.test(r.headers['ce-type'] ?? ''),
    );
    report['partitionReplayedAddDeleteEvents'] = replayed.map((r) => `${r.headers['ce-type']} ${r.headers['ce-subject']}`);
    await plane.sweep();
    expect(await serviceOf('app-relist', 2), 'the sweep created the Service of the executor added during the partition').toBeDefined();
    await expectInvariant('partition, re-list, sweep');
  });
});
