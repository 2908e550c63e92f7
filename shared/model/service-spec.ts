import { type Service, podRefOf } from './k8s-objects.ts';
import {
  BLOCK_MANAGER_PORT_NAME,
  DRIVER_POD_ANNOTATION,
  EXECUTOR_GONE_AT_ANNOTATION,
  EXECUTOR_POD_ANNOTATION,
  EXECUTOR_UID_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  SPARK_APP_ID_LABEL,
  SPARK_EXECUTOR_ID_LABEL,
} from './labels.ts';
import { executorServiceName } from './naming.ts';
import { type PodRef, isSparkExecutorId } from './spark-pod.ts';

/**
 * The executor incarnation a Service belongs to. Recorded on the Service itself (labels,
 * annotations, the owner reference), so that any reader can tell whose it is without trusting
 * anything else: app id and exec id select the pods, the executor pod's name and UID say which
 * pod it was made for, and the driver's UID owns it.
 */
export interface ServiceIdentity {
  readonly appId: string;
  readonly execId: string;
  readonly executor: PodRef;
  readonly owner: PodRef;
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

/** Label selector (API syntax) for our Services of one application; with exec ids, only those slots. */
export function appServicesSelector(appId: string, execIds?: readonly string[]): string {
  const base = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${SPARK_APP_ID_LABEL}=${appId}`;
  return execIds === undefined ? base : `${base},${SPARK_EXECUTOR_ID_LABEL} in (${execIds.join(',')})`;
}

export const OUR_SERVICES_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/**
 * The Service that must exist for an executor, shaped like Spark's own (SPARK-52505):
 * a ClusterIP (not headless: only a virtual IP without endpoints gets kube-proxy's reject),
 * selecting exactly that executor's labels, one TCP port `spark-block-manager`, owned by the
 * driver pod. blockOwnerDeletion stays unset: setting it needs update on pods/finalizers, which
 * we do not grant.
 */
export function desiredExecutorService(namespace: string, identity: ServiceIdentity, port: number): ServiceBody {
  const { appId, execId, executor, owner } = identity;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: executorServiceName(appId, execId),
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, ...serviceSelector(appId, execId) },
      annotations: {
        [EXECUTOR_POD_ANNOTATION]: executor.name,
        [EXECUTOR_UID_ANNOTATION]: executor.uid,
        [DRIVER_POD_ANNOTATION]: owner.name,
      },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: owner.name, uid: owner.uid, controller: true }],
    },
    spec: {
      type: 'ClusterIP',
      selector: serviceSelector(appId, execId),
      ports: [{ name: BLOCK_MANAGER_PORT_NAME, protocol: 'TCP', port, targetPort: port }],
    },
  };
}

/** What the function keeps of a Service it read or wrote. */
export interface ServiceFact {
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  /**
   * Carries our managed-by label and no owner but at most one v1 Pod (the only owner we ever
   * set). Anything else with this name is someone else's and never written to.
   */
  readonly ours: boolean;
  /** The slot its labels name, when this is that slot's Service name. */
  readonly slot: { readonly appId: string; readonly execId: string } | undefined;
  /** The executor pod it records (annotations). */
  readonly executor: PodRef | undefined;
  /** Its one owner pod; undefined when it has none (orphaned, e.g. by a cascade=orphan delete). */
  readonly owner: PodRef | undefined;
  /** Complete identity: slot, executor and owner all recorded. */
  readonly identity: ServiceIdentity | undefined;
  /** When its executor was verified gone (ISO 8601), as recorded by the mark. */
  readonly goneAt: string | undefined;
  /** The managed part of the Service (type, selector, ports, our labels and annotations), for drift checks. */
  readonly shape: string;
  /** Keys of its selector: a merge patch must null the ones we do not want. */
  readonly selectorKeys: readonly string[];
  /** Its first port's target (the port it forwards to), when it has one. */
  readonly port: number | undefined;
}

export function serviceFact(service: Service): ServiceFact | undefined {
  const { name, uid, resourceVersion } = service.metadata;
  if (uid === undefined || resourceVersion === undefined) return undefined;
  const owners = service.metadata.ownerReferences ?? [];
  // An owner reference that can name no pod (podRefOf) was not written by us: not ours either.
  const ours =
    service.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE &&
    owners.length <= 1 &&
    owners.every((o) => podRefOf(o) !== undefined);
  const labels = service.metadata.labels ?? {};
  const annotations = service.metadata.annotations ?? {};
  const appId = labels[SPARK_APP_ID_LABEL];
  const execId = labels[SPARK_EXECUTOR_ID_LABEL];
  const slot =
    appId !== undefined && execId !== undefined && isSparkExecutorId(execId) && name === executorServiceName(appId, execId)
      ? { appId, execId }
      : undefined;
  const executorName = annotations[EXECUTOR_POD_ANNOTATION];
  const executorUid = annotations[EXECUTOR_UID_ANNOTATION];
  const executor =
    executorName !== undefined && executorUid !== undefined
      ? podRefOf({ apiVersion: 'v1', kind: 'Pod', name: executorName, uid: executorUid })
      : undefined;
  const owner = owners[0] === undefined ? undefined : podRefOf(owners[0]);
  return {
    name,
    uid,
    resourceVersion,
    ours,
    slot: ours ? slot : undefined,
    executor: ours ? executor : undefined,
    owner: ours ? owner : undefined,
    identity: ours && slot !== undefined && executor !== undefined && owner !== undefined ? { ...slot, executor, owner } : undefined,
    goneAt: annotations[EXECUTOR_GONE_AT_ANNOTATION],
    shape: shapeOf(service),
    selectorKeys: Object.keys(service.spec?.selector ?? {}),
    port: targetPortOf(service),
  };
}

function targetPortOf(service: Service): number | undefined {
  const first = service.spec?.ports?.[0];
  const target = first?.targetPort ?? first?.port;
  return typeof target === 'number' ? target : undefined;
}

/** The managed part of a Service, canonical, so that two shapes compare as strings. */
function shapeOf(service: Service | ServiceBody): string {
  const labels = service.metadata.labels ?? {};
  const annotations = service.metadata.annotations ?? {};
  const spec = service.spec ?? {};
  const selector = Object.entries(spec.selector ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const ports = (spec.ports ?? []).map((p) => [p.name ?? '', p.protocol ?? 'TCP', p.port, p.targetPort ?? p.port]);
  return JSON.stringify([
    spec.type ?? 'ClusterIP',
    selector,
    ports,
    [MANAGED_BY_LABEL, SPARK_APP_ID_LABEL, SPARK_EXECUTOR_ID_LABEL].map((k) => labels[k] ?? null),
    [EXECUTOR_POD_ANNOTATION, EXECUTOR_UID_ANNOTATION, DRIVER_POD_ANNOTATION].map((k) => annotations[k] ?? null),
  ]);
}

export function desiredShape(body: ServiceBody): string {
  return shapeOf(body);
}

/** The fact a just-created Service gives, without reading it back. */
export function serviceFactFromCreated(body: ServiceBody, uid: string, resourceVersion: string, identity: ServiceIdentity): ServiceFact {
  return {
    name: body.metadata.name,
    uid,
    resourceVersion,
    ours: true,
    slot: { appId: identity.appId, execId: identity.execId },
    executor: identity.executor,
    owner: identity.owner,
    identity,
    goneAt: undefined,
    shape: shapeOf(body),
    selectorKeys: Object.keys(body.spec.selector),
    port: body.spec.ports[0]?.targetPort,
  };
}

/**
 * JSON merge patch (RFC 7386) that puts the managed part of `desired` onto a Service of the same
 * identity. The selector is a map, which a merge patch merges: keys it must lose are set to null.
 */
export function shapePatch(desired: ServiceBody, currentSelectorKeys: readonly string[]): Record<string, unknown> {
  const selector: Record<string, string | null> = { ...desired.spec.selector };
  for (const key of currentSelectorKeys) if (!(key in selector)) selector[key] = null;
  return {
    metadata: { labels: desired.metadata.labels, annotations: desired.metadata.annotations },
    spec: { type: desired.spec.type, selector, ports: desired.spec.ports },
  };
}
