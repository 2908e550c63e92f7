/**
 * What the scenarios wait for and read on the real API server: a condition polled until it holds,
 * a pod's IP once it runs, and the addresses the real EndpointSlice controller lists for a Service.
 */
import { type ApiAccess, rawGet } from '../adapter/kube-access.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every 100 ms until it returns a value; throws naming `what` after `timeoutMs`. */
export async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** The pod's IP once the kubelet reports it Running. */
export function runningPodIP(admin: ApiAccess, namespace: string, name: string, timeoutMs = 60_000): Promise<string> {
  return waitUntil(`pod ${name} running with an IP`, timeoutMs, async () => {
    const pod = (await rawGet(admin, `/api/v1/namespaces/${namespace}/pods/${name}`)) as {
      status?: { phase?: string; podIP?: string };
    };
    return pod.status?.phase === 'Running' && pod.status.podIP !== undefined ? pod.status.podIP : undefined;
  });
}

/** The endpoints of a Service's EndpointSlices (kubernetes.io/service-name label), with their ready condition. */
export async function serviceEndpoints(
  admin: ApiAccess,
  namespace: string,
  serviceName: string,
): Promise<Array<{ address: string; ready: boolean }>> {
  const list = (await rawGet(
    admin,
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${serviceName}`,
  )) as {
    items: Array<{ endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean } }> | null }>;
  };
  return list.items.flatMap((s) =>
    (s.endpoints ?? []).flatMap((e) => e.addresses.map((address) => ({ address, ready: e.conditions?.ready !== false }))),
  );
}
