/**
 * Steps of the adversarial and load suites that drive two instances or a slow API server: an
 * application's pods, reading the emulator, the invariant check after a step
 * (testkit/oracle.ts), the ApiServerSource's delivery policy (testkit/apiserversource.ts), and a
 * second function instance whose process caches a test can look at.
 */
import { expect } from 'vitest';
import { jsonLogger } from '../../../shared/ops/log.ts';
import { executorServiceName } from '../../../shared/model/naming.ts';
import type { KubeEmulator } from '../../../packages/kube-emulator/index.ts';
import { NS, sleep } from '../../support/audited.ts';
import { type PostedReply, postPodEvent } from '../../../testkit/apiserversource.ts';
export { deliverLikeAdapter } from '../../../testkit/apiserversource.ts';
import { type Harness, startHarness } from '../../../testkit/harness.ts';
import { type PodBody, driverPod, executorPod } from '../../../testkit/spark-pods.ts';
import type { RequestRecord } from '../../../packages/kube-emulator/index.ts';
import { postSweep } from '../../../testkit/apiserversource.ts';
import { ref } from './tenant-scene.ts';
export { ref };
import { GONE_AT, type Obj as SvcObj, clusterView, invariantProblems } from '../../../testkit/oracle.ts';

export const PORT = 7079;
export const svcName = (appId: string, execId: number | string): string => executorServiceName(appId, String(execId));
export const serviceIn = (e: KubeEmulator, name: string): SvcObj | undefined =>
  e.getObject('services', NS, name) as unknown as SvcObj | undefined;
export const marked = (e: KubeEmulator, name: string): boolean => serviceIn(e, name)?.metadata.annotations?.[GONE_AT] !== undefined;
export const currentIn = (e: KubeEmulator, name: string): PodBody => {
  const pod = e.getObject('pods', NS, name);
  if (pod === undefined) throw new Error(`pod ${name} does not exist`);
  return pod as unknown as PodBody;
};
export const fail = (e: KubeEmulator, pod: PodBody): PodBody =>
  e.patchObject('pods', NS, pod.metadata.name, { status: { phase: 'Failed' } }) as unknown as PodBody;
export function check(e: KubeEmulator, genuine: ReadonlySet<string>, step: string, cap?: number, appCap?: number): void {
  expect(invariantProblems(clusterView(e, NS), { defaultPort: PORT, genuine, cap, appCap }), `invariant after: ${step}`).toEqual([]);
}
export async function ok(reply: Promise<PostedReply>, what: string): Promise<PostedReply> {
  const r = await reply;
  expect(r.status, `${what}: ${r.text}`).toBe(200);
  return r;
}
/**
 * At the cap (`cap` Services), a live executor's add reaches the instance at `url`: a dead
 * executor's Service (`deadService`) is gone or still marked — never unmarked — and the live one
 * gets its Service; the invariant holds after.
 */
export async function addAtCapGivesWay(
  e: KubeEmulator,
  url: string,
  live: ReadonlySet<string>,
  deadService: string,
  pod: PodBody,
  cap: number,
): Promise<void> {
  const labels = pod.metadata.labels ?? {};
  const reply = await ok(sendTo(url, 'add', pod), `add of ${pod.metadata.name} at the cap`);
  const dead = serviceIn(e, deadService);
  expect(dead === undefined || marked(e, deadService), `the dead executor's Service ${deadService} is gone or still marked`).toBe(true);
  const made = svcName(labels['spark-app-selector']!, labels['spark-exec-id']!);
  expect(serviceIn(e, made), `${pod.metadata.name}'s Service (${reply.text})`).toBeDefined();
  check(e, live, `add of ${pod.metadata.name} at the cap`, cap);
}
/** A function instance on the same API server whose process caches the test can look at (for leaks only). */
export const instanceWithCaches = (emulator: KubeEmulator, env: Record<string, string> = {}): Promise<Harness> =>
  startHarness({ LOG_LEVEL: 'error', ...env }, { emulator, logger: jsonLogger('error', () => undefined) });
export const sendTo = (url: string, verb: 'add' | 'update' | 'delete', pod: PodBody): Promise<PostedReply> => postPodEvent(url, verb, pod);

const WRITES = new Set(['create', 'patch', 'update', 'delete', 'deletecollection']);
export const serviceWritesIn = (rs: readonly RequestRecord[]): RequestRecord[] =>
  rs.filter((r) => r.resource === 'services' && WRITES.has(r.verb));

/** An application: its driver (opted in unless `optIn: false`) and a maker of its executors on PORT. */
export function app(
  h: Harness,
  appId: string,
  o: { driverName?: string; driverUid?: string; optIn?: boolean } = {},
): {
  appId: string;
  driver: PodBody;
  exec: (id: number, extra?: Partial<Parameters<typeof executorPod>[0]>) => PodBody;
} {
  const body = driverPod({ namespace: NS, appId, name: o.driverName, optIn: o.optIn });
  const driver = h.createPod(o.driverUid === undefined ? body : { ...body, metadata: { ...body.metadata, uid: o.driverUid } });
  return {
    appId,
    driver,
    exec: (id, extra = {}) =>
      h.createPod(executorPod({ namespace: NS, appId, execId: String(id), driver: ref(driver), blockManagerPort: PORT, ...extra })),
  };
}

/** Marks a Service gone behind the function's back (as another instance, or a clock ahead, would). */
export const markBehindBack = (e: KubeEmulator, name: string, at: Date): void => {
  e.patchObject('services', NS, name, { metadata: { annotations: { [GONE_AT]: at.toISOString() } } });
};
export const sweepTo = (url: string): Promise<PostedReply> => postSweep(url, `sweep-${Math.random().toString(36).slice(2)}`);
export const ours = (e: KubeEmulator): number => e.listObjects('services', NS, 'app.kubernetes.io/managed-by=spark-exec-svc').length;

/** Waits until `cond` holds or `ms` pass (whichever first). */
export async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(5);
}
