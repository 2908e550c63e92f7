/**
 * Spark-shaped pods for the real API server, created with the tenant's token: the test kit's Spark
 * pods (testkit/spark-pods.ts: the labels, the driver ownerReference and the block-manager port as
 * Spark sets them) made runnable by the process kubelet. It has no images, so a command stands in
 * for the image's entrypoint (Spark's args follow it, as they follow /opt/entrypoint.sh): the
 * executor listens on the block-manager port, the driver waits until the scenario tells it to
 * finish (exit 0 → phase Succeeded).
 */
import { driverPod, executorPod, type PodBody } from '../../testkit/spark-pods.ts';
import { type ApiAccess, rawRequest } from '../adapter/kube-access.ts';

export const BLOCK_MANAGER_PORT = 7079;

/** A listener on the port given as argv[1]: accepts and closes, forever (what a block manager looks like to connect()). */
const LISTENER = [
  'import socket,sys',
  's=socket.socket(socket.AF_INET,socket.SOCK_STREAM)',
  's.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)',
  "s.bind(('0.0.0.0',int(sys.argv[1])))",
  's.listen(64)',
  'while True:',
  '  c,_=s.accept()',
  '  c.close()',
].join('\n');

export interface PodRef {
  readonly name: string;
  readonly uid: string;
}

/**
 * The pod as a client creates it: no status (the API server sets it; the test kit's builders carry
 * one for the function's events), never restarted, a short grace period, and the command.
 */
function runnable(pod: PodBody, command: readonly string[], ports: ReadonlyArray<Record<string, unknown>> = []): Record<string, unknown> {
  const { apiVersion, kind, metadata, spec } = pod;
  const [main, ...others] = spec.containers;
  if (main === undefined) throw new Error(`pod ${metadata.name} has no container`);
  return {
    apiVersion,
    kind,
    metadata,
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [{ ...main, command, ...(ports.length === 0 ? {} : { ports }) }, ...others],
    },
  };
}

export function driverPodBody(namespace: string, appId: string, name: string, finishFile: string): Record<string, unknown> {
  return runnable(driverPod({ namespace, appId, name }), ['sh', '-c', `until [ -e '${finishFile}' ]; do sleep 0.1; done`]);
}

export function executorPodBody(namespace: string, appId: string, driver: PodRef, execId: number, name: string): Record<string, unknown> {
  const pod = executorPod({ namespace, appId, execId: String(execId), driver, blockManagerPort: BLOCK_MANAGER_PORT, optIn: true, name });
  return runnable(
    pod,
    ['python3', '-c', LISTENER, String(BLOCK_MANAGER_PORT)],
    [{ name: 'blockmanager', containerPort: BLOCK_MANAGER_PORT, protocol: 'TCP' }],
  );
}

/** POST a pod as `who`; returns its name and uid. */
export async function createPod(who: ApiAccess, namespace: string, body: Record<string, unknown>): Promise<PodRef> {
  const answer = await rawRequest(who, 'POST', `/api/v1/namespaces/${namespace}/pods`, body);
  if (answer.status !== 201) throw new Error(`create pod: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
  const meta = (answer.body as { metadata: { name: string; uid: string } }).metadata;
  return { name: meta.name, uid: meta.uid };
}

export async function deletePod(who: ApiAccess, namespace: string, name: string, gracePeriodSeconds?: number): Promise<void> {
  const query = gracePeriodSeconds === undefined ? '' : `?gracePeriodSeconds=${gracePeriodSeconds}`;
  const answer = await rawRequest(who, 'DELETE', `/api/v1/namespaces/${namespace}/pods/${name}${query}`);
  if (answer.status !== 200 && answer.status !== 202)
    throw new Error(`delete pod ${name}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
}

/**
 * Without a kubelet (control plane only): what a kubelet would report for a running pod, written
 * through the status subresource with the admin's token. The final scenarios use the process kubelet.
 */
export async function markRunning(admin: ApiAccess, namespace: string, name: string, podIP: string): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const answer = await rawRequest(
    admin,
    'PATCH',
    `/api/v1/namespaces/${namespace}/pods/${name}/status`,
    {
      status: {
        phase: 'Running',
        podIP,
        podIPs: [{ ip: podIP }],
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
      },
    },
    'application/merge-patch+json',
  );
  if (answer.status !== 200) throw new Error(`mark ${name} running: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
}

export async function markPhase(admin: ApiAccess, namespace: string, name: string, phase: 'Succeeded' | 'Failed'): Promise<void> {
  const answer = await rawRequest(
    admin,
    'PATCH',
    `/api/v1/namespaces/${namespace}/pods/${name}/status`,
    { status: { phase } },
    'application/merge-patch+json',
  );
  if (answer.status !== 200) throw new Error(`mark ${name} ${phase}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
}
