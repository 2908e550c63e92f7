/**
 * The part of the Pod and Service Go types the emulator knows, used the way the apiserver
 * uses its typed decode/encode round trip:
 *  - a JSON type mismatch on a known field fails with Go's encoding/json message,
 *  - nulls disappear, `omitempty` zero values disappear (pointer fields keep theirs),
 *  - known fields come out in Go struct order, map keys sorted (Go sorts map keys).
 * Fields the Go types do not have are dropped and reported (strict field validation);
 * subtrees typed `any` here (volumes, probes, affinity, ...) are kept as given, unchecked.
 */
import { isRecord, type Obj } from './types.ts';

type Leaf = 'string' | 'int32' | 'int64' | 'bool' | 'intOrString' | 'time' | 'any';

interface Field {
  readonly s: Schema;
  /** Go `omitempty` on a non-pointer: zero values are dropped. */
  readonly omit: boolean;
}

type Schema =
  | { readonly t: Leaf }
  | { readonly t: 'array'; readonly items: Schema; readonly go: string }
  | { readonly t: 'map'; readonly go: string }
  | { readonly t: 'struct'; readonly name: string; readonly fields: ReadonlyArray<readonly [string, Field]> };

const S = { t: 'string' } as const;
const I32 = { t: 'int32' } as const;
const I64 = { t: 'int64' } as const;
const B = { t: 'bool' } as const;
const T = { t: 'time' } as const;
const ANY = { t: 'any' } as const;
const STRMAP = { t: 'map', go: 'map[string]string' } as const;
const STRS = { t: 'array', items: S, go: '[]string' } as const;
const anyList = (go: string): Schema => ({ t: 'array', items: ANY, go });

/** Field helpers: o = omitempty value, p = pointer (kept even when zero), r = required (no omitempty). */
const o = (s: Schema): Field => ({ s, omit: true });
const p = (s: Schema): Field => ({ s, omit: false });
const r = (s: Schema): Field => ({ s, omit: false });

const OWNER_REF: Schema = {
  t: 'struct',
  name: 'OwnerReference',
  fields: [
    ['apiVersion', r(S)],
    ['kind', r(S)],
    ['name', r(S)],
    ['uid', r(S)],
    ['controller', p(B)],
    ['blockOwnerDeletion', p(B)],
  ],
};

const OBJECT_META: Schema = {
  t: 'struct',
  name: 'ObjectMeta',
  fields: [
    ['name', o(S)],
    ['generateName', o(S)],
    ['namespace', o(S)],
    ['selfLink', o(S)],
    ['uid', o(S)],
    ['resourceVersion', o(S)],
    ['generation', o(I64)],
    ['creationTimestamp', o(T)],
    ['deletionTimestamp', p(T)],
    ['deletionGracePeriodSeconds', p(I64)],
    ['labels', o(STRMAP)],
    ['annotations', o(STRMAP)],
    ['ownerReferences', o({ t: 'array', items: OWNER_REF, go: '[]v1.OwnerReference' })],
    ['finalizers', o(STRS)],
    ['managedFields', o(anyList('[]v1.ManagedFieldsEntry'))],
  ],
};

const SERVICE_PORT: Schema = {
  t: 'struct',
  name: 'ServicePort',
  fields: [
    ['name', o(S)],
    ['protocol', o(S)],
    ['appProtocol', p(S)],
    ['port', r(I32)],
    ['targetPort', o({ t: 'intOrString' })],
    ['nodePort', o(I32)],
  ],
};

const SERVICE_SPEC: Schema = {
  t: 'struct',
  name: 'ServiceSpec',
  fields: [
    ['ports', o({ t: 'array', items: SERVICE_PORT, go: '[]v1.ServicePort' })],
    ['selector', o(STRMAP)],
    ['clusterIP', o(S)],
    ['clusterIPs', o(STRS)],
    ['type', o(S)],
    ['externalIPs', o(STRS)],
    ['sessionAffinity', o(S)],
    ['loadBalancerIP', o(S)],
    ['loadBalancerSourceRanges', o(STRS)],
    ['externalName', o(S)],
    ['externalTrafficPolicy', o(S)],
    ['healthCheckNodePort', o(I32)],
    ['publishNotReadyAddresses', o(B)],
    ['sessionAffinityConfig', p(ANY)],
    ['ipFamilies', o(STRS)],
    ['ipFamilyPolicy', p(S)],
    ['allocateLoadBalancerNodePorts', p(B)],
    ['loadBalancerClass', p(S)],
    ['internalTrafficPolicy', p(S)],
    ['trafficDistribution', p(S)],
  ],
};

const SERVICE_STATUS: Schema = {
  t: 'struct',
  name: 'ServiceStatus',
  fields: [
    ['loadBalancer', r(ANY)],
    ['conditions', o(anyList('[]v1.Condition'))],
  ],
};

const CONTAINER_PORT: Schema = {
  t: 'struct',
  name: 'ContainerPort',
  fields: [
    ['name', o(S)],
    ['hostPort', o(I32)],
    ['containerPort', r(I32)],
    ['protocol', o(S)],
    ['hostIP', o(S)],
  ],
};

const CONTAINER: Schema = {
  t: 'struct',
  name: 'Container',
  fields: [
    ['name', r(S)],
    ['image', o(S)],
    ['command', o(STRS)],
    ['args', o(STRS)],
    ['workingDir', o(S)],
    ['ports', o({ t: 'array', items: CONTAINER_PORT, go: '[]v1.ContainerPort' })],
    ['envFrom', o(anyList('[]v1.EnvFromSource'))],
    ['env', o(anyList('[]v1.EnvVar'))],
    ['resources', r(ANY)],
    ['resizePolicy', o(anyList('[]v1.ContainerResizePolicy'))],
    ['restartPolicy', p(S)],
    ['restartPolicyRules', o(anyList('[]v1.ContainerRestartRule'))],
    ['volumeMounts', o(anyList('[]v1.VolumeMount'))],
    ['volumeDevices', o(anyList('[]v1.VolumeDevice'))],
    ['livenessProbe', p(ANY)],
    ['readinessProbe', p(ANY)],
    ['startupProbe', p(ANY)],
    ['lifecycle', p(ANY)],
    ['terminationMessagePath', o(S)],
    ['terminationMessagePolicy', o(S)],
    ['imagePullPolicy', o(S)],
    ['securityContext', p(ANY)],
    ['stdin', o(B)],
    ['stdinOnce', o(B)],
    ['tty', o(B)],
  ],
};

const CONTAINERS = { t: 'array', items: CONTAINER, go: '[]v1.Container' } as const;

const POD_SPEC: Schema = {
  t: 'struct',
  name: 'PodSpec',
  fields: [
    ['volumes', o(anyList('[]v1.Volume'))],
    ['initContainers', o(CONTAINERS)],
    ['containers', r(CONTAINERS)],
    ['ephemeralContainers', o(anyList('[]v1.EphemeralContainer'))],
    ['restartPolicy', o(S)],
    ['terminationGracePeriodSeconds', p(I64)],
    ['activeDeadlineSeconds', p(I64)],
    ['dnsPolicy', o(S)],
    ['nodeSelector', o(STRMAP)],
    ['serviceAccountName', o(S)],
    ['serviceAccount', o(S)],
    ['automountServiceAccountToken', p(B)],
    ['nodeName', o(S)],
    ['hostNetwork', o(B)],
    ['hostPID', o(B)],
    ['hostIPC', o(B)],
    ['shareProcessNamespace', p(B)],
    ['securityContext', p(ANY)],
    ['imagePullSecrets', o(anyList('[]v1.LocalObjectReference'))],
    ['hostname', o(S)],
    ['subdomain', o(S)],
    ['affinity', p(ANY)],
    ['schedulerName', o(S)],
    ['tolerations', o(anyList('[]v1.Toleration'))],
    ['hostAliases', o(anyList('[]v1.HostAlias'))],
    ['priorityClassName', o(S)],
    ['priority', p(I32)],
    ['dnsConfig', p(ANY)],
    ['readinessGates', o(anyList('[]v1.PodReadinessGate'))],
    ['runtimeClassName', p(S)],
    ['enableServiceLinks', p(B)],
    ['preemptionPolicy', p(S)],
    ['overhead', o(ANY)],
    ['topologySpreadConstraints', o(anyList('[]v1.TopologySpreadConstraint'))],
    ['setHostnameAsFQDN', p(B)],
    ['os', p(ANY)],
    ['hostUsers', p(B)],
    ['schedulingGates', o(anyList('[]v1.PodSchedulingGate'))],
    ['resourceClaims', o(anyList('[]v1.PodResourceClaim'))],
    ['resources', p(ANY)],
    ['hostnameOverride', p(S)],
    ['schedulingGroup', p(ANY)],
  ],
};

const POD_STATUS: Schema = {
  t: 'struct',
  name: 'PodStatus',
  fields: [
    ['observedGeneration', o(I64)],
    ['phase', o(S)],
    ['conditions', o(anyList('[]v1.PodCondition'))],
    ['message', o(S)],
    ['reason', o(S)],
    ['nominatedNodeName', o(S)],
    ['hostIP', o(S)],
    ['hostIPs', o(anyList('[]v1.HostIP'))],
    ['podIP', o(S)],
    ['podIPs', o(anyList('[]v1.PodIP'))],
    ['startTime', p(T)],
    ['initContainerStatuses', o(anyList('[]v1.ContainerStatus'))],
    ['containerStatuses', o(anyList('[]v1.ContainerStatus'))],
    ['qosClass', o(S)],
    ['ephemeralContainerStatuses', o(anyList('[]v1.ContainerStatus'))],
    ['resize', o(S)],
    ['resourceClaimStatuses', o(anyList('[]v1.PodResourceClaimStatus'))],
    ['extendedResourceClaimStatus', p(ANY)],
    ['nodeAllocatableResourceClaimStatuses', o(anyList('[]v1.NodeAllocatableResourceClaimStatus'))],
    ['allocatedResources', o(ANY)],
    ['resources', p(ANY)],
  ],
};

const top = (name: string, spec: Schema, status: Schema): Schema => ({
  t: 'struct',
  name,
  fields: [
    ['kind', o(S)],
    ['apiVersion', o(S)],
    ['metadata', r(OBJECT_META)],
    ['spec', r(spec)],
    ['status', r(status)],
  ],
});

const SCHEMAS: Readonly<Record<'Pod' | 'Service', Schema>> = {
  Pod: top('Pod', POD_SPEC, POD_STATUS),
  Service: top('Service', SERVICE_SPEC, SERVICE_STATUS),
};

/** A Go encoding/json type error: the text is what json.Unmarshal reports. */
export class DecodeError extends Error {
  override name = 'DecodeError';
}

function jsonWhat(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (isRecord(value)) return 'object';
  if (typeof value === 'number') return Number.isInteger(value) ? 'number' : `number ${value}`;
  if (typeof value === 'boolean') return 'bool';
  return 'string';
}

interface Ctx {
  readonly struct: string;
  /** Go's struct-field path (no indices), for type errors. */
  readonly path: string;
  /** sigs.k8s.io/json's path (with indices), for unknown-field errors. */
  readonly jsonPath: string;
  /** Unknown fields found so far; they are dropped like the typed decode drops them. */
  readonly unknown: string[];
}

function fail(value: unknown, ctx: Ctx, goType: string): never {
  throw new DecodeError(`json: cannot unmarshal ${jsonWhat(value)} into Go struct field ${ctx.struct}.${ctx.path} of type ${goType}`);
}

function isZero(value: unknown): boolean {
  if (value === '' || value === 0 || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (isRecord(value)) return Object.keys(value).length === 0;
  return false;
}

function stripNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripNulls);
  if (isRecord(value)) {
    const out: Obj = {};
    for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = stripNulls(v);
    return out;
  }
  return value;
}

function decodeValue(value: unknown, schema: Schema, ctx: Ctx): unknown {
  switch (schema.t) {
    case 'string':
      if (typeof value !== 'string') fail(value, ctx, 'string');
      return value;
    case 'time':
      if (typeof value !== 'string') fail(value, ctx, 'string');
      return value;
    case 'bool':
      if (typeof value !== 'boolean') fail(value, ctx, 'bool');
      return value;
    case 'int32':
    case 'int64': {
      const limit = schema.t === 'int32' ? 2 ** 31 : 2 ** 63;
      if (typeof value !== 'number' || !Number.isInteger(value) || value >= limit || value < -limit) fail(value, ctx, schema.t);
      return value;
    }
    case 'intOrString':
      if (typeof value === 'string') return value;
      if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) < 2 ** 31) return value;
      // IntOrString.UnmarshalJSON decodes non-strings into its int32.
      throw new DecodeError(`json: cannot unmarshal ${jsonWhat(value)} into Go value of type int32`);
    case 'any':
      return stripNulls(value);
    case 'array': {
      if (!Array.isArray(value)) fail(value, ctx, schema.go);
      return value.map((item, i) =>
        item === null ? null : decodeValue(item, schema.items, { ...ctx, jsonPath: `${ctx.jsonPath}[${i}]` }),
      );
    }
    case 'map': {
      if (!isRecord(value)) fail(value, ctx, schema.go);
      const out: Obj = {};
      for (const key of Object.keys(value).sort()) {
        const v = value[key];
        if (v === null) continue;
        if (typeof v !== 'string') fail(v, ctx, 'string');
        out[key] = v;
      }
      return out;
    }
    case 'struct':
      return decodeStruct(value, schema, ctx);
  }
}

function decodeStruct(value: unknown, schema: Extract<Schema, { t: 'struct' }>, ctx: Ctx): Obj {
  if (!isRecord(value)) fail(value, ctx, `v1.${schema.name}`);
  const out: Obj = {};
  const known = new Set<string>();
  for (const [key, field] of schema.fields) {
    known.add(key);
    const v = value[key];
    if (v === undefined || v === null) continue;
    const decoded = decodeValue(v, field.s, {
      struct: schema.name,
      path: ctx.path === '' ? key : `${ctx.path}.${key}`,
      jsonPath: ctx.jsonPath === '' ? key : `${ctx.jsonPath}.${key}`,
      unknown: ctx.unknown,
    });
    if (field.omit && isZero(decoded)) continue;
    out[key] = decoded;
  }
  for (const key of Object.keys(value)) if (!known.has(key)) ctx.unknown.push(ctx.jsonPath === '' ? key : `${ctx.jsonPath}.${key}`);
  return out;
}

export interface Decoded {
  readonly obj: Obj;
  /** Paths of fields the Go types do not have, e.g. "spec.ports[0].foo" (already dropped from obj). */
  readonly unknownFields: readonly string[];
}

/**
 * Type-checks and normalises a Pod or Service body. Throws DecodeError with the
 * encoding/json text; the caller wraps it the way the handler in question does.
 */
export function decodeObject(kind: 'Pod' | 'Service', body: Obj): Decoded {
  const schema = SCHEMAS[kind];
  const unknown: string[] = [];
  const obj = schema.t === 'struct' ? decodeStruct(body, schema, { struct: kind, path: '', jsonPath: '', unknown }) : body;
  if (!isRecord(obj['metadata'])) obj['metadata'] = {};
  return { obj, unknownFields: unknown };
}
