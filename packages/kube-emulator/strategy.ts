/**
 * Per-resource behaviour the generic registry flow plugs in (the RESTCreateStrategy /
 * RESTUpdateStrategy of pkg/registry/core/{pod,service}): defaulting, validation, what
 * the main resource and the /status subresource may change, field selectors and the
 * strategic-merge-patch list semantics.
 */
import { admitPodCreate, defaultPod, defaultService, qosClass } from './defaults.ts';
import type { ListStrategy, StrategyLookup } from './patch.ts';
import type { FieldError } from './status.ts';
import { getPath, type Obj, type ResourceName, isRecord, str } from './types.ts';
import { validatePod, validatePodUpdate, validateService, validateServiceUpdate } from './validation.ts';

export interface Strategy {
  readonly resource: ResourceName;
  readonly kind: 'Pod' | 'Service';
  defaults(obj: Obj): void;
  /** Mutating admission on create (after defaults). */
  admitCreate(obj: Obj): void;
  validate(obj: Obj): FieldError[];
  validateUpdate(obj: Obj, old: Obj): FieldError[];
  /** Status the apiserver itself writes on create (the request's status is discarded). */
  initialStatus(obj: Obj): Obj;
  /** Status a seeded object keeps: what it was given, plus the create-time defaults. */
  seedStatus(obj: Obj): Obj;
  /** Field-selector labels the real conversion function accepts, and their values. */
  readonly fieldLabels: readonly string[];
  fields(obj: Obj): Record<string, string>;
  readonly smp: StrategyLookup;
}

const M = (mergeKey: string): ListStrategy => ({ mergeKey });

/** patchMergeKey / patchStrategy tags of the Go types, by JSON path ("[]" = list element). */
const COMMON_SMP: Readonly<Record<string, ListStrategy>> = {
  'metadata.ownerReferences': M('uid'),
  'metadata.finalizers': { primitiveMerge: true },
};

const CONTAINER_SMP = (prefix: string): Record<string, ListStrategy> => ({
  [prefix]: M('name'),
  [`${prefix}[].ports`]: M('containerPort'),
  [`${prefix}[].env`]: M('name'),
  [`${prefix}[].volumeMounts`]: M('mountPath'),
  [`${prefix}[].volumeDevices`]: M('devicePath'),
  [`${prefix}[].resizePolicy`]: M('resourceName'),
});

const POD_SMP: Readonly<Record<string, ListStrategy>> = {
  ...COMMON_SMP,
  ...CONTAINER_SMP('spec.containers'),
  ...CONTAINER_SMP('spec.initContainers'),
  'spec.ephemeralContainers': M('name'),
  'spec.volumes': M('name'),
  'spec.imagePullSecrets': M('name'),
  'spec.hostAliases': M('ip'),
  'spec.topologySpreadConstraints': M('topologyKey'),
  'spec.schedulingGates': M('name'),
  'spec.resourceClaims': M('name'),
  'spec.readinessGates': M('conditionType'),
  'status.conditions': M('type'),
  'status.podIPs': M('ip'),
  'status.hostIPs': M('ip'),
  'status.resourceClaimStatuses': M('name'),
};

const SERVICE_SMP: Readonly<Record<string, ListStrategy>> = {
  ...COMMON_SMP,
  'spec.ports': M('port'),
  'status.conditions': M('type'),
};

export const podStrategy: Strategy = {
  resource: 'pods',
  kind: 'Pod',
  defaults: defaultPod,
  admitCreate: admitPodCreate,
  validate: validatePod,
  validateUpdate: validatePodUpdate,
  initialStatus: (pod) => ({ phase: 'Pending', qosClass: qosClass(pod) }),
  seedStatus: (pod) => {
    const given = isRecord(pod['status']) ? { ...pod['status'] } : {};
    if (str(given['phase']) === '') given['phase'] = 'Pending';
    if (str(given['qosClass']) === '') given['qosClass'] = qosClass(pod);
    return given;
  },
  fieldLabels: [
    'metadata.name',
    'metadata.namespace',
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'spec.hostNetwork',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  fields: (pod) => ({
    'metadata.name': str(getPath(pod, 'metadata', 'name')),
    'metadata.namespace': str(getPath(pod, 'metadata', 'namespace')),
    'spec.nodeName': str(getPath(pod, 'spec', 'nodeName')),
    'spec.restartPolicy': str(getPath(pod, 'spec', 'restartPolicy')),
    'spec.schedulerName': str(getPath(pod, 'spec', 'schedulerName')),
    'spec.serviceAccountName': str(getPath(pod, 'spec', 'serviceAccountName')),
    'spec.hostNetwork': getPath(pod, 'spec', 'hostNetwork') === true ? 'true' : 'false',
    'status.phase': str(getPath(pod, 'status', 'phase')),
    'status.podIP': str(getPath(pod, 'status', 'podIP')),
    'status.nominatedNodeName': str(getPath(pod, 'status', 'nominatedNodeName')),
  }),
  smp: (path) => POD_SMP[path],
};

export const serviceStrategy: Strategy = {
  resource: 'services',
  kind: 'Service',
  defaults: defaultService,
  admitCreate: () => undefined,
  validate: validateService,
  validateUpdate: validateServiceUpdate,
  initialStatus: () => ({ loadBalancer: {} }),
  seedStatus: (svc) => (isRecord(svc['status']) ? { loadBalancer: {}, ...svc['status'] } : { loadBalancer: {} }),
  fieldLabels: ['metadata.name', 'metadata.namespace', 'spec.clusterIP', 'spec.type'],
  fields: (svc) => ({
    'metadata.name': str(getPath(svc, 'metadata', 'name')),
    'metadata.namespace': str(getPath(svc, 'metadata', 'namespace')),
    'spec.clusterIP': str(getPath(svc, 'spec', 'clusterIP')),
    'spec.type': str(getPath(svc, 'spec', 'type')),
  }),
  smp: (path) => SERVICE_SMP[path],
};

export const STRATEGIES: Readonly<Record<ResourceName, Strategy>> = { pods: podStrategy, services: serviceStrategy };
