import { type PortResolution, resolveBlockManagerPort } from './block-manager-port.ts';
import { type Pod, podRefOf } from './k8s-objects.ts';
import {
  OPT_IN_KEY,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
  SPARK_ROLE_DRIVER,
  SPARK_ROLE_EXECUTOR,
  SPARK_ROLE_LABEL,
} from './labels.ts';

/** A pod named precisely enough to prove identity: Kubernetes reuses names, never UIDs. */
export interface PodRef {
  readonly name: string;
  readonly uid: string;
}

/**
 * Spark assigns executor ids from a counter starting at 1 (KubernetesExecutorPodsAllocator's
 * EXECUTOR_ID_COUNTER.incrementAndGet); anything else was not made by Spark. Canonical decimal
 * only ("07" is refused), so that a label value maps to exactly one executor and one name.
 */
const EXECUTOR_ID = /^[1-9][0-9]{0,18}$/;

export function isSparkExecutorId(value: string): boolean {
  return EXECUTOR_ID.test(value);
}

/**
 * What the function keeps of a pod it read: just enough to decide, nothing it does not use
 * (a Spark pod is 4–6 KB; this is a few hundred bytes, every string bounded by validation).
 */
export interface PodFact {
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string | undefined;
  /** Phase Succeeded or Failed: the pod never runs again (its UID is gone for good). */
  readonly terminal: boolean;
  /**
   * Phase Running: the kubelet started its containers. Only a running executor claims its slot
   * (gets a Service, or keeps another pod from getting one): the phase is written by the kubelet
   * through pods/status, which a tenant who may only create pods cannot write, while a Pending pod
   * costs nothing. Not running is not gone: a Service's recorded executor is kept until terminal.
   */
  readonly running: boolean;
  /** deletionTimestamp set: shutting down, but still running (and serving blocks) until terminal or absent. */
  readonly deleting: boolean;
  readonly role: 'executor' | 'driver' | undefined;
  readonly appId: string | undefined;
  /** The executor id when it is one Spark could have assigned; undefined otherwise. */
  readonly execId: string | undefined;
  /** The pod's controller owner when it is a v1 Pod: Spark's driver in cluster mode and in client mode with spark.kubernetes.driver.pod.name. */
  readonly controllerPod: PodRef | undefined;
  readonly optIn: boolean;
  /** Where its block manager listens, resolved with the configured default (executors only). */
  readonly port: PortResolution;
}

/** Reduces a pod read from the API (or carried by an event, as a hint) to what decisions use. */
export function podFact(pod: Pod, defaultPort: number | undefined): PodFact | undefined {
  const uid = pod.metadata.uid;
  if (uid === undefined) return undefined;
  const labels = pod.metadata.labels ?? {};
  const roleLabel = labels[SPARK_ROLE_LABEL];
  const role = roleLabel === SPARK_ROLE_EXECUTOR ? 'executor' : roleLabel === SPARK_ROLE_DRIVER ? 'driver' : undefined;
  const appId = labels[SPARK_APP_ID_LABEL] === '' ? undefined : labels[SPARK_APP_ID_LABEL];
  const execLabel = labels[SPARK_EXECUTOR_ID_LABEL];
  const phase = pod.status?.phase;
  return {
    name: pod.metadata.name,
    uid,
    resourceVersion: pod.metadata.resourceVersion,
    terminal: phase === 'Succeeded' || phase === 'Failed',
    running: phase === 'Running',
    deleting: (pod.metadata.deletionTimestamp ?? null) !== null,
    role,
    appId,
    execId: role === 'executor' && execLabel !== undefined && isSparkExecutorId(execLabel) ? execLabel : undefined,
    controllerPod: controllerPodOf(pod),
    optIn: pod.metadata.labels?.[OPT_IN_KEY] === 'true' || pod.metadata.annotations?.[OPT_IN_KEY] === 'true',
    port: role === 'executor' ? resolveBlockManagerPort(pod, defaultPort) : { ok: false, reason: 'not an executor' },
  };
}

/**
 * Spark makes the driver pod the executor's controller owner (BasicExecutorFeatureStep). A
 * controller reference that can name no pod (podRefOf) leaves the executor without a driver.
 */
function controllerPodOf(pod: Pod): PodRef | undefined {
  const owner = (pod.metadata.ownerReferences ?? []).find(
    (ref) => ref.kind === 'Pod' && ref.apiVersion === 'v1' && ref.controller === true,
  );
  return owner === undefined ? undefined : podRefOf(owner);
}

/** Why a pod event cannot be about an executor slot; undefined when it names one. */
export function notAnExecutorSlot(fact: PodFact, rawExecId: string | undefined): string | undefined {
  if (fact.role !== 'executor') return 'not a Spark executor pod';
  if (fact.appId === undefined) return `executor pod without a ${SPARK_APP_ID_LABEL} label`;
  if (fact.execId === undefined) {
    return `${SPARK_EXECUTOR_ID_LABEL}=${JSON.stringify((rawExecId ?? '').slice(0, 40))} is not an executor id Spark assigns (a decimal integer ≥ 1)`;
  }
  return undefined;
}
