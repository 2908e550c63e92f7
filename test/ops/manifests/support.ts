/**
 * Helpers of the manifest suites: kustomize builds, the Kubernetes types and JSON schemas they are
 * checked against, and small readers of RBAC, triggers and sinks.
 * knative/base/image.env has no IMAGE in the repository (the build fails until a user sets it), so
 * the builds run on a copy with IMAGE set (test/ops/kustomize.ts).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { typecheckVirtual } from '../typecheck-virtual.ts';
import { kustomizeObjects, requireKubectl, skipWithoutKubectl } from '../kustomize.ts';
import { expect } from 'vitest';
import { Ajv } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { Service as KnativeService } from '@kubernetes-models/knative/serving.knative.dev/v1/Service';
import { ApiServerSource } from '@kubernetes-models/knative/sources.knative.dev/v1/ApiServerSource';
import { PingSource } from '@kubernetes-models/knative/sources.knative.dev/v1/PingSource';
import { Broker } from '@kubernetes-models/knative/eventing.knative.dev/v1/Broker';
import { Trigger } from '@kubernetes-models/knative/eventing.knative.dev/v1/Trigger';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ValidatingAdmissionPolicy } from 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy';
import { ValidatingAdmissionPolicyBinding } from 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// ---------------------------------------------------------------------------
// The names the manifests must agree on.
export const KSVC = 'spark-exec-svc';
export const FN_SA = 'spark-exec-svc-fn';
export const SOURCE_SA = 'spark-exec-svc-source';
export const PING_NAME = 'spark-exec-svc-sweep';
export const DEFAULT_NAMESPACE = 'spark';
export const FUNC_YAML = 'functions/executor-service/func.yaml';
export const SCRIPTS_CONFIGMAP = 'spark-exec-svc-scripts';
export const CLUSTER_WIDE = { installNamespace: 'spark-exec-svc', watch: ['spark-team-a', 'spark-team-b'] } as const;

export const INPUT_TYPES = {
  Resource: ['dev.knative.apiserver.resource.add', 'dev.knative.apiserver.resource.update', 'dev.knative.apiserver.resource.delete'],
  Reference: ['dev.knative.apiserver.ref.add', 'dev.knative.apiserver.ref.update', 'dev.knative.apiserver.ref.delete'],
} as const;
export const PING_TYPE = 'dev.knative.sources.ping';
/** Reply types of the function (functions/executor-service/handler.ts), plus the brief's spellings. */
export const OUTPUT_TYPES = [
  ...[
    'created',
    'verified',
    'patched',
    'deleted',
    'recreated',
    'conflict',
    'marked-gone',
    'unmarked',
    'collected',
    'ignored',
    'skipped',
  ].map((t) => `spark-exec-svc.service.${t}`),
  'spark-exec-svc.ignored',
  'spark-exec-svc.skipped',
  'spark-exec-svc.swept',
  'spark-exec-svc.sweep.completed',
];
export const REPLY_SOURCE = '/spark-exec-svc/executor-service';

/** The function's whole env contract (see functions/executor-service); Knative reserves PORT & K_*. */
export const ENV_CONTRACT = new Set([
  'WATCH_NAMESPACES',
  'OPT_IN_MODE',
  'BLOCK_MANAGER_PORT',
  'COOLDOWN_SECONDS',
  'LOG_LEVEL',
  'EVENT_DEADLINE_MS',
  'REQUEST_TIMEOUT_MS',
  'SWEEP_DEADLINE_MS',
  'REPLY_MODE',
  'MAX_BODY_BYTES',
  'SWEEP_PAGE_SIZE',
  'MAX_SERVICES_PER_NAMESPACE',
  // The HTTP edge (shared/ops/edge-config.ts).
  'REQUEST_RECEIVE_TIMEOUT_MS',
  'MAX_CONNECTIONS',
  'MAX_JSON_DEPTH',
  'SWEEP_MIN_INTERVAL_MS',
  'SENDER_AUTH',
  'SENDER_AUTH_AUDIENCE',
  'SENDER_AUTH_USERS',
  'SENDER_AUTH_CACHE_SECONDS',
]);
export const KNATIVE_RESERVED_ENV = new Set(['PORT', 'K_SERVICE', 'K_CONFIGURATION', 'K_REVISION']);

export const FN_PERMISSIONS = { pods: ['get', 'list'], services: ['create', 'delete', 'get', 'list', 'patch'] };
export const SOURCE_PERMISSIONS = { pods: ['get', 'list', 'watch'] };

/** What each build must look like. Every directory under knative/overlays must be listed. */
export interface Expectation {
  mode: 'Resource' | 'Reference';
  delivery: 'direct' | 'broker';
  deadLetter: boolean;
  /** namespaced: Roles + RoleBindings; per-namespace: ClusterRoles bound by a RoleBinding in each watched namespace. */
  rbac: 'namespaced' | 'per-namespace';
  /** false: the Knative Service comes from `func deploy`. */
  ksvc: boolean;
  namespace: string;
  /** Watched namespaces (namespaceSelector == WATCH_NAMESPACES); undefined = own namespace only. */
  watch?: readonly string[];
  /** SENDER_AUTH=tokenreview: the function may also create TokenReviews, and the sources request its audience. */
  senderAuth?: boolean;
}
export const BASE: Expectation = {
  mode: 'Resource',
  delivery: 'direct',
  deadLetter: false,
  rbac: 'namespaced',
  ksvc: true,
  namespace: DEFAULT_NAMESPACE,
};
export const BUILDS: Record<string, Expectation> = {
  knative: BASE,
  'knative/base': BASE,
  'knative/overlays/reference-mode': { ...BASE, mode: 'Reference' },
  // Behind a Broker the events are stored (and dead-lettered): Reference mode keeps pod specs out.
  'knative/overlays/broker': { ...BASE, mode: 'Reference', delivery: 'broker' },
  'knative/overlays/dead-letter': { ...BASE, mode: 'Reference', delivery: 'broker', deadLetter: true },
  'knative/overlays/cluster-wide': { ...BASE, rbac: 'per-namespace', namespace: CLUSTER_WIDE.installNamespace, watch: CLUSTER_WIDE.watch },
  'knative/overlays/func-deploy': { ...BASE, ksvc: false },
  // The base plus a PodMonitor and a PrometheusRule (test/ops/metrics-rules.test.ts checks them further).
  'knative/overlays/monitoring': BASE,
  // The base plus a cluster-scoped ValidatingAdmissionPolicy and its binding (test/ops/admission-policy.test.ts evaluates its CEL).
  'knative/overlays/admission-policy': BASE,
  'knative/overlays/sender-auth': { ...BASE, senderAuth: true },
};
/** Cluster-scoped kinds an install may hold (no namespace). */
export const CLUSTER_SCOPED = [
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
];

// ---------------------------------------------------------------------------
// Validators: one per kind, keyed by the model's own apiVersion/kind.
export interface ModelClass {
  new (data: never): { validate(): void };
  apiVersion: string;
  kind: string;
}
export interface Validator {
  model: ModelClass;
  /** Package module and interface name, for the excess-property type check. */
  typeModule: string;
  typeName: string;
  label: string;
}
export const VALIDATORS: Validator[] = [
  {
    model: KnativeService,
    typeModule: '@kubernetes-models/knative/serving.knative.dev/v1/Service',
    typeName: 'IService',
    label: '@kubernetes-models/knative serving.knative.dev/v1 Service',
  },
  {
    model: ApiServerSource,
    typeModule: '@kubernetes-models/knative/sources.knative.dev/v1/ApiServerSource',
    typeName: 'IApiServerSource',
    label: '@kubernetes-models/knative sources.knative.dev/v1 ApiServerSource',
  },
  {
    model: PingSource,
    typeModule: '@kubernetes-models/knative/sources.knative.dev/v1/PingSource',
    typeName: 'IPingSource',
    label: '@kubernetes-models/knative sources.knative.dev/v1 PingSource',
  },
  {
    model: Broker,
    typeModule: '@kubernetes-models/knative/eventing.knative.dev/v1/Broker',
    typeName: 'IBroker',
    label: '@kubernetes-models/knative eventing.knative.dev/v1 Broker',
  },
  {
    model: Trigger,
    typeModule: '@kubernetes-models/knative/eventing.knative.dev/v1/Trigger',
    typeName: 'ITrigger',
    label: '@kubernetes-models/knative eventing.knative.dev/v1 Trigger',
  },
  { model: Namespace, typeModule: 'kubernetes-models/v1/Namespace', typeName: 'INamespace', label: 'kubernetes-models v1 Namespace' },
  {
    model: ServiceAccount,
    typeModule: 'kubernetes-models/v1/ServiceAccount',
    typeName: 'IServiceAccount',
    label: 'kubernetes-models v1 ServiceAccount',
  },
  {
    model: Role,
    typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/Role',
    typeName: 'IRole',
    label: 'kubernetes-models rbac/v1 Role',
  },
  {
    model: RoleBinding,
    typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding',
    typeName: 'IRoleBinding',
    label: 'kubernetes-models rbac/v1 RoleBinding',
  },
  {
    model: ClusterRole,
    typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole',
    typeName: 'IClusterRole',
    label: 'kubernetes-models rbac/v1 ClusterRole',
  },
  { model: ConfigMap, typeModule: 'kubernetes-models/v1/ConfigMap', typeName: 'IConfigMap', label: 'kubernetes-models v1 ConfigMap' },
  {
    model: ClusterRoleBinding,
    typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding',
    typeName: 'IClusterRoleBinding',
    label: 'kubernetes-models rbac/v1 ClusterRoleBinding',
  },
  {
    model: ValidatingAdmissionPolicy,
    typeModule: 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy',
    typeName: 'IValidatingAdmissionPolicy',
    label: 'kubernetes-models admissionregistration/v1 ValidatingAdmissionPolicy',
  },
  {
    model: ValidatingAdmissionPolicyBinding,
    typeModule: 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding',
    typeName: 'IValidatingAdmissionPolicyBinding',
    label: 'kubernetes-models admissionregistration/v1 ValidatingAdmissionPolicyBinding',
  },
  {
    model: PodMonitor,
    typeModule: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor',
    typeName: 'IPodMonitor',
    label: '@kubernetes-models/prometheus-operator monitoring.coreos.com/v1 PodMonitor',
  },
  {
    model: PrometheusRule,
    typeModule: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
    typeName: 'IPrometheusRule',
    label: '@kubernetes-models/prometheus-operator monitoring.coreos.com/v1 PrometheusRule',
  },
];
export const validatorFor = (apiVersion: unknown, kind: unknown): Validator | undefined =>
  VALIDATORS.find((v) => v.model.apiVersion === apiVersion && v.model.kind === kind);

// ---------------------------------------------------------------------------
// Loose views of the objects (after schema validation the shapes are known).
export type Json = Record<string, unknown>;
export interface Meta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface K8sObject extends Json {
  apiVersion: string;
  kind: string;
  metadata: Meta;
}
export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}
export interface Binding extends K8sObject {
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}
export interface Ref {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}
export interface Destination {
  ref?: Ref;
  uri?: string;
}
export interface Selector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}
export interface Probe {
  httpGet?: { path?: string; port?: number | string };
  periodSeconds?: number;
}
export interface Container {
  name?: string;
  image?: string;
  env?: EnvVar[];
  ports?: { containerPort: number; name?: string }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    privileged?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type?: string };
  };
}
export interface KService extends K8sObject {
  spec: {
    template: {
      metadata?: Meta;
      spec: {
        serviceAccountName?: string;
        containerConcurrency?: number;
        timeoutSeconds?: number;
        securityContext?: unknown;
        containers: Container[];
      };
    };
  };
}
export interface Filter {
  exact?: Record<string, string>;
  prefix?: Record<string, string>;
  suffix?: Record<string, string>;
  all?: Filter[];
  any?: Filter[];
  not?: Filter;
  cesql?: string;
}
export interface TriggerObj extends K8sObject {
  spec: {
    broker: string;
    filter?: { attributes?: Record<string, string> };
    filters?: Filter[];
    subscriber: Destination;
    delivery?: { retry?: number; backoffPolicy?: string; backoffDelay?: string; deadLetterSink?: Destination };
  };
}

// ---------------------------------------------------------------------------
// Helpers.
const addFormats = addFormatsPlugin.default;
/** true: kubectl is missing outside CI (the reason is printed); under CI=true the builds run and fail. */
export const SKIP_KUBECTL = skipWithoutKubectl('manifests.test', 'the kustomize build checks');

/** Builds `dir` of the repository as a user does after setting IMAGE (a relative `dir` is in the configured copy). */
export const kustomize = (dir: string, root?: string): Promise<K8sObject[]> => kustomizeObjects<K8sObject>(requireKubectl(), dir, root);

export const id = (o: K8sObject) => `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;
export const ofKind = <T extends K8sObject = K8sObject>(objs: K8sObject[], kind: string, apiGroup?: string): T[] =>
  objs.filter((o) => o.kind === kind && (apiGroup === undefined || o.apiVersion.startsWith(`${apiGroup}/`))) as T[];
export const knativeServices = (objs: K8sObject[]) => ofKind<KService>(objs, 'Service', 'serving.knative.dev');
export const sorted = (xs: readonly string[]) => [...xs].sort();

/** Label-selector semantics (matchLabels AND matchExpressions), as the API server applies them. */
export function selectorMatches(sel: Selector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    switch (e.operator) {
      case 'In':
        if (!has || !(e.values ?? []).includes(value!)) return false;
        break;
      case 'NotIn':
        if (has && (e.values ?? []).includes(value!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        throw new Error(`unknown selector operator ${e.operator}`);
    }
  }
  return true;
}

/** Trigger filter semantics (Knative Subscriptions API dialects; entries of `filters` are ANDed). */
export function filterMatches(f: Filter, attrs: Record<string, string>): boolean {
  const dialects = (['exact', 'prefix', 'suffix', 'all', 'any', 'not', 'cesql'] as const).filter((k) => f[k] !== undefined);
  if (dialects.length !== 1) throw new Error(`a filter must use exactly one dialect, got ${JSON.stringify(f)}`);
  const each = (m: Record<string, string>, test: (a: string, b: string) => boolean) =>
    Object.entries(m).every(([k, v]) => attrs[k] !== undefined && test(attrs[k]!, v));
  switch (dialects[0]) {
    case 'exact':
      return each(f.exact!, (a, b) => a === b);
    case 'prefix':
      return each(f.prefix!, (a, b) => a.startsWith(b));
    case 'suffix':
      return each(f.suffix!, (a, b) => a.endsWith(b));
    case 'all':
      return f.all!.every((g) => filterMatches(g, attrs));
    case 'any':
      return f.any!.some((g) => filterMatches(g, attrs));
    case 'not':
      return !filterMatches(f.not!, attrs);
    default:
      throw new Error('cesql filters are not evaluated by this test; use the other dialects');
  }
}
export function triggerMatches(t: TriggerObj, attrs: Record<string, string>): boolean {
  if (t.spec.filters !== undefined && t.spec.filters.length > 0) return t.spec.filters.every((f) => filterMatches(f, attrs));
  return Object.entries(t.spec.filter?.attributes ?? {}).every(([k, v]) => attrs[k] === v);
}

/** resource -> sorted verbs granted to a ServiceAccount in this build, failing on anything not plain core-group. */
export function permissionsOf(objs: K8sObject[], sa: string): Record<string, string[]> {
  const bindings = [...ofKind<Binding>(objs, 'RoleBinding'), ...ofKind<Binding>(objs, 'ClusterRoleBinding')].filter((b) =>
    (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === sa),
  );
  const grants: Record<string, Set<string>> = {};
  for (const b of bindings) {
    const role = objs.find(
      (o) =>
        o.kind === b.roleRef.kind &&
        o.metadata.name === b.roleRef.name &&
        (o.kind === 'ClusterRole' || o.metadata.namespace === b.metadata.namespace),
    );
    expect(role, `${id(b)} must bind a role defined in this install, not ${b.roleRef.kind}/${b.roleRef.name}`).toBeDefined();
    for (const rule of (role as unknown as { rules?: PolicyRule[] }).rules ?? []) {
      // The one grant outside the core group: TokenReviews for sender authentication (overlays/sender-auth).
      if (rule.apiGroups?.[0] === 'authentication.k8s.io') {
        expect(rule, `${id(role!)}: only create tokenreviews`).toEqual({
          apiGroups: ['authentication.k8s.io'],
          resources: ['tokenreviews'],
          verbs: ['create'],
        });
        (grants['tokenreviews'] ??= new Set()).add('create');
        continue;
      }
      expect(rule.apiGroups, `${id(role!)}: core group only`).toEqual(['']);
      expect(rule.resourceNames, `${id(role!)}: no resourceNames`).toBeUndefined();
      expect(rule.nonResourceURLs, `${id(role!)}: no nonResourceURLs`).toBeUndefined();
      for (const r of rule.resources ?? []) for (const v of rule.verbs) (grants[r] ??= new Set()).add(v);
    }
  }
  return Object.fromEntries(Object.entries(grants).map(([r, vs]) => [r, sorted([...vs])]));
}

/** namespace ('' = cluster-wide) -> resource -> sorted verbs, for every binding of `sa` in this build. */
export function permissionsByNamespace(objs: K8sObject[], sa: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {};
  const bindings = [...ofKind<Binding>(objs, 'RoleBinding'), ...ofKind<Binding>(objs, 'ClusterRoleBinding')].filter((b) =>
    (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === sa),
  );
  for (const b of bindings) {
    const ns = b.kind === 'ClusterRoleBinding' ? '' : b.metadata.namespace!;
    const grants = permissionsOf([...objs.filter((o) => !['RoleBinding', 'ClusterRoleBinding'].includes(o.kind)), b], sa);
    const merged = (out[ns] ??= {});
    for (const [r, vs] of Object.entries(grants)) merged[r] = sorted([...new Set([...(merged[r] ?? []), ...vs])]);
  }
  return out;
}

const SERVICE_WRITES = ['create', 'update', 'patch', 'delete', 'deletecollection', '*'];
/** ClusterRoleBindings whose role lets someone write Services in every namespace. */
export function clusterWideServiceWriters(objs: K8sObject[]): string[] {
  return ofKind<Binding>(objs, 'ClusterRoleBinding')
    .filter((b) => {
      const role = objs.find((o) => o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name);
      // A role defined elsewhere cannot be checked here: count it as a writer.
      if (role === undefined) return true;
      return ((role as unknown as { rules?: PolicyRule[] }).rules ?? []).some(
        (r) =>
          (r.apiGroups ?? []).some((g) => g === '' || g === '*') &&
          (r.resources ?? []).some((x) => x === 'services' || x === '*') &&
          r.verbs.some((v) => SERVICE_WRITES.includes(v)),
      );
    })
    .map(id);
}

/** Where a sink ends up: the function directly, or through our Broker and a Trigger that accepts `attrs`. */
export function routesToFunction(objs: K8sObject[], sink: Destination, attrs: Record<string, string>): boolean {
  const ref = sink.ref;
  if (ref === undefined) return false;
  if (ref.apiVersion === 'serving.knative.dev/v1' && ref.kind === 'Service') return ref.name === KSVC;
  if (ref.apiVersion === 'eventing.knative.dev/v1' && ref.kind === 'Broker') {
    if (ofKind(objs, 'Broker').every((b) => b.metadata.name !== ref.name)) return false;
    return ofKind<TriggerObj>(objs, 'Trigger').some(
      (t) =>
        t.spec.broker === ref.name &&
        triggerMatches(t, attrs) &&
        t.spec.subscriber.ref?.kind === 'Service' &&
        t.spec.subscriber.ref.apiVersion === 'serving.knative.dev/v1' &&
        t.spec.subscriber.ref.name === KSVC,
    );
  }
  return false;
}

export function envMap(c: Container): Record<string, string> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? '']));
}

/** Type-checks every object as a literal of its kind's interface; returns "object: message" lines. */
export function excessPropertyErrors(entries: { label: string; obj: K8sObject }[]): string[] {
  const virtual = path.join(ROOT, 'test', '__manifest_types__.virtual.ts');
  const lines: string[] = [];
  const labels: string[] = [];
  VALIDATORS.forEach((v, i) => lines.push(`import type { ${v.typeName} as T${i} } from '${v.typeModule}';`));
  const header = lines.length;
  entries.forEach(({ label, obj }, i) => {
    const v = VALIDATORS.indexOf(validatorFor(obj.apiVersion, obj.kind)!);
    lines.push(`export const o${i}: T${v} = ${JSON.stringify(obj)};`);
    labels.push(label);
  });
  const text = lines.join('\n');
  return typecheckVirtual(virtual, text).map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (d.file?.fileName !== virtual || d.start === undefined) return msg;
    const line = d.file.getLineAndCharacterOfPosition(d.start).line;
    return `${labels[line - header] ?? '(imports)'}: ${msg}`;
  });
}

// ---------------------------------------------------------------------------
// func.yaml's JSON schema, checked with ajv. knative/func's schema says draft-04; it uses only
// keywords whose meaning draft-07 (ajv's default) keeps (no boolean exclusiveMinimum, no `id`), so
// it is compiled as draft-07. strictSchema: an unknown keyword fails the compile instead of being skipped.
export type Schema = Record<string, unknown>;
export function funcYamlValidator(schema: Schema): (value: unknown) => string[] {
  const { $schema, ...rest } = schema;
  expect($schema).toBe('http://json-schema.org/draft-04/schema#');
  const ajv = new Ajv({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false });
  addFormats(ajv);
  const validate = ajv.compile(rest);
  return (value) =>
    validate(value)
      ? []
      : (validate.errors ?? []).map(
          (e) =>
            `${e.instancePath || '/'}: ${e.message ?? e.keyword}${e.keyword === 'additionalProperties' ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})` : ''}${e.keyword === 'enum' ? ` ${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)}` : ''}`,
        );
}

// ===========================================================================
export const builds = new Map<string, K8sObject[]>();
