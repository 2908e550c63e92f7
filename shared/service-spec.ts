import type { Service } from './k8s-objects.ts';
import {
  BLOCK_MANAGER_PORT_NAME,
  DRIVER_POD_ANNOTATION,
  EXECUTOR_GONE_AT_ANNOTATION,
  EXECUTOR_POD_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
} from './labels.ts';
import { executorServiceName } from './naming.ts';
import type { PodIdentity } from './spark-pod.ts';

export interface ExecutorServiceInput {
  readonly namespace: string;
  readonly appId: string;
  readonly execId: string;
  readonly executorPodName: string;
  readonly driver: PodIdentity;
  readonly port: number;
  /** Set when the executor is already gone: starts the cool-down. */
  readonly executorGoneAt?: string | undefined;
}

/** The JSON body of a Service as this project creates it (plain data, ready for the API). */
export interface ServiceBody {
  apiVersion: 'v1';
  kind: 'Service';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: Array<{ apiVersion: 'v1'; kind: 'Pod'; name: string; uid: string; controller: true }>;
  };
  spec: {
    type: 'ClusterIP';
    selector: Record<string, string>;
    ports: Array<{ name: string; protocol: 'TCP'; port: number; targetPort: number }>;
  };
}

export function serviceSelector(appId: string, execId: string): Record<string, string> {
  return { [SPARK_APP_ID_LABEL]: appId, [SPARK_EXECUTOR_ID_LABEL]: execId };
}

/** Label selector (API syntax) for all of our Services of one application. */
export function appServicesSelector(appId: string): string {
  return `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${SPARK_APP_ID_LABEL}=${appId}`;
}

export const OUR_SERVICES_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/**
 * The Service that must exist for an executor, shaped like Spark's own (SPARK-52505):
 * a ClusterIP (not headless: only a virtual IP without endpoints gets kube-proxy's reject),
 * selecting exactly that executor, one TCP port `spark-block-manager`, owned by the driver pod.
 * blockOwnerDeletion stays unset: setting it needs update on pods/finalizers, which we do not grant.
 */
export function desiredExecutorService(input: ExecutorServiceInput): ServiceBody {
  const annotations: Record<string, string> = {
    [EXECUTOR_POD_ANNOTATION]: input.executorPodName,
    [DRIVER_POD_ANNOTATION]: input.driver.name,
  };
  if (input.executorGoneAt !== undefined) annotations[EXECUTOR_GONE_AT_ANNOTATION] = input.executorGoneAt;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: executorServiceName(input.appId, input.execId),
      namespace: input.namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, ...serviceSelector(input.appId, input.execId) },
      annotations,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: input.driver.name, uid: input.driver.uid, controller: true }],
    },
    spec: {
      type: 'ClusterIP',
      selector: serviceSelector(input.appId, input.execId),
      ports: [{ name: BLOCK_MANAGER_PORT_NAME, protocol: 'TCP', port: input.port, targetPort: input.port }],
    },
  };
}

/**
 * Ours = carries our managed-by label and every owner is a v1 Pod (the only owner we ever set).
 * Anything else with the same name belongs to someone else and is never written to.
 */
export function isOurService(service: Service): boolean {
  if (service.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE) return false;
  return (service.metadata.ownerReferences ?? []).every((ref) => ref.apiVersion === 'v1' && ref.kind === 'Pod');
}

export function serviceOwnerUids(service: Service): string[] {
  return (service.metadata.ownerReferences ?? []).filter((r) => r.kind === 'Pod').map((r) => r.uid);
}

export function isOwnedBy(service: Service, driver: PodIdentity): boolean {
  const owners = service.metadata.ownerReferences ?? [];
  return owners.length === 1 && owners[0]?.uid === driver.uid && owners[0]?.name === driver.name;
}

export function executorGoneAt(service: Service): string | undefined {
  return service.metadata.annotations?.[EXECUTOR_GONE_AT_ANNOTATION];
}

/** What a JSON merge patch must change to turn `existing` into `desired`; undefined when nothing drifted. */
export function serviceDriftPatch(existing: Service, desired: ServiceBody): Record<string, unknown> | undefined {
  const metadata: Record<string, unknown> = {};
  const spec: Record<string, unknown> = {};
  const labels = diffRecord(existing.metadata.labels ?? {}, desired.metadata.labels);
  if (labels !== undefined) metadata['labels'] = labels;
  // Only our own annotation keys are compared; the gone-at mark is never cleared by a drift fix.
  const wantedAnnotations = { ...desired.metadata.annotations };
  delete wantedAnnotations[EXECUTOR_GONE_AT_ANNOTATION];
  const annotations = diffRecord(existing.metadata.annotations ?? {}, wantedAnnotations);
  if (annotations !== undefined) metadata['annotations'] = annotations;
  if (!isOwnedBy(existing, { namespace: desired.metadata.namespace, ...desired.metadata.ownerReferences[0]! })) {
    metadata['ownerReferences'] = desired.metadata.ownerReferences;
  }
  if (!sameRecord(existing.spec?.selector ?? {}, desired.spec.selector)) spec['selector'] = desired.spec.selector;
  if (!samePorts(existing, desired)) spec['ports'] = desired.spec.ports;
  const patch: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) patch['metadata'] = metadata;
  if (Object.keys(spec).length > 0) patch['spec'] = spec;
  return Object.keys(patch).length === 0 ? undefined : patch;
}

/** Merge-patch fragment that adds/changes the wanted keys (extra keys on the object are left alone). */
function diffRecord(actual: Record<string, string>, wanted: Record<string, string>): Record<string, string> | undefined {
  const changes: Record<string, string> = {};
  for (const [key, value] of Object.entries(wanted)) if (actual[key] !== value) changes[key] = value;
  return Object.keys(changes).length === 0 ? undefined : changes;
}

function sameRecord(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

function samePorts(existing: Service, desired: ServiceBody): boolean {
  const ports = existing.spec?.ports ?? [];
  const want = desired.spec.ports[0]!;
  const have = ports[0];
  return (
    ports.length === 1 &&
    have !== undefined &&
    have.name === want.name &&
    have.port === want.port &&
    (have.protocol ?? 'TCP') === want.protocol &&
    (have.targetPort ?? have.port) === want.targetPort
  );
}
