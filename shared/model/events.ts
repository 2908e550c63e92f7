import { z } from 'zod';
import { MAX_OBJECT_UID, NamespaceName, ObjectName, Pod, PodEnvelope } from './k8s-objects.ts';
import { SPARK_ROLE_LABEL } from './labels.ts';

/** ApiServerSource event types (knative/eventing pkg/apis/sources/v1 constants). */
export const APISERVER_RESOURCE_TYPE_PREFIX = 'dev.knative.apiserver.resource.';
export const APISERVER_REF_TYPE_PREFIX = 'dev.knative.apiserver.ref.';
/** PingSource events: the periodic sweep. */
export const PING_TYPE = 'dev.knative.sources.ping';

export type Verb = 'add' | 'update' | 'delete';

export type FunctionEvent =
  /** Resource mode: the whole Pod (for delete: its last known state). */
  | { readonly kind: 'pod'; readonly verb: Verb; readonly pod: Pod }
  /** Reference mode: only where the Pod is; the function reads it itself. */
  | { readonly kind: 'pod-ref'; readonly verb: Verb; readonly namespace: string; readonly name: string }
  | { readonly kind: 'sweep' }
  /** Valid, but nothing for us (another kind, a non-Spark pod): answered 2xx without any API call. */
  | { readonly kind: 'ignored'; readonly reason: string };

/** Input we can never act on: answered 400, so that the sender does not retry it. */
export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
}

/** The CloudEvent attributes we read; everything comes from outside, so it is parsed. */
const Attributes = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  source: z.string().min(1),
  data: z.unknown(),
});

const ObjectReference = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: ObjectName,
  namespace: NamespaceName,
});

const VERBS: readonly Verb[] = ['add', 'update', 'delete'];

export interface CloudEventLike {
  readonly id: string;
  readonly type: string;
  readonly source: string;
  readonly data?: unknown;
  readonly data_base64?: string | undefined;
}

export function parseFunctionEvent(event: CloudEventLike): FunctionEvent {
  const attrs = Attributes.safeParse({ id: event.id, type: event.type, source: event.source, data: event.data });
  if (!attrs.success) throw new InvalidEventError(`invalid CloudEvent attributes: ${summarize(attrs.error)}`);
  const { type } = attrs.data;
  if (type === PING_TYPE) return { kind: 'sweep' };
  const resourceVerb = verbOf(type, APISERVER_RESOURCE_TYPE_PREFIX);
  const refVerb = verbOf(type, APISERVER_REF_TYPE_PREFIX);
  if (resourceVerb === undefined && refVerb === undefined) return { kind: 'ignored', reason: `event type ${type} is not handled` };
  const data = decodeData(event);
  if (refVerb !== undefined) {
    const ref = ObjectReference.safeParse(data);
    if (!ref.success) throw new InvalidEventError(`${type}: data is not an object reference: ${summarize(ref.error)}`);
    if (ref.data.kind !== 'Pod' || ref.data.apiVersion !== 'v1') {
      return { kind: 'ignored', reason: `${ref.data.apiVersion}/${ref.data.kind} is not a v1 Pod` };
    }
    return { kind: 'pod-ref', verb: refVerb, namespace: ref.data.namespace, name: ref.data.name };
  }
  const envelope = PodEnvelope.safeParse(data);
  if (!envelope.success || typeof data !== 'object' || data === null) {
    throw new InvalidEventError(`${type}: data is not a Kubernetes object`);
  }
  if (envelope.data.kind !== undefined && envelope.data.kind !== 'Pod') {
    return { kind: 'ignored', reason: `kind ${envelope.data.kind} is not a Pod` };
  }
  // Cheap exit for pods that are not Spark's: no full validation, no API call.
  const role = envelope.data.metadata?.labels?.[SPARK_ROLE_LABEL];
  if (role !== 'driver' && role !== 'executor') return { kind: 'ignored', reason: 'not a Spark driver or executor pod' };
  const pod = Pod.safeParse(data);
  if (!pod.success) throw new InvalidEventError(`${type}: invalid Pod: ${summarize(pod.error)}`);
  if (pod.data.metadata.uid === undefined) throw new InvalidEventError(`${type}: Pod has no metadata.uid`);
  // The owner's name becomes part of an API path (the driver is read by name): "." or ".." would
  // walk out of /pods/. No Pod can have such a name, so such an owner cannot exist.
  for (const owner of pod.data.metadata.ownerReferences ?? []) {
    if (owner.kind === 'Pod' && !ObjectName.safeParse(owner.name).success) {
      throw new InvalidEventError(
        `${type}: invalid Pod: ownerReferences: name ${JSON.stringify(owner.name.slice(0, 80))} is not a valid Pod name`,
      );
    }
    // A Pod's UID is made by the API server: an event naming a Pod owner by a UID no server makes
    // is refused before any read (lists take such pods in their stride: shared/kube/client.ts).
    if (owner.kind === 'Pod' && (owner.uid.length === 0 || owner.uid.length > MAX_OBJECT_UID)) {
      throw new InvalidEventError(
        `${type}: invalid Pod: ownerReferences: a uid of ${owner.uid.length} characters is not one the API server makes (at most ${MAX_OBJECT_UID})`,
      );
    }
  }
  return { kind: 'pod', verb: resourceVerb!, pod: pod.data };
}

function verbOf(type: string, prefix: string): Verb | undefined {
  if (!type.startsWith(prefix)) return undefined;
  const verb = type.slice(prefix.length);
  return (VERBS as readonly string[]).includes(verb) ? (verb as Verb) : undefined;
}

/** The SDK leaves data as a string or bytes when the content type is not JSON; accept JSON anyway. */
function decodeData(event: CloudEventLike): unknown {
  let data: unknown = event.data;
  if (data === undefined && event.data_base64 !== undefined) data = Buffer.from(event.data_base64, 'base64');
  if (data instanceof Uint8Array) data = Buffer.from(data).toString('utf8');
  if (typeof data === 'string') {
    try {
      return JSON.parse(data) as unknown;
    } catch {
      throw new InvalidEventError('data is not a JSON object');
    }
  }
  if (data === undefined || data === null) throw new InvalidEventError('event has no data');
  return data;
}

function summarize(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}
