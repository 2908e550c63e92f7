/**
 * The pod changes of a Spark executor's life, as Kubernetes makes them and the ApiServerSource
 * sees them, once for the bench and the tests. Each step is a change of the pod in the API server
 * (not a request of the function) and the event the watch then delivers:
 *
 *   add          Spark creates the executor, Pending (the scheduler has not placed it yet)
 *   scheduled    PodScheduled                                  update, nothing the function reads
 *   creating     ContainerCreating, host IP, start time        update, nothing the function reads
 *   running      phase Running, pod IP                         update: the executor now runs
 *   ready        Ready                                         update, nothing the function reads
 *   terminating  the driver deletes it: deletionTimestamp, still Running (a finalizer stands in
 *                for the kubelet holding it while its containers stop)   update, still live
 *   failed       the kubelet stopped it: phase Failed, exit 143 on SIGTERM  update: it ended
 *   removed      the last finalizer goes, the pod with it            delete (its last state)
 *
 * The driver: add (Pending), update Running, and at the application's end update Succeeded
 * (Spark keeps completed driver pods), then delete.
 *
 * spec.nodeName cannot be set by an update (the scheduler binds through pods/binding), so
 * "scheduled" is the PodScheduled condition alone; the function reads neither.
 */

/** The finalizer that holds a deleted executor while it "stops" (the emulator has no grace period). */
export const GRACEFUL_FINALIZER = 'bench.spark-exec-svc/graceful-termination';

export type StatusStep = 'scheduled' | 'creating' | 'running' | 'ready';
/** The status updates of a starting executor, in order: none changes anything the function reads but "running". */
export const STATUS_STEPS: readonly StatusStep[] = ['scheduled', 'creating', 'running', 'ready'];
/** The status steps of an executor that already runs (only a running executor claims its slot: issue 17). */
export const RUNNING_STATUS_STEPS: readonly StatusStep[] = ['running', 'ready'];

const iso = (): string => new Date().toISOString();
const cond = (type: string, status: 'True' | 'False', reason?: string) => ({
  type,
  status,
  lastProbeTime: null,
  lastTransitionTime: iso(),
  ...(reason === undefined ? {} : { reason }),
});
const IMAGE = 'docker.io/apache/spark:4.0.0-scala2.13-java17-python3-ubuntu';
const IMAGE_ID = 'docker.io/apache/spark@sha256:4f1b6c2a7e9d0b3c5a8f2e1d6c9b0a3f7e2d5c8b1a4f7e0d3c6b9a2f5e8d1c4b';
const containerId = (name: string): string => `containerd://${Buffer.from(name.padEnd(32, '.')).toString('hex').slice(0, 64)}`;
/** A pod IP per executor index, unique for up to 62,500 executors. */
export const podIp = (i: number): string => `10.244.${1 + Math.floor(i / 250)}.${2 + (i % 250)}`;
const containerStatus = (extra: object) => ({ name: 'spark-kubernetes-executor', image: IMAGE, imageID: '', restartCount: 0, ...extra });

/** The merge patch of the executor pod `name` (the `index`-th of its app) at a status step, or when it fails. */
export function executorStatusPatch(step: StatusStep | 'failed', name: string, index: number): object {
  const started = { running: { startedAt: iso() } };
  const ran = { imageID: IMAGE_ID, containerID: containerId(name) };
  switch (step) {
    case 'scheduled':
      return { status: { conditions: [cond('PodScheduled', 'True')] } };
    case 'creating':
      return {
        status: {
          hostIP: '10.0.3.17',
          hostIPs: [{ ip: '10.0.3.17' }],
          startTime: iso(),
          conditions: [
            cond('PodReadyToStartContainers', 'False'),
            cond('Initialized', 'True'),
            cond('Ready', 'False', 'ContainersNotReady'),
            cond('ContainersReady', 'False', 'ContainersNotReady'),
            cond('PodScheduled', 'True'),
          ],
          containerStatuses: [containerStatus({ ready: false, started: false, state: { waiting: { reason: 'ContainerCreating' } } })],
        },
      };
    case 'running':
      return {
        status: {
          phase: 'Running',
          podIP: podIp(index),
          podIPs: [{ ip: podIp(index) }],
          conditions: [
            cond('PodReadyToStartContainers', 'True'),
            cond('Initialized', 'True'),
            cond('Ready', 'False', 'ContainersNotReady'),
            cond('ContainersReady', 'False', 'ContainersNotReady'),
            cond('PodScheduled', 'True'),
          ],
          containerStatuses: [containerStatus({ ...ran, ready: false, started: true, state: started })],
        },
      };
    case 'ready':
      return {
        status: {
          conditions: [
            cond('PodReadyToStartContainers', 'True'),
            cond('Initialized', 'True'),
            cond('Ready', 'True'),
            cond('ContainersReady', 'True'),
            cond('PodScheduled', 'True'),
          ],
          containerStatuses: [containerStatus({ ...ran, ready: true, started: true, state: started })],
        },
      };
    case 'failed':
      return {
        status: {
          phase: 'Failed',
          conditions: [
            cond('PodReadyToStartContainers', 'False'),
            cond('Initialized', 'True'),
            cond('Ready', 'False', 'PodFailed'),
            cond('ContainersReady', 'False', 'PodFailed'),
            cond('PodScheduled', 'True'),
          ],
          containerStatuses: [
            containerStatus({
              ...ran,
              ready: false,
              started: false,
              state: {
                terminated: { exitCode: 143, reason: 'Error', startedAt: iso(), finishedAt: iso(), containerID: containerId(name) },
              },
            }),
          ],
        },
      };
  }
}

/** The finalizer removed: the held pod goes (its delete event carries its last state). */
export const RELEASE_PATCH = { metadata: { finalizers: null } } as const;
export const DRIVER_RUNNING_PATCH = { status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }] } } as const;
export const DRIVER_SUCCEEDED_PATCH = { status: { phase: 'Succeeded' } } as const;
