/**
 * Helpers of the adversarial reviews (review-batch.test.ts, review-fixes.test.ts): reading the
 * emulator, the invariant check after a step, the ApiServerSource's delivery policy, and a
 * function instance whose process caches a test can inspect.
 */
import { expect } from 'vitest';
import { startFunctionServer } from '../../functions/executor-service/server.ts';
import { loadConfig } from '../../shared/config.ts';
import { CoreV1KubeClient } from '../../shared/kube/client.ts';
import { jsonLogger } from '../../shared/log.ts';
import { newMetrics } from '../../shared/metrics.ts';
import { type ProcessCaches, newProcessCaches } from '../../shared/reconcile/caches.ts';
import { executorServiceName } from '../../shared/naming.ts';
import type { KubeEmulator } from '../kube-emulator/index.ts';
import { NS, sleep } from '../reliability/support.ts';
import { type PostedReply, podEventType, podSubject, postCloudEvent } from '../support/cloudevents.ts';
import type { PodBody } from '../support/spark-pods.ts';
import { GONE_AT, type SvcObj, invariantProblems } from './invariant.ts';

export const PORT = 7079;
export const ref = (pod: PodBody): { name: string; uid: string } => ({ name: pod.metadata.name, uid: pod.metadata.uid! });
export const svcName = (appId: string, execId: number | string): string => executorServiceName(appId, String(execId));
export const svcOf = (e: KubeEmulator, name: string): SvcObj | undefined => e.getObject('services', NS, name) as unknown as SvcObj | undefined;
export const marked = (e: KubeEmulator, name: string): boolean => svcOf(e, name)?.metadata.annotations?.[GONE_AT] !== undefined;
export const current = (e: KubeEmulator, name: string): PodBody => {
  const pod = e.getObject('pods', NS, name);
  if (pod === undefined) throw new Error(`pod ${name} does not exist`);
  return pod as unknown as PodBody;
};
export const fail = (e: KubeEmulator, pod: PodBody): PodBody => e.patchObject('pods', NS, pod.metadata.name, { status: { phase: 'Failed' } }) as unknown as PodBody;
export function check(e: KubeEmulator, genuine: ReadonlySet<string>, step: string, cap?: number): void {
  expect(invariantProblems(e, PORT, genuine, cap), `invariant after: ${step}`).toEqual([]);
}
export async function ok(reply: Promise<PostedReply>, what: string): Promise<PostedReply> {
  const r = await reply;
  expect(r.status, `${what}: ${r.text}`).toBe(200);
  return r;
}
/** The ApiServerSource adapter: up to 6 attempts (50 ms × 2^n backoff) on 503 and friends, then drops the event. */
export async function deliverLikeAdapter(send: () => Promise<PostedReply>): Promise<{ reply: PostedReply; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    const reply = await send();
    if (![404, 413, 425, 429, 502, 503, 504].includes(reply.status) || attempt === 6) return { reply, attempts: attempt };
    await sleep(50 * 2 ** attempt);
  }
}
/** A function instance like startHarness's, but whose process caches the test can look at (for leaks only). */
export async function instanceWithCaches(emulator: KubeEmulator, env: Record<string, string> = {}): Promise<{ url: string; caches: ProcessCaches; close: () => Promise<void> }> {
  const config = loadConfig({ WATCH_NAMESPACES: NS, BLOCK_MANAGER_PORT: String(PORT), LOG_LEVEL: 'error', SWEEP_MIN_INTERVAL_MS: '0', MAX_CONNECTIONS: '10000', ...env }, () => undefined);
  const caches = newProcessCaches();
  const fn = await startFunctionServer(
    { client: new CoreV1KubeClient(emulator.kubeConfig(), config.requestTimeoutMs), config, log: jsonLogger('error', () => undefined), metrics: newMetrics(), caches },
    { port: 0, host: '127.0.0.1' },
  );
  return { url: `http://127.0.0.1:${fn.port}/`, caches, close: () => fn.shutdown(1000) };
}
export const sendTo = (url: string, verb: 'add' | 'update' | 'delete', pod: PodBody): Promise<PostedReply> =>
  postCloudEvent(url, { type: podEventType(verb), data: pod, subject: podSubject(pod.metadata.namespace, pod.metadata.name) });
