import type { Pod } from '../k8s-objects.ts';
import { SPARK_APP_ID_LABEL, SPARK_ROLE_DRIVER, SPARK_ROLE_LABEL } from '../labels.ts';
import { type PodIdentity, isLivePod, isPodFinished, podIdentity } from '../spark-pod.ts';
import type { ReconcileContext } from './context.ts';

export interface DriverState {
  readonly identity: PodIdentity;
  /** The driver pod as read now; undefined when it no longer exists. */
  readonly pod: Pod | undefined;
  readonly alive: boolean;
}

/** Reads the driver named by an ownerReference and says whether that very pod (same UID) still runs. */
export async function readDriver(ctx: ReconcileContext, identity: PodIdentity): Promise<DriverState> {
  const pod = await ctx.client.readPod(identity.namespace, identity.name);
  return { identity, pod, alive: isLivePod(pod, identity) };
}

/**
 * Without an ownerReference (client mode, or a pod spec written by hand) the driver is found by
 * Spark's labels. More than one live driver for one app id is ambiguous: nothing is guessed.
 */
export async function findDriverByLabels(ctx: ReconcileContext, namespace: string, appId: string): Promise<DriverState | string> {
  const selector = `${SPARK_APP_ID_LABEL}=${appId},${SPARK_ROLE_LABEL}=${SPARK_ROLE_DRIVER}`;
  const page = await ctx.client.listPods(namespace, selector, 10);
  const live = page.items.filter((pod) => !isPodFinished(pod));
  if (live.length > 1) return `${live.length} live driver pods carry ${SPARK_APP_ID_LABEL}=${appId}; refusing to guess the owner`;
  const pod = live[0];
  const identity = pod === undefined ? undefined : podIdentity(pod);
  if (pod === undefined || identity === undefined) {
    return `no live driver pod with ${SPARK_APP_ID_LABEL}=${appId} in namespace ${namespace} (client mode without a driver pod is not supported: a Service needs an owner)`;
  }
  return { identity, pod, alive: true };
}
