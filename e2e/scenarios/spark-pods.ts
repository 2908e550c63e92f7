/**
 * Spark-shaped pods for the real API server, created with the tenant's token: the labels and the
 * driver ownerReference Spark sets (resource-managers/kubernetes Constants.scala,
 * BasicExecutorFeatureStep: controller=true, no blockOwnerDeletion), the block-manager port as
 * Spark passes it (SPARK_JAVA_OPT_<n> = -Dspark.blockManager.port=N), and instead of Spark a
 * process the process kubelet can run: the executor listens on the block-manager port, the driver
 * waits until the scenario tells it to finish (exit 0 → phase Succeeded).
 */
import { type ApiAccess, rawRequest } from '../adapter/kube-access.ts';

export const BLOCK_MANAGER_PORT = 7079;
export const OPT_IN = { 'spark-exec-svc/enabled': 'true' } as const;

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

export function driverPodBody(namespace: string, appId: string, name: string, finishFile: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      labels: { 'spark-app-selector': appId, 'spark-role': 'driver', 'spark-app-name': 'e2e', 'spark-version': '4.0.0', ...OPT_IN },
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: 'spark-kubernetes-driver',
          image: 'apache/spark:4.0.0',
          command: ['sh', '-c', `until [ -e '${finishFile}' ]; do sleep 0.1; done`],
          env: [{ name: 'SPARK_APPLICATION_ID', value: appId }],
        },
      ],
    },
  };
}

export function executorPodBody(namespace: string, appId: string, driver: PodRef, execId: number, name: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      labels: {
        'spark-app-selector': appId,
        'spark-exec-id': String(execId),
        'spark-role': 'executor',
        'spark-exec-resourceprofile-id': '0',
        'spark-app-name': 'e2e',
        'spark-version': '4.0.0',
        ...OPT_IN,
      },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: driver.name, uid: driver.uid, controller: true }],
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: 'spark-kubernetes-executor',
          image: 'apache/spark:4.0.0',
          command: ['python3', '-c', LISTENER, String(BLOCK_MANAGER_PORT)],
          env: [
            { name: 'SPARK_APPLICATION_ID', value: appId },
            { name: 'SPARK_EXECUTOR_ID', value: String(execId) },
            { name: 'SPARK_EXECUTOR_POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
            { name: 'SPARK_JAVA_OPT_0', value: '-Dspark.driver.port=7078' },
            { name: 'SPARK_JAVA_OPT_1', value: `-Dspark.blockManager.port=${BLOCK_MANAGER_PORT}` },
          ],
          ports: [{ name: 'blockmanager', containerPort: BLOCK_MANAGER_PORT, protocol: 'TCP' }],
        },
      ],
    },
  };
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
  if (answer.status !== 200 && answer.status !== 202) throw new Error(`delete pod ${name}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
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
  const answer = await rawRequest(admin, 'PATCH', `/api/v1/namespaces/${namespace}/pods/${name}/status`, { status: { phase } }, 'application/merge-patch+json');
  if (answer.status !== 200) throw new Error(`mark ${name} ${phase}: HTTP ${answer.status}: ${JSON.stringify(answer.body)}`);
}
