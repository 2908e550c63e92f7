import { NamespaceName, ObjectName } from '../model/k8s-objects.ts';
import { type KubeResource, type KubeVerb, kubeCodeLabel } from '../ops/metrics.ts';
import type { ServiceBody } from '../model/service-spec.ts';
import type { CreateResult, DeleteResult, KubeClient } from './client.ts';

/** Where one finished API request is reported (shared/ops/metrics.ts: Metrics). */
export interface RequestRecorder {
  recordKubeRequest(verb: KubeVerb, resource: KubeResource, code: string, seconds: number): void;
}

/**
 * The same KubeClient, with every API request counted by verb, resource and response code, and
 * timed. It wraps the client the retries wrap, so that each attempt is one request. The client
 * turns some answers into values (404 → undefined or 'not-found', 409 → 'exists', 'conflict',
 * 'precondition-failed'): they are counted with the code the API server sent. A call the client
 * never sends (a namespace or name no object can have) is not counted.
 */
export function withRequestMetrics(client: KubeClient, recorder: RequestRecorder, clock: () => number = () => performance.now()): KubeClient {
  async function timed<T>(verb: KubeVerb, resource: KubeResource, sent: boolean, call: () => Promise<T>, codeOf: (value: T) => string): Promise<T> {
    if (!sent) return call();
    const started = clock();
    let code = 'error';
    try {
      const value = await call();
      code = codeOf(value);
      return value;
    } catch (error) {
      code = kubeCodeLabel(error);
      throw error;
    } finally {
      recorder.recordKubeRequest(verb, resource, code, Math.max(0, clock() - started) / 1000);
    }
  }
  const found = (value: unknown): string => (value === undefined ? '404' : '200');
  const listed = (_value: unknown): string => '200';
  return {
    readPod: (ns: string, name: string) => timed('get', 'pods', validTarget(ns, name), () => client.readPod(ns, name), found),
    listPods: (ns: string, selector: string, limit: number, token?: string) =>
      timed('list', 'pods', validNamespace(ns), () => client.listPods(ns, selector, limit, token), listed),
    readService: (ns: string, name: string) => timed('get', 'services', validTarget(ns, name), () => client.readService(ns, name), found),
    listServices: (ns: string, selector: string, limit: number, token?: string) =>
      timed('list', 'services', validNamespace(ns), () => client.listServices(ns, selector, limit, token), listed),
    createService: (body: ServiceBody) =>
      timed<CreateResult>('create', 'services', validNamespace(body.metadata.namespace), () => client.createService(body), (r) => (r.outcome === 'created' ? '201' : '409')),
    patchService: (ns: string, name: string, patch: Record<string, unknown>) =>
      timed('patch', 'services', validTarget(ns, name), () => client.patchService(ns, name, patch), (r) => (r === 'not-found' ? '404' : r === 'conflict' ? '409' : '200')),
    deleteService: (ns: string, name: string, uid: string, rv?: string) =>
      timed<DeleteResult>('delete', 'services', validTarget(ns, name), () => client.deleteService(ns, name, uid, rv), (r) =>
        r === 'deleted' ? '200' : r === 'not-found' ? '404' : '409',
      ),
  };
}

/** The client's own rule for what it sends (shared/kube/client.ts): anything else is refused before any request. */
function validNamespace(namespace: string): boolean {
  return NamespaceName.safeParse(namespace).success;
}

function validTarget(namespace: string, name: string): boolean {
  return validNamespace(namespace) && ObjectName.safeParse(name).success;
}
