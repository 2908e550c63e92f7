import { z } from 'zod';

/**
 * zod schemas for the parts of Pods and Services this project depends on, with Kubernetes'
 * own validation rules for names and labels: input that a real API server could not have
 * produced is rejected before it can reach a name, a selector or an API call.
 * Unknown fields pass through untouched (the API adds many we do not read).
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export const NamespaceName = z.string().max(63).regex(DNS1123_LABEL, 'must be a DNS-1123 label');
export const ObjectName = z.string().min(1).max(253).regex(DNS1123_SUBDOMAIN, 'must be a DNS-1123 subdomain');

export function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && QUALIFIED_NAME_PART.test(name);
}

export function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value);
}

export const Labels = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  for (const [key, value] of Object.entries(labels)) {
    if (!isLabelKey(key)) ctx.addIssue({ code: 'custom', message: `invalid label key ${JSON.stringify(key.slice(0, 80))}` });
    if (!isLabelValue(value)) ctx.addIssue({ code: 'custom', message: `invalid value for label ${JSON.stringify(key.slice(0, 80))}` });
  }
});

export const Annotations = z.record(z.string(), z.string());

/** The API returns timestamps as strings; client-node turns them into Date objects. */
const Timestamp = z.union([z.string(), z.date()]);

/**
 * An object's own UID is made by the API server (a RFC 4122 UUID of 36 characters,
 * FillObjectMetaSystemFields in k8s.io/apiserver); 128 leaves room for anything a conformant
 * server could hand out.
 */
export const MAX_OBJECT_UID = 128;
const Uid = z.string().min(1).max(MAX_OBJECT_UID);

/**
 * Kubernetes asks of an owner reference only a non-empty apiVersion version, kind, name and uid
 * (k8s.io/apimachinery pkg/api/validation/objectmeta.go, validateOwnerReference): no length, no
 * format. So nothing more is asked here — a list holding a pod whose owner UID is 200 characters
 * long is an ordinary list — and what the function keeps of a reference is bounded where it is
 * kept (model/spark-pod.ts, model/service-spec.ts: `podRefOf`).
 */
export const OwnerReference = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().nullish(),
  blockOwnerDeletion: z.boolean().nullish(),
});
export type OwnerReference = z.infer<typeof OwnerReference>;

/**
 * The pod an owner reference names, when a pod can be it: a v1 Pod reference whose name is a
 * pod name and whose UID one the API server could have made. Any other reference names no pod
 * that exists; it is not kept (so a hostile reference cannot grow what the function remembers).
 */
export function podRefOf(ref: OwnerReference): { readonly name: string; readonly uid: string } | undefined {
  if (ref.apiVersion !== 'v1' || ref.kind !== 'Pod') return undefined;
  if (ref.uid.length === 0 || ref.uid.length > MAX_OBJECT_UID || !ObjectName.safeParse(ref.name).success) return undefined;
  return { name: ref.name, uid: ref.uid };
}

const ObjectMeta = z.looseObject({
  name: ObjectName,
  namespace: NamespaceName,
  uid: Uid.optional(),
  resourceVersion: z.string().optional(),
  labels: Labels.optional(),
  annotations: Annotations.optional(),
  ownerReferences: z.array(OwnerReference).optional(),
  deletionTimestamp: Timestamp.nullish(),
  creationTimestamp: Timestamp.nullish(),
});

const EnvVar = z.looseObject({ name: z.string(), value: z.string().nullish() });
const ContainerPort = z.looseObject({ name: z.string().nullish(), containerPort: z.number().int() });
const Container = z.looseObject({
  name: z.string(),
  env: z.array(EnvVar).nullish(),
  ports: z.array(ContainerPort).nullish(),
  args: z.array(z.string()).nullish(),
});

export const Pod = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: ObjectMeta,
  spec: z.looseObject({ containers: z.array(Container).default([]) }).optional(),
  status: z.looseObject({ phase: z.string().nullish() }).nullish(),
});
export type Pod = z.infer<typeof Pod>;

const ServicePort = z.looseObject({
  name: z.string().nullish(),
  port: z.number().int(),
  targetPort: z.union([z.number().int(), z.string()]).nullish(),
  protocol: z.string().nullish(),
});

export const Service = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: ObjectMeta,
  spec: z
    .looseObject({
      type: z.string().nullish(),
      clusterIP: z.string().nullish(),
      selector: z.record(z.string(), z.string()).nullish(),
      ports: z.array(ServicePort).nullish(),
    })
    .nullish(),
});
export type Service = z.infer<typeof Service>;

/** A pod-shaped envelope, read loosely first so that non-Spark pods are ignored without full validation. */
export const PodEnvelope = z.looseObject({
  kind: z.string().optional(),
  metadata: z.looseObject({ labels: z.record(z.string(), z.unknown()).nullish() }).optional(),
});
