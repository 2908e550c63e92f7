import type { Pod } from './k8s-objects.ts';
import {
  OPT_IN_KEY,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
  SPARK_ROLE_DRIVER,
  SPARK_ROLE_EXECUTOR,
  SPARK_ROLE_LABEL,
} from './labels.ts';

/** A pod reference precise enough to prove identity: Kubernetes reuses names, never UIDs. */
export interface PodIdentity {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

export interface SparkExecutor {
  readonly role: 'executor';
  readonly appId: string;
  readonly execId: string;
  readonly pod: Pod;
  /** From the executor's controller ownerReference (Spark sets it in cluster mode); undefined in client mode. */
  readonly driver: PodIdentity | undefined;
}

export interface SparkDriver {
  readonly role: 'driver';
  readonly appId: string;
  readonly pod: Pod;
}

export type SparkPod = SparkExecutor | SparkDriver;

/** Returns what kind of Spark pod this is, or undefined for every other pod (which we never act on). */
export function classifySparkPod(pod: Pod): SparkPod | undefined {
  const labels = pod.metadata.labels ?? {};
  const role = labels[SPARK_ROLE_LABEL];
  const appId = labels[SPARK_APP_ID_LABEL];
  if (appId === undefined || appId === '') return undefined;
  if (role === SPARK_ROLE_DRIVER) return { role: 'driver', appId, pod };
  if (role !== SPARK_ROLE_EXECUTOR) return undefined;
  const execId = labels[SPARK_EXECUTOR_ID_LABEL];
  if (execId === undefined || execId === '') return undefined;
  return { role: 'executor', appId, execId, pod, driver: driverFromOwnerReferences(pod) };
}

/** Spark makes the driver pod the executor's controller owner (BasicExecutorFeatureStep). */
export function driverFromOwnerReferences(pod: Pod): PodIdentity | undefined {
  const owner = (pod.metadata.ownerReferences ?? []).find(
    (ref) => ref.kind === 'Pod' && ref.apiVersion === 'v1' && ref.controller === true,
  );
  return owner === undefined ? undefined : { namespace: pod.metadata.namespace, name: owner.name, uid: owner.uid };
}

export function podIdentity(pod: Pod): PodIdentity | undefined {
  const uid = pod.metadata.uid;
  return uid === undefined ? undefined : { namespace: pod.metadata.namespace, name: pod.metadata.name, uid };
}

/** True when the pod carries the opt-in key as a label or an annotation with value "true". */
export function hasOptIn(pod: Pod): boolean {
  return pod.metadata.labels?.[OPT_IN_KEY] === 'true' || pod.metadata.annotations?.[OPT_IN_KEY] === 'true';
}

/**
 * A pod that will never run again: deleted, being deleted, or in a terminal phase.
 * Spark leaves finished driver pods in phase Succeeded/Failed until someone deletes them.
 */
export function isPodFinished(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return (pod.metadata.deletionTimestamp ?? null) !== null || phase === 'Succeeded' || phase === 'Failed';
}

/** True when `pod` is the live pod that `identity` names (same UID, not finished). */
export function isLivePod(pod: Pod | undefined, identity: PodIdentity): boolean {
  return pod !== undefined && pod.metadata.uid === identity.uid && !isPodFinished(pod);
}
