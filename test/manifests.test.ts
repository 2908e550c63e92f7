/**
 * Deployment manifests: knative/ (kustomize base + overlays), the func.yaml of the
 * function, and the Dockerfile (which ships the rolldown bundle).
 *
 * For the base and EVERY overlay this builds the kustomization with
 * `kubectl kustomize`, parses every document and
 *  1. validates each object with the published JSON schemas of kubernetes-models /
 *     @kubernetes-models/knative (Knative 1.22 API types). A kind without a
 *     validator fails the test, so nothing escapes validation;
 *  2. type-checks each object as an object literal against the same packages'
 *     TypeScript interfaces. The JSON schemas allow unknown fields; TypeScript's
 *     excess-property check does not, so a misspelt field fails here (Knative's
 *     webhooks would reject it at apply time);
 *  3. asserts the security and wiring properties (RBAC, scale-to-zero, non-root,
 *     selector, where each source's events end up).
 * func.yaml is validated against knative/func's schema (vendored in test/fixtures/).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { JSON_SCHEMA, load, loadAll } from 'js-yaml';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
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
import { ValidatingAdmissionPolicy } from 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy';
import { ValidatingAdmissionPolicyBinding } from 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------
// The names the manifests must agree on.
const KSVC = 'spark-exec-svc';
const FN_SA = 'spark-exec-svc-fn';
const SOURCE_SA = 'spark-exec-svc-source';
const PING_NAME = 'spark-exec-svc-sweep';
const DEFAULT_NAMESPACE = 'spark';
const FUNC_YAML = 'functions/executor-service/func.yaml';

const INPUT_TYPES = {
  Resource: ['dev.knative.apiserver.resource.add', 'dev.knative.apiserver.resource.update', 'dev.knative.apiserver.resource.delete'],
  Reference: ['dev.knative.apiserver.ref.add', 'dev.knative.apiserver.ref.update', 'dev.knative.apiserver.ref.delete'],
} as const;
const PING_TYPE = 'dev.knative.sources.ping';
/** Reply types of the function (functions/executor-service/handler.ts), plus the brief's spellings. */
const OUTPUT_TYPES = [
  ...['created', 'verified', 'patched', 'deleted', 'recreated', 'conflict', 'marked-gone', 'unmarked', 'collected', 'ignored', 'skipped']
    .map((t) => `spark-exec-svc.service.${t}`),
  'spark-exec-svc.ignored', 'spark-exec-svc.skipped', 'spark-exec-svc.swept', 'spark-exec-svc.sweep.completed',
];
const REPLY_SOURCE = '/spark-exec-svc/executor-service';

/** The function's whole env contract (see functions/executor-service); Knative reserves PORT & K_*. */
const ENV_CONTRACT = new Set([
  'WATCH_NAMESPACES', 'OPT_IN_MODE', 'BLOCK_MANAGER_PORT', 'COOLDOWN_SECONDS', 'LOG_LEVEL',
  'EVENT_DEADLINE_MS', 'REQUEST_TIMEOUT_MS', 'SWEEP_DEADLINE_MS', 'REPLY_MODE', 'MAX_BODY_BYTES', 'SWEEP_PAGE_SIZE', 'MAX_SERVICES_PER_NAMESPACE',
  // The HTTP edge (shared/edge-config.ts).
  'REQUEST_RECEIVE_TIMEOUT_MS', 'MAX_CONNECTIONS', 'MAX_JSON_DEPTH', 'SWEEP_MIN_INTERVAL_MS',
  'SENDER_AUTH', 'SENDER_AUTH_AUDIENCE', 'SENDER_AUTH_USERS', 'SENDER_AUTH_CACHE_SECONDS',
]);
const KNATIVE_RESERVED_ENV = new Set(['PORT', 'K_SERVICE', 'K_CONFIGURATION', 'K_REVISION']);

const FN_PERMISSIONS = { pods: ['get', 'list'], services: ['create', 'delete', 'get', 'list', 'patch'] };
const SOURCE_PERMISSIONS = { pods: ['get', 'list', 'watch'] };

/** What each build must look like. Every directory under knative/overlays must be listed. */
interface Expectation {
  mode: 'Resource' | 'Reference';
  delivery: 'direct' | 'broker';
  deadLetter: boolean;
  rbac: 'namespaced' | 'cluster';
  /** false: the Knative Service comes from `func deploy`. */
  ksvc: boolean;
  namespace: string;
  /** Watched namespaces (namespaceSelector == WATCH_NAMESPACES); undefined = own namespace only. */
  watch?: readonly string[];
  /** SENDER_AUTH=tokenreview: the function may also create TokenReviews, and the sources request its audience. */
  senderAuth?: boolean;
}
const BASE: Expectation = { mode: 'Resource', delivery: 'direct', deadLetter: false, rbac: 'namespaced', ksvc: true, namespace: DEFAULT_NAMESPACE };
const BUILDS: Record<string, Expectation> = {
  knative: BASE,
  'knative/base': BASE,
  'knative/overlays/reference-mode': { ...BASE, mode: 'Reference' },
  'knative/overlays/broker': { ...BASE, delivery: 'broker' },
  'knative/overlays/dead-letter': { ...BASE, delivery: 'broker', deadLetter: true },
  'knative/overlays/cluster-wide': { ...BASE, rbac: 'cluster', namespace: 'spark-exec-svc', watch: ['spark-team-a', 'spark-team-b'] },
  'knative/overlays/func-deploy': { ...BASE, ksvc: false },
  // The base plus a PodMonitor and a PrometheusRule (test/metrics-rules.test.ts checks them further).
  'knative/overlays/monitoring': BASE,
  // The base plus a cluster-scoped ValidatingAdmissionPolicy and its binding (test/admission-policy.test.ts evaluates its CEL).
  'knative/overlays/admission-policy': BASE,
  'knative/overlays/sender-auth': { ...BASE, senderAuth: true },
};
/** Cluster-scoped kinds an install may hold (no namespace). */
const CLUSTER_SCOPED = ['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'];

// ---------------------------------------------------------------------------
// Validators: one per kind, keyed by the model's own apiVersion/kind.
interface ModelClass {
  new (data: never): { validate(): void };
  apiVersion: string;
  kind: string;
}
interface Validator {
  model: ModelClass;
  /** Package module and interface name, for the excess-property type check. */
  typeModule: string;
  typeName: string;
  label: string;
}
const VALIDATORS: Validator[] = [
  { model: KnativeService, typeModule: '@kubernetes-models/knative/serving.knative.dev/v1/Service', typeName: 'IService', label: '@kubernetes-models/knative serving.knative.dev/v1 Service' },
  { model: ApiServerSource, typeModule: '@kubernetes-models/knative/sources.knative.dev/v1/ApiServerSource', typeName: 'IApiServerSource', label: '@kubernetes-models/knative sources.knative.dev/v1 ApiServerSource' },
  { model: PingSource, typeModule: '@kubernetes-models/knative/sources.knative.dev/v1/PingSource', typeName: 'IPingSource', label: '@kubernetes-models/knative sources.knative.dev/v1 PingSource' },
  { model: Broker, typeModule: '@kubernetes-models/knative/eventing.knative.dev/v1/Broker', typeName: 'IBroker', label: '@kubernetes-models/knative eventing.knative.dev/v1 Broker' },
  { model: Trigger, typeModule: '@kubernetes-models/knative/eventing.knative.dev/v1/Trigger', typeName: 'ITrigger', label: '@kubernetes-models/knative eventing.knative.dev/v1 Trigger' },
  { model: Namespace, typeModule: 'kubernetes-models/v1/Namespace', typeName: 'INamespace', label: 'kubernetes-models v1 Namespace' },
  { model: ServiceAccount, typeModule: 'kubernetes-models/v1/ServiceAccount', typeName: 'IServiceAccount', label: 'kubernetes-models v1 ServiceAccount' },
  { model: Role, typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/Role', typeName: 'IRole', label: 'kubernetes-models rbac/v1 Role' },
  { model: RoleBinding, typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding', typeName: 'IRoleBinding', label: 'kubernetes-models rbac/v1 RoleBinding' },
  { model: ClusterRole, typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole', typeName: 'IClusterRole', label: 'kubernetes-models rbac/v1 ClusterRole' },
  { model: ClusterRoleBinding, typeModule: 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding', typeName: 'IClusterRoleBinding', label: 'kubernetes-models rbac/v1 ClusterRoleBinding' },
  { model: ValidatingAdmissionPolicy, typeModule: 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy', typeName: 'IValidatingAdmissionPolicy', label: 'kubernetes-models admissionregistration/v1 ValidatingAdmissionPolicy' },
  { model: ValidatingAdmissionPolicyBinding, typeModule: 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding', typeName: 'IValidatingAdmissionPolicyBinding', label: 'kubernetes-models admissionregistration/v1 ValidatingAdmissionPolicyBinding' },
  { model: PodMonitor, typeModule: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor', typeName: 'IPodMonitor', label: '@kubernetes-models/prometheus-operator monitoring.coreos.com/v1 PodMonitor' },
  { model: PrometheusRule, typeModule: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule', typeName: 'IPrometheusRule', label: '@kubernetes-models/prometheus-operator monitoring.coreos.com/v1 PrometheusRule' },
];
const validatorFor = (apiVersion: unknown, kind: unknown): Validator | undefined =>
  VALIDATORS.find((v) => v.model.apiVersion === apiVersion && v.model.kind === kind);

// ---------------------------------------------------------------------------
// Loose views of the objects (after schema validation the shapes are known).
type Json = Record<string, unknown>;
interface Meta { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
interface K8sObject extends Json { apiVersion: string; kind: string; metadata: Meta }
interface PolicyRule { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[]; nonResourceURLs?: string[] }
interface Binding extends K8sObject { roleRef: { apiGroup: string; kind: string; name: string }; subjects?: { kind: string; name: string; namespace?: string }[] }
interface Ref { apiVersion: string; kind: string; name: string; namespace?: string }
interface Destination { ref?: Ref; uri?: string }
interface Selector { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] }
interface EnvVar { name: string; value?: string; valueFrom?: unknown }
interface Probe { httpGet?: { path?: string; port?: number | string }; periodSeconds?: number }
interface Container {
  name?: string; image?: string; env?: EnvVar[]; ports?: { containerPort: number; name?: string }[];
  readinessProbe?: Probe; livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean; runAsUser?: number; allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean;
    privileged?: boolean; capabilities?: { drop?: string[]; add?: string[] }; seccompProfile?: { type?: string };
  };
}
interface KService extends K8sObject {
  spec: { template: { metadata?: Meta; spec: { serviceAccountName?: string; containerConcurrency?: number; timeoutSeconds?: number; securityContext?: unknown; containers: Container[] } } };
}
interface Filter { exact?: Record<string, string>; prefix?: Record<string, string>; suffix?: Record<string, string>; all?: Filter[]; any?: Filter[]; not?: Filter; cesql?: string }
interface TriggerObj extends K8sObject {
  spec: { broker: string; filter?: { attributes?: Record<string, string> }; filters?: Filter[]; subscriber: Destination; delivery?: { retry?: number; backoffPolicy?: string; backoffDelay?: string; deadLetterSink?: Destination } };
}

// ---------------------------------------------------------------------------
// Helpers.
function findKubectl(): string | undefined {
  const candidates = [process.env['KUBECTL'], '/usr/bin/kubectl', ...(process.env['PATH'] ?? '').split(path.delimiter).map((d) => path.join(d, 'kubectl'))];
  return candidates.find((c): c is string => c !== undefined && c !== '' && existsSync(c));
}
const KUBECTL = findKubectl();
if (KUBECTL === undefined) {
  console.warn('[manifests.test] SKIPPING the kustomize build checks: no kubectl at /usr/bin/kubectl, $KUBECTL or on PATH (kubectl >= 1.27 with kustomize v5 is needed).');
}

async function kustomize(dir: string): Promise<K8sObject[]> {
  const { stdout } = await execFileAsync(KUBECTL!, ['kustomize', dir], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  const docs = loadAll(stdout).filter((d) => d !== null && d !== undefined);
  for (const d of docs) {
    if (typeof d !== 'object' || Array.isArray(d)) throw new Error(`${dir}: a document is not an object`);
  }
  return docs as K8sObject[];
}

const id = (o: K8sObject) => `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;
const ofKind = <T extends K8sObject = K8sObject>(objs: K8sObject[], kind: string, apiGroup?: string): T[] =>
  objs.filter((o) => o.kind === kind && (apiGroup === undefined || o.apiVersion.startsWith(`${apiGroup}/`))) as T[];
const knativeServices = (objs: K8sObject[]) => ofKind<KService>(objs, 'Service', 'serving.knative.dev');
const sorted = (xs: readonly string[]) => [...xs].sort();

/** Label-selector semantics (matchLabels AND matchExpressions), as the API server applies them. */
function selectorMatches(sel: Selector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    switch (e.operator) {
      case 'In': if (!has || !(e.values ?? []).includes(value!)) return false; break;
      case 'NotIn': if (has && (e.values ?? []).includes(value!)) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: throw new Error(`unknown selector operator ${e.operator}`);
    }
  }
  return true;
}

/** Trigger filter semantics (Knative Subscriptions API dialects; entries of `filters` are ANDed). */
function filterMatches(f: Filter, attrs: Record<string, string>): boolean {
  const dialects = (['exact', 'prefix', 'suffix', 'all', 'any', 'not', 'cesql'] as const).filter((k) => f[k] !== undefined);
  if (dialects.length !== 1) throw new Error(`a filter must use exactly one dialect, got ${JSON.stringify(f)}`);
  const each = (m: Record<string, string>, test: (a: string, b: string) => boolean) =>
    Object.entries(m).every(([k, v]) => attrs[k] !== undefined && test(attrs[k]!, v));
  switch (dialects[0]) {
    case 'exact': return each(f.exact!, (a, b) => a === b);
    case 'prefix': return each(f.prefix!, (a, b) => a.startsWith(b));
    case 'suffix': return each(f.suffix!, (a, b) => a.endsWith(b));
    case 'all': return f.all!.every((g) => filterMatches(g, attrs));
    case 'any': return f.any!.some((g) => filterMatches(g, attrs));
    case 'not': return !filterMatches(f.not!, attrs);
    default: throw new Error('cesql filters are not evaluated by this test; use the other dialects');
  }
}
function triggerMatches(t: TriggerObj, attrs: Record<string, string>): boolean {
  if (t.spec.filters !== undefined && t.spec.filters.length > 0) return t.spec.filters.every((f) => filterMatches(f, attrs));
  return Object.entries(t.spec.filter?.attributes ?? {}).every(([k, v]) => attrs[k] === v);
}

/** resource -> sorted verbs granted to a ServiceAccount in this build, failing on anything not plain core-group. */
function permissionsOf(objs: K8sObject[], sa: string): Record<string, string[]> {
  const bindings = [...ofKind<Binding>(objs, 'RoleBinding'), ...ofKind<Binding>(objs, 'ClusterRoleBinding')]
    .filter((b) => (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === sa));
  const grants: Record<string, Set<string>> = {};
  for (const b of bindings) {
    const role = objs.find((o) => o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name &&
      (o.kind === 'ClusterRole' || o.metadata.namespace === b.metadata.namespace));
    expect(role, `${id(b)} must bind a role defined in this install, not ${b.roleRef.kind}/${b.roleRef.name}`).toBeDefined();
    for (const rule of ((role as unknown as { rules?: PolicyRule[] }).rules ?? [])) {
      // The one grant outside the core group: TokenReviews for sender authentication (overlays/sender-auth).
      if (rule.apiGroups?.[0] === 'authentication.k8s.io') {
        expect(rule, `${id(role!)}: only create tokenreviews`).toEqual({ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] });
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

/** Where a sink ends up: the function directly, or through our Broker and a Trigger that accepts `attrs`. */
function routesToFunction(objs: K8sObject[], sink: Destination, attrs: Record<string, string>): boolean {
  const ref = sink.ref;
  if (ref === undefined) return false;
  if (ref.apiVersion === 'serving.knative.dev/v1' && ref.kind === 'Service') return ref.name === KSVC;
  if (ref.apiVersion === 'eventing.knative.dev/v1' && ref.kind === 'Broker') {
    if (ofKind(objs, 'Broker').every((b) => b.metadata.name !== ref.name)) return false;
    return ofKind<TriggerObj>(objs, 'Trigger').some((t) => t.spec.broker === ref.name && triggerMatches(t, attrs) &&
      t.spec.subscriber.ref?.kind === 'Service' && t.spec.subscriber.ref.apiVersion === 'serving.knative.dev/v1' && t.spec.subscriber.ref.name === KSVC);
  }
  return false;
}

function envMap(c: Container): Record<string, string> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? '']));
}

/** Type-checks every object as a literal of its kind's interface; returns "object: message" lines. */
function excessPropertyErrors(entries: { label: string; obj: K8sObject }[]): string[] {
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
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true, noEmit: true, skipLibCheck: true, types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (f === virtual ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, ...rest));
  host.fileExists = (f) => f === virtual || fileExists(f);
  host.readFile = (f) => (f === virtual ? text : readFile(f));
  const program = ts.createProgram([virtual], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (d.file?.fileName !== virtual || d.start === undefined) return msg;
    const line = d.file.getLineAndCharacterOfPosition(d.start).line;
    return `${labels[line - header] ?? '(imports)'}: ${msg}`;
  });
}

// ---------------------------------------------------------------------------
// A draft-04 JSON-schema validator for the keywords func_yaml-schema.json uses. It
// throws on any other keyword, so a newer schema cannot be half-checked silently.
type Schema = Record<string, unknown>;
const KNOWN_KEYWORDS = new Set(['$schema', '$ref', 'description', 'title', 'type', 'properties', 'additionalProperties',
  'patternProperties', 'required', 'items', 'enum', 'pattern', 'minimum', 'maximum', 'oneOf', 'format', 'definitions']);
function validateJsonSchema(root: Schema, schema: Schema, value: unknown, at: string, errors: string[]): void {
  for (const k of Object.keys(schema)) if (!KNOWN_KEYWORDS.has(k)) throw new Error(`schema keyword ${k} at ${at} is not supported by this test`);
  if (typeof schema['$ref'] === 'string') {
    const ref = schema['$ref'];
    if (!ref.startsWith('#/definitions/')) throw new Error(`unsupported $ref ${ref}`);
    const target = (root['definitions'] as Record<string, Schema>)[ref.slice('#/definitions/'.length)];
    if (target === undefined) throw new Error(`dangling $ref ${ref}`);
    validateJsonSchema(root, target, value, at, errors);
  }
  const type = schema['type'];
  if (typeof type === 'string') {
    const ok = type === 'object' ? typeof value === 'object' && value !== null && !Array.isArray(value)
      : type === 'array' ? Array.isArray(value)
      : type === 'integer' ? Number.isInteger(value)
      : type === 'number' ? typeof value === 'number'
      : typeof value === type;
    if (!ok) { errors.push(`${at}: expected ${type}, got ${JSON.stringify(value)}`); return; }
  }
  if (Array.isArray(schema['enum']) && !schema['enum'].includes(value)) errors.push(`${at}: ${JSON.stringify(value)} not in ${JSON.stringify(schema['enum'])}`);
  if (typeof value === 'string') {
    if (typeof schema['pattern'] === 'string' && !new RegExp(schema['pattern'], 'u').test(value)) errors.push(`${at}: ${JSON.stringify(value)} does not match ${schema['pattern']}`);
    if (schema['format'] === 'date-time' && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value)) errors.push(`${at}: ${value} is not an RFC 3339 date-time`);
  }
  if (typeof value === 'number') {
    if (typeof schema['minimum'] === 'number' && value < schema['minimum']) errors.push(`${at}: ${value} < ${schema['minimum']}`);
    if (typeof schema['maximum'] === 'number' && value > schema['maximum']) errors.push(`${at}: ${value} > ${schema['maximum']}`);
  }
  if (Array.isArray(value) && schema['items'] !== undefined) {
    value.forEach((item, i) => validateJsonSchema(root, schema['items'] as Schema, item, `${at}[${i}]`, errors));
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    for (const req of (schema['required'] as string[] | undefined) ?? []) if (!(req in obj)) errors.push(`${at}: missing required ${req}`);
    const props = (schema['properties'] as Record<string, Schema> | undefined) ?? {};
    const patterns = Object.entries((schema['patternProperties'] as Record<string, Schema> | undefined) ?? {});
    for (const [k, v] of Object.entries(obj)) {
      let known = false;
      if (props[k] !== undefined) { known = true; validateJsonSchema(root, props[k], v, `${at}.${k}`, errors); }
      for (const [p, s] of patterns) if (new RegExp(p, 'u').test(k)) { known = true; validateJsonSchema(root, s, v, `${at}.${k}`, errors); }
      if (!known && schema['additionalProperties'] === false) errors.push(`${at}: unknown key ${k}`);
    }
  }
  if (Array.isArray(schema['oneOf'])) {
    const passing = (schema['oneOf'] as Schema[]).filter((s) => { const e: string[] = []; validateJsonSchema(root, s, value, at, e); return e.length === 0; });
    if (passing.length !== 1) errors.push(`${at}: must match exactly one of oneOf, matched ${passing.length}`);
  }
}

// ===========================================================================
const builds = new Map<string, K8sObject[]>();

describe.skipIf(KUBECTL === undefined)('knative/ kustomize builds', () => {
  beforeAll(async () => {
    const results = await Promise.all(Object.keys(BUILDS).map(async (dir) => [dir, await kustomize(dir)] as const));
    for (const [dir, objs] of results) builds.set(dir, objs);
  });

  it('covers the base and every overlay directory', () => {
    const overlays = readdirSync(path.join(ROOT, 'knative/overlays'), { withFileTypes: true })
      .filter((d) => d.isDirectory() && existsSync(path.join(ROOT, 'knative/overlays', d.name, 'kustomization.yaml')))
      .map((d) => `knative/overlays/${d.name}`);
    expect(sorted(overlays)).toEqual(sorted(Object.keys(BUILDS).filter((d) => d.startsWith('knative/overlays/'))));
  });

  it('`kubectl apply -k knative/` installs exactly the base', () => {
    expect(builds.get('knative')).toEqual(builds.get('knative/base'));
  });

  it('every object has a validator and passes its published JSON schema', () => {
    const problems: string[] = [];
    for (const [dir, objs] of builds) {
      expect(objs.length, dir).toBeGreaterThan(0);
      for (const o of objs) {
        const v = validatorFor(o.apiVersion, o.kind);
        if (v === undefined) { problems.push(`${dir}: ${o.apiVersion} ${id(o)} has no validator`); continue; }
        try {
          new v.model(o as never).validate();
        } catch (e) {
          problems.push(`${dir}: ${id(o)}: ${(e as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('no object has a field its API type does not define (TypeScript excess-property check)', () => {
    const entries = [...builds].flatMap(([dir, objs]) => objs.map((obj) => ({ label: `${dir}: ${id(obj)}`, obj })));
    expect(entries.every((e) => validatorFor(e.obj.apiVersion, e.obj.kind) !== undefined)).toBe(true);
    expect(excessPropertyErrors(entries)).toEqual([]);
  });

  it('the type check does catch a misspelt field (guards the check above)', () => {
    const base = builds.get('knative/base')!;
    const ksvc = structuredClone(knativeServices(base)[0]!);
    (ksvc.spec.template.spec as Json)['containerConcurency'] = 20;
    const role = structuredClone(ofKind(base, 'Role')[0]!) as Json;
    (role['rules'] as Json[])[0]!['verb'] = ['get'];
    const errors = excessPropertyErrors([{ label: 'ksvc', obj: ksvc }, { label: 'role', obj: role as K8sObject }]);
    expect(errors.some((e) => e.startsWith('ksvc:') && e.includes('containerConcurency'))).toBe(true);
    expect(errors.some((e) => e.startsWith('role:') && e.includes('"verb"') && e.includes('does not exist'))).toBe(true);
  });

  it.each(['knative/base', 'knative/overlays/broker', 'knative/overlays/cluster-wide'])(
    'a wrapping kustomization can move %s to another namespace and set the image (as docs/deploy.md says)',
    async (dir) => {
      const tmp = mkdtempSync(path.join(os.tmpdir(), 'spark-exec-svc-wrap-'));
      try {
        writeFileSync(path.join(tmp, 'kustomization.yaml'), [
          'apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', 'namespace: elsewhere',
          'resources:', `  - ${path.relative(tmp, path.join(ROOT, dir))}`,
          'images:', '  - name: spark-exec-svc', '    newName: registry.example.com/team/spark-exec-svc', '    newTag: "0.1.0"', '',
        ].join('\n'));
        const objs = await kustomize(tmp);
        for (const o of objs) {
          if (o.kind === 'ClusterRole') continue;
          if (o.kind === 'Namespace' || o.kind === 'ClusterRoleBinding') expect(o.kind === 'Namespace' ? o.metadata.name : (o as Binding).subjects?.[0]?.namespace, id(o)).toBe('elsewhere');
          else expect(o.metadata.namespace, id(o)).toBe('elsewhere');
          if (o.kind === 'RoleBinding') expect((o as Binding).subjects?.[0]?.namespace, id(o)).toBe('elsewhere');
        }
        const fn = knativeServices(objs).find((s) => s.metadata.name === KSVC)!;
        expect(fn.spec.template.spec.containers[0]!.image).toBe('registry.example.com/team/spark-exec-svc:0.1.0');
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
  );

  describe.each(Object.entries(BUILDS))('%s', (dir, want) => {
    const objs = () => builds.get(dir)!;

    it('is one install: namespaced objects share one namespace, no duplicates', () => {
      const namespaced = objs().filter((o) => !CLUSTER_SCOPED.includes(o.kind));
      for (const o of objs().filter((x) => CLUSTER_SCOPED.includes(x.kind))) expect(o.metadata.namespace, `${id(o)} is cluster-scoped`).toBeUndefined();
      expect(new Set(namespaced.map((o) => o.metadata.namespace))).toEqual(new Set([want.namespace]));
      const ids = objs().map(id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const ns of ofKind(objs(), 'Namespace')) expect(ns.metadata.name).toBe(want.namespace);
    });

    it('RBAC: no wildcards, no pod writes, no pods/finalizers; every role bound to one of our two identities', () => {
      const roles = objs().filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
      const bindings = objs().filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') as Binding[];
      const tokenReview = want.senderAuth === true ? ['Cluster'] : [];
      expect(sorted(roles.map((r) => r.kind))).toEqual(sorted([...(want.rbac === 'cluster' ? ['ClusterRole', 'ClusterRole'] : ['Role', 'Role']), ...tokenReview.map((k) => `${k}Role`)]));
      expect(sorted(bindings.map((b) => b.kind))).toEqual(sorted([...(want.rbac === 'cluster' ? ['ClusterRoleBinding', 'ClusterRoleBinding'] : ['RoleBinding', 'RoleBinding']), ...tokenReview.map((k) => `${k}RoleBinding`)]));
      for (const r of roles) {
        for (const rule of ((r as unknown as { rules?: PolicyRule[] }).rules ?? [])) {
          for (const field of [rule.apiGroups ?? [], rule.resources ?? [], rule.verbs]) expect(field, id(r)).not.toContain('*');
          expect(rule.resources, id(r)).not.toContain('pods/finalizers');
          expect((rule.resources ?? []).filter((x) => x.includes('/')), `${id(r)}: no subresources`).toEqual([]);
          if ((rule.resources ?? []).includes('pods')) {
            expect(rule.verbs.filter((v) => !['get', 'list', 'watch'].includes(v)), `${id(r)}: pod writes`).toEqual([]);
          }
        }
        expect(r).not.toHaveProperty('aggregationRule');
      }
      const serviceAccounts = ofKind(objs(), 'ServiceAccount');
      expect(sorted(serviceAccounts.map((s) => s.metadata.name))).toEqual(sorted([FN_SA, SOURCE_SA]));
      for (const b of bindings) {
        expect(b.subjects?.length, id(b)).toBe(1);
        const s = b.subjects![0]!;
        expect(s.kind).toBe('ServiceAccount');
        expect([FN_SA, SOURCE_SA]).toContain(s.name);
        expect(s.namespace, `${id(b)}: subject namespace`).toBe(want.namespace);
        expect(b.roleRef.apiGroup).toBe('rbac.authorization.k8s.io');
      }
    });

    it('the function may only get/list pods and get/list/create/patch/delete services (and create TokenReviews with sender authentication)', () => {
      expect(permissionsOf(objs(), FN_SA)).toEqual(want.senderAuth === true ? { ...FN_PERMISSIONS, tokenreviews: ['create'] } : FN_PERMISSIONS);
    });

    it(want.senderAuth === true ? 'sender authentication: both sources request the audience the function checks' : 'sender authentication is off (the default)', () => {
      const fn = knativeServices(objs()).find((s) => s.metadata.name === KSVC);
      const env = fn === undefined ? {} : envMap(fn.spec.template.spec.containers[0]!);
      const audiences = [...ofKind(objs(), 'ApiServerSource'), ...ofKind(objs(), 'PingSource')].map((o) => (o as unknown as { spec: { sink: { audience?: string } } }).spec.sink.audience);
      if (want.senderAuth !== true) {
        expect(env['SENDER_AUTH']).toBeUndefined();
        expect(audiences).toEqual([undefined, undefined]);
        return;
      }
      expect(env['SENDER_AUTH']).toBe('tokenreview');
      // Knative's audience format for the sink: <group>/<kind>/<namespace>/<name>, lower case (knative/eventing pkg/auth/audience.go).
      expect(env['SENDER_AUTH_AUDIENCE']).toBe(`serving.knative.dev/service/${want.namespace}/${KSVC}`);
      expect(audiences).toEqual([env['SENDER_AUTH_AUDIENCE'], env['SENDER_AUTH_AUDIENCE']]);
      // The sources' OIDC ServiceAccounts: <source name> + "oidc-<group>-<kind>" lower case, when that fits in 63 characters (pkg/auth/serviceaccount.go, kmeta.ChildName).
      const oidcUser = (name: string, kind: string) => {
        const sa = `${name}oidc-sources.knative.dev-${kind}`;
        expect(sa.length).toBeLessThanOrEqual(63);
        return `system:serviceaccount:${want.namespace}:${sa}`;
      };
      const source = ofKind(objs(), 'ApiServerSource')[0]!.metadata.name;
      expect(env['SENDER_AUTH_USERS']?.split(',')).toEqual([oidcUser(source, 'apiserversource'), oidcUser(PING_NAME, 'pingsource')]);
    });

    it('the ApiServerSource may only get/list/watch pods', () => {
      expect(permissionsOf(objs(), SOURCE_SA)).toEqual(SOURCE_PERMISSIONS);
    });

    it('the ApiServerSource watches only Spark driver/executor pods and reaches the function', () => {
      const sources = ofKind(objs(), 'ApiServerSource');
      expect(sources).toHaveLength(1);
      const spec = (sources[0] as unknown as { spec: { mode: string; serviceAccountName: string; owner?: unknown; filters?: unknown; namespaceSelector?: Selector; resources: { apiVersion: string; kind: string; selector?: Selector }[]; sink: Destination } }).spec;
      expect(spec.mode).toBe(want.mode);
      expect(spec.serviceAccountName).toBe(SOURCE_SA);
      expect(spec.resources).toHaveLength(1);
      const res = spec.resources[0]!;
      expect([res.apiVersion, res.kind]).toEqual(['v1', 'Pod']);
      expect(res.selector).toEqual({ matchExpressions: [{ key: 'spark-role', operator: 'In', values: ['driver', 'executor'] }] });
      const sel = res.selector!;
      expect(selectorMatches(sel, { 'spark-role': 'driver', 'spark-app-selector': 'spark-1' })).toBe(true);
      expect(selectorMatches(sel, { 'spark-role': 'executor' })).toBe(true);
      expect(selectorMatches(sel, { 'spark-role': 'shuffle' })).toBe(false);
      expect(selectorMatches(sel, { app: 'web' })).toBe(false);
      expect(selectorMatches(sel, {})).toBe(false);
      if (want.watch === undefined) {
        expect(spec.namespaceSelector).toBeUndefined();
      } else {
        // Never `{}` (= every namespace): exactly the listed namespaces.
        expect(spec.namespaceSelector).toEqual({ matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [...want.watch] }] });
      }
      for (const type of INPUT_TYPES[want.mode]) {
        expect(routesToFunction(objs(), spec.sink, { type, kind: 'Pod', source: 'https://10.96.0.1:443' }), `${type} reaches ${KSVC}`).toBe(true);
      }
      expect(spec.sink.ref?.kind).toBe(want.delivery === 'direct' ? 'Service' : 'Broker');
    });

    it('the PingSource sends {"action":"sweep"} every five minutes (so that the function can scale to zero in between)', () => {
      const pings = ofKind(objs(), 'PingSource');
      expect(pings).toHaveLength(1);
      const p = pings[0]!;
      expect(p.metadata.name).toBe(PING_NAME);
      const spec = (p as unknown as { spec: { schedule: string; contentType?: string; data?: string; sink: Destination } }).spec;
      expect(spec.schedule).toBe('*/5 * * * *');
      expect(spec.contentType).toBe('application/json');
      expect(JSON.parse(spec.data ?? 'null')).toEqual({ action: 'sweep' });
      const source = `/apis/v1/namespaces/${want.namespace}/pingsources/${PING_NAME}`;
      expect(routesToFunction(objs(), spec.sink, { type: PING_TYPE, source })).toBe(true);
      expect(spec.sink.ref?.kind).toBe(want.delivery === 'direct' ? 'Service' : 'Broker');
    });

    if (want.ksvc) it('the Knative Service: scale-to-zero, bounded, probes, non-root, read-only root', () => {
      const services = knativeServices(objs());
      const extra = want.deadLetter ? ['spark-exec-svc-dead-letter'] : [];
      expect(sorted(services.map((s) => s.metadata.name))).toEqual(sorted([KSVC, ...extra]));
      const svc = services.find((s) => s.metadata.name === KSVC)!;
      expect(svc.metadata.labels?.['networking.knative.dev/visibility']).toBe('cluster-local');
      // Knative rejects autoscaling annotations on the Service's own metadata.
      expect(Object.keys(svc.metadata.annotations ?? {}).filter((k) => k.startsWith('autoscaling.knative.dev/'))).toEqual([]);
      const ann = svc.spec.template.metadata?.annotations ?? {};
      expect(ann['autoscaling.knative.dev/min-scale']).toBe('0');
      expect(Number(ann['autoscaling.knative.dev/max-scale'])).toBeGreaterThanOrEqual(1);
      const pod = svc.spec.template.spec;
      expect(pod.serviceAccountName).toBe(FN_SA);
      expect(pod.containerConcurrency).toBeGreaterThan(0);
      // Pod-level securityContext needs the kubernetes.podspec-securitycontext flag.
      expect(pod.securityContext).toBeUndefined();
      expect(pod.containers).toHaveLength(1);
      const c = pod.containers[0]!;
      expect(c.image).toMatch(/(^|\/)spark-exec-svc([:@]|$)/);
      const env = envMap(c);
      for (const name of Object.keys(env)) {
        expect(ENV_CONTRACT.has(name), `env ${name} is part of the contract`).toBe(true);
        expect(KNATIVE_RESERVED_ENV.has(name), `env ${name} is reserved by Knative`).toBe(false);
      }
      expect((c.env ?? []).every((e) => e.valueFrom === undefined)).toBe(true);
      expect(env['OPT_IN_MODE']).toBe('label');
      expect(['debug', 'info', 'warn', 'error']).toContain(env['LOG_LEVEL']);
      for (const n of ['COOLDOWN_SECONDS', 'EVENT_DEADLINE_MS', 'MAX_BODY_BYTES', 'SWEEP_PAGE_SIZE']) expect(env[n], n).toMatch(/^\d+$/);
      expect(pod.timeoutSeconds! * 1000, 'timeoutSeconds covers EVENT_DEADLINE_MS').toBeGreaterThanOrEqual(Number(env['EVENT_DEADLINE_MS'] ?? 20000));
      expect(pod.timeoutSeconds! * 1000, 'timeoutSeconds covers SWEEP_DEADLINE_MS').toBeGreaterThanOrEqual(Number(env['SWEEP_DEADLINE_MS']));
      // Replies: a direct sink ignores them, a Broker republishes them.
      expect(env['REPLY_MODE']).toBe('none');
      const deadline = Number(env['EVENT_DEADLINE_MS']);
      expect(Number(env['REQUEST_TIMEOUT_MS']), 'one request fits in the event budget').toBeLessThan(deadline);
      if (want.delivery === 'direct') {
        // The ApiServerSource's 1 try + 5 retries (0.1..1.6 s backoff) must stall a namespace ≤ 15 s.
        expect(6 * deadline + 3100, 'worst stall of a namespace behind one failing event').toBeLessThanOrEqual(15_000);
      } else {
        expect(deadline, 'behind a Broker the budget rides out short outages').toBe(10_000);
      }
      expect(pod.timeoutSeconds!).toBeLessThanOrEqual(600);
      if (want.watch === undefined) expect(env['WATCH_NAMESPACES']).toBeUndefined();
      else expect(env['WATCH_NAMESPACES']?.split(',')).toEqual([...want.watch]);
      const containerPort = c.ports?.[0]?.containerPort ?? 8080;
      expect(c.ports ?? [], 'one serving port, http1').toEqual(c.ports === undefined ? [] : [{ containerPort: 8080, name: 'http1' }]);
      expect(c.readinessProbe?.httpGet?.path).toBe('/health/readiness');
      expect(c.livenessProbe?.httpGet?.path).toBe('/health/liveness');
      for (const probe of [c.readinessProbe!, c.livenessProbe!]) {
        expect(probe.httpGet?.port, 'Knative: a probe may only name the serving port').toBe(containerPort);
      }
      expect(c.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
      expect(c.resources?.limits).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
      const sc = c.securityContext!;
      expect(sc.runAsNonRoot).toBe(true);
      expect(sc.runAsUser).toBe(65532);
      expect(sc.allowPrivilegeEscalation).toBe(false);
      expect(sc.readOnlyRootFilesystem).toBe(true);
      expect(sc.privileged).not.toBe(true);
      expect(sc.capabilities).toEqual({ drop: ['ALL'] });
      expect(sc.seccompProfile).toEqual({ type: 'RuntimeDefault' });
    });

    if (!want.ksvc) it('leaves the Knative Service to `func deploy`', () => {
      expect(knativeServices(objs())).toEqual([]);
    });

    if (want.delivery === 'broker') it('Triggers: only input types reach the function, replies do not loop, retries are set', () => {
      const triggers = ofKind<TriggerObj>(objs(), 'Trigger');
      expect(triggers.length).toBeGreaterThan(0);
      const brokerNames = ofKind(objs(), 'Broker').map((b) => b.metadata.name);
      const ns = want.namespace;
      for (const t of triggers) {
        expect(brokerNames).toContain(t.spec.broker);
        expect(t.spec.subscriber.ref).toEqual({ apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: KSVC });
        expect(t.spec.filter, `${id(t)}: uses the filters field`).toBeUndefined();
        expect(t.spec.filters?.length, id(t)).toBeGreaterThan(0);
        expect(t.spec.delivery).toMatchObject({ retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT0.5S' });
        if (want.deadLetter) {
          const dls = t.spec.delivery?.deadLetterSink?.ref;
          expect(dls, `${id(t)}: deadLetterSink`).toBeDefined();
          expect(objs().some((o) => o.apiVersion === dls!.apiVersion && o.kind === dls!.kind && o.metadata.name === dls!.name), 'dead-letter sink is part of the install').toBe(true);
        } else {
          expect(t.spec.delivery?.deadLetterSink).toBeUndefined();
        }
        // The function's replies go back into the Broker: no Trigger may take them.
        for (const type of OUTPUT_TYPES) expect(triggerMatches(t, { type, source: REPLY_SOURCE, kind: 'Pod' }), `${id(t)} vs ${type}`).toBe(false);
        // Another PingSource in the namespace must not trigger sweeps.
        expect(triggerMatches(t, { type: PING_TYPE, source: `/apis/v1/namespaces/${ns}/pingsources/someone-else` })).toBe(false);
        // Other kinds from another ApiServerSource are not ours.
        expect(triggerMatches(t, { type: INPUT_TYPES.Resource[0], kind: 'Deployment', source: 'https://10.96.0.1:443' })).toBe(false);
      }
      // Both modes' types are routed, so the broker overlay also works with Reference mode.
      for (const type of [...INPUT_TYPES.Resource, ...INPUT_TYPES.Reference]) {
        expect(triggers.some((t) => triggerMatches(t, { type, kind: 'Pod', source: 'https://10.96.0.1:443' })), type).toBe(true);
      }
    });

    if (want.deadLetter) it('the dead-letter sink is a small non-root, cluster-local Knative Service', () => {
      const dls = knativeServices(objs()).filter((s) => s.metadata.name !== KSVC);
      expect(dls).toHaveLength(1);
      const s = dls[0]!;
      expect(s.metadata.labels?.['networking.knative.dev/visibility']).toBe('cluster-local');
      expect(s.spec.template.metadata?.annotations?.['autoscaling.knative.dev/min-scale']).toBe('0');
      const sc = s.spec.template.spec.containers[0]!.securityContext!;
      expect([sc.runAsNonRoot, sc.allowPrivilegeEscalation, sc.readOnlyRootFilesystem]).toEqual([true, false, true]);
    });
  });
});

// ===========================================================================
describe(FUNC_YAML, () => {
  const text = readFileSync(path.join(ROOT, FUNC_YAML), 'utf8');
  // JSON schema: timestamps stay strings, as func's YAML decoder sees them.
  const f = load(text, { schema: JSON_SCHEMA }) as {
    specVersion: string; name: string; runtime: string; namespace: string; invoke: string; deployer?: string;
    run: { envs: { name: string; value: string }[] };
    deploy: {
      annotations?: Record<string, string>; labels?: { key: string; value: string }[]; serviceAccountName: string;
      healthEndpoints: { liveness: string; readiness: string };
      options: { scale: { min: number; max: number }; resources: { requests: Record<string, string>; limits: Record<string, string | number> } };
    };
  };

  it('conforms to knative/func schema/func_yaml-schema.json (no unknown keys)', () => {
    const schema = JSON.parse(readFileSync(path.join(ROOT, 'test/fixtures/func_yaml-schema.json'), 'utf8')) as Schema;
    const errors: string[] = [];
    validateJsonSchema(schema, schema, f, 'func.yaml', errors);
    expect(errors).toEqual([]);
    // The validator itself rejects what the schema forbids.
    const bad: string[] = [];
    validateJsonSchema(schema, schema, { ...f, deploy: { ...f.deploy, healthEndpoint: {} }, invoke: 'grpc' }, 'bad', bad);
    expect(bad).toEqual(expect.arrayContaining([expect.stringContaining('unknown key healthEndpoint'), expect.stringContaining('"grpc" not in')]));
  });

  it('describes the same function as the kustomize base', () => {
    expect(f.specVersion).toBe('0.36.0'); // latest migration in knative/func pkg/functions/function_migrations.go
    expect(f.name).toBe(KSVC);
    expect(f.runtime).toBe('typescript');
    expect(f.invoke).toBe('cloudevent');
    expect(f.namespace).toBe(DEFAULT_NAMESPACE);
    expect(f.deployer ?? 'knative').toBe('knative');
    expect(f.deploy.serviceAccountName).toBe(FN_SA);
    expect(f.deploy.healthEndpoints).toEqual({ liveness: '/health/liveness', readiness: '/health/readiness' });
    expect(f.deploy.options.scale.min).toBe(0);
    expect(f.deploy.labels).toContainEqual({ key: 'networking.knative.dev/visibility', value: 'cluster-local' });
    // func copies deploy.annotations onto the Service's own metadata, where Knative rejects autoscaling keys.
    expect(Object.keys(f.deploy.annotations ?? {}).filter((k) => k.startsWith('autoscaling.knative.dev/'))).toEqual([]);
    for (const e of f.run.envs) {
      expect(ENV_CONTRACT.has(e.name), e.name).toBe(true);
      expect(e.value, `${e.name}: no {{ }} templates needed`).not.toMatch(/\{\{/);
    }
  });

  it.skipIf(KUBECTL === undefined)('matches knative/base/service.yaml (scale, resources, concurrency, env)', async () => {
    const base = builds.get('knative/base') ?? await kustomize('knative/base');
    const svc = knativeServices(base)[0]!;
    const pod = svc.spec.template.spec;
    const c = pod.containers[0]!;
    expect(String(f.deploy.options.scale.max)).toBe(svc.spec.template.metadata?.annotations?.['autoscaling.knative.dev/max-scale']);
    expect(f.deploy.options.resources.requests).toEqual(c.resources?.requests);
    const { concurrency, ...limits } = f.deploy.options.resources.limits;
    expect(limits).toEqual(c.resources?.limits);
    expect(concurrency).toBe(pod.containerConcurrency);
    expect(Object.fromEntries(f.run.envs.map((e) => [e.name, e.value]))).toEqual(envMap(c));
    expect(f.deploy.serviceAccountName).toBe(pod.serviceAccountName);
  });
});

// ===========================================================================
describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const instructions = dockerfile.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const stages = instructions.filter((l) => /^FROM\s/i.test(l));
  const lastStage = instructions.slice(instructions.lastIndexOf(stages.at(-1)!));

  it('bundles with npm ci + npm run bundle on Node 22 and ships only the bundle', () => {
    expect(instructions).toContain('ARG NODE_IMAGE=node:22-slim');
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(instructions.some((l) => /^RUN npm ci\b/.test(l))).toBe(true);
    expect(instructions).toContain('RUN npm run bundle');
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['bundle']).toBe('node scripts/bundle.ts dist');
    // The final stage carries no node_modules and nothing of the build but the bundle and its loader,
    // and makes the bundle's code cache with its own node (test/bundle.test.ts runs the same step).
    expect(lastStage.filter((l) => /node_modules/.test(l))).toEqual([]);
    expect(lastStage.filter((l) => /^COPY/.test(l))).toEqual(['COPY --from=build /app/dist/main.cjs /app/dist/start.cjs ./']);
    expect(lastStage).toContain('RUN ["node", "start.cjs", "--write-code-cache"]');
  });

  it('runs non-root as 65532 with the bundled entry point', () => {
    expect(lastStage).toContain('USER 65532:65532');
    expect(lastStage.at(-1)).toBe('CMD ["node", "start.cjs"]');
  });

  it('.dockerignore sends only what the build needs', () => {
    const lines = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    expect(lines[0]).toBe('*');
    expect(lines).toEqual(expect.arrayContaining(['!package.json', '!package-lock.json', '!tsconfig.json', '!shared/', '!functions/']));
    const copied = instructions.filter((l) => /^COPY (?!--from)/.test(l)).flatMap((l) => l.split(/\s+/).slice(1, -1));
    for (const source of copied) expect(lines, `the build copies ${source}`).toContain(`!${source.replace(/^\.\//, '')}${source.includes('.') ? '' : '/'}`);
  });
});

// ===========================================================================
describe('docs/deploy.md', () => {
  it('mentions every overlay', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/deploy.md'), 'utf8');
    for (const dir of Object.keys(BUILDS).filter((d) => d.startsWith('knative/overlays/'))) expect(doc, dir).toContain(dir);
  });
});
