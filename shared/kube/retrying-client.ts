import type { ServiceBody } from '../model/service-spec.ts';
import { type RetryPolicy, withRetry } from './retry.ts';
import type { KubeClient } from './client.ts';

/** The same KubeClient, with every call retried under one event's policy and deadline. */
export function withRetries(client: KubeClient, policy: RetryPolicy): KubeClient {
  const retry = <T>(operation: () => Promise<T>): Promise<T> => withRetry(operation, policy);
  return {
    readPod: (ns: string, name: string) => retry(() => client.readPod(ns, name)),
    listPods: (ns: string, selector: string, limit: number, token?: string) => retry(() => client.listPods(ns, selector, limit, token)),
    readService: (ns: string, name: string) => retry(() => client.readService(ns, name)),
    listServices: (ns: string, selector: string, limit: number, token?: string) =>
      retry(() => client.listServices(ns, selector, limit, token)),
    createService: (body: ServiceBody) => retry(() => client.createService(body)),
    patchService: (ns: string, name: string, patch: Record<string, unknown>) => retry(() => client.patchService(ns, name, patch)),
    deleteService: (ns: string, name: string, uid: string, rv?: string) => retry(() => client.deleteService(ns, name, uid, rv)),
  };
}
