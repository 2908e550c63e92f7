import { randomUUID } from 'node:crypto';
import { CloudEvent, HTTP } from 'cloudevents';

export type ContentMode = 'binary' | 'structured';

export interface PostedReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The reply CloudEvent's data, when the function answered with one. */
  readonly data: ReplyData | undefined;
  readonly type: string | undefined;
}

export interface ReplyData {
  action: string;
  reason?: string;
  namespace?: string;
  pod?: string;
  app?: string;
  outcomes: Array<{ namespace: string; service: string; action: string; detail?: string }>;
}

/**
 * Posts a CloudEvent over real HTTP. Binary mode sends exactly what the ApiServerSource adapter
 * sends (knative/eventing pkg/adapter/apiserver, cloudevents sdk-go v2): `Ce-Id`, `Ce-Source`,
 * `Ce-Specversion`, `Ce-Type`, `Ce-Subject`, `Ce-Time` with nanoseconds, the extensions
 * `Ce-Kind`, `Ce-Apiversion`, `Ce-Name`, `Ce-Namespace` taken from the object, `Kn-Namespace`,
 * `Content-Type: application/json`, and a body in Go's JSON encoding (sorted keys, `<>&`
 * escaped). PingSource events (`dev.knative.sources.ping`) carry no Content-Type when the
 * PingSource sets no `contentType`, as ours does not. Structured mode goes through the SDK,
 * as a Broker could send it.
 */
export async function postCloudEvent(
  url: string,
  event: { type: string; data: unknown; id?: string; source?: string; subject?: string },
  mode: ContentMode = 'binary',
): Promise<PostedReply> {
  const id = event.id ?? randomUUID();
  const source = event.source ?? 'https://10.96.0.1:443';
  let headers: Record<string, string>;
  let body: string;
  if (mode === 'binary') {
    headers = adapterHeaders(id, event.type, source, event.subject, event.data);
    body = goJson(event.data);
  } else {
    const ce = new CloudEvent({ id, type: event.type, source, subject: event.subject, datacontenttype: 'application/json', data: event.data });
    const message = HTTP.structured(ce);
    headers = message.headers as Record<string, string>;
    body = typeof message.body === 'string' ? message.body : JSON.stringify(message.body);
  }
  const response = await fetch(url, { method: 'POST', headers, body });
  const text = await response.text();
  const type = response.headers.get('ce-type') ?? undefined;
  let data: ReplyData | undefined;
  if (response.status === 200 && type !== undefined) data = JSON.parse(text) as ReplyData;
  return { status: response.status, headers: response.headers, text, data, type };
}

/** RFC 3339 with nanoseconds, as Go's time.Time marshals (sdk-go's types.Timestamp). */
export function goTimestamp(date = new Date()): string {
  const nanos = String(process.hrtime.bigint() % 1_000_000n).padStart(6, '0');
  return date.toISOString().replace(/\.(\d{3})Z$/, `.$1${nanos}Z`);
}

function adapterHeaders(id: string, type: string, source: string, subject: string | undefined, data: unknown): Record<string, string> {
  const headers: Record<string, string> = {
    // Go's net/http client adds these two (e2e/README.md: the real adapter on the wire); fetch
    // still adds accept, accept-language and sec-fetch-mode, which the function ignores.
    'user-agent': 'Go-http-client/1.1',
    'accept-encoding': 'gzip',
    'ce-id': id,
    'ce-source': source,
    'ce-specversion': '1.0',
    'ce-type': type,
    'ce-time': goTimestamp(),
  };
  if (subject !== undefined) headers['ce-subject'] = subject;
  if (type === 'dev.knative.sources.ping') return headers; // no Content-Type: the PingSource sets none
  headers['content-type'] = 'application/json';
  // The adapter adds the object's kind, apiVersion, name and namespace as extensions
  // (Resource mode: from the object; Reference mode: from the reference).
  const obj = (typeof data === 'object' && data !== null ? data : {}) as { kind?: unknown; apiVersion?: unknown; name?: unknown; namespace?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  const ext = { kind: obj.kind, apiversion: obj.apiVersion, name: obj.metadata?.name ?? obj.name, namespace: obj.metadata?.namespace ?? obj.namespace };
  for (const [key, value] of Object.entries(ext)) if (typeof value === 'string' && value !== '') headers[`ce-${key}`] = value;
  if (typeof ext.namespace === 'string') headers['kn-namespace'] = ext.namespace;
  return headers;
}

/** Go's encoding/json for an unstructured object: map keys sorted, and `<`, `>`, `&` escaped (HTMLEscape). */
export function goJson(value: unknown): string {
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sorted);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.keys(v as object).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])]));
    }
    return v;
  };
  return JSON.stringify(sorted(value)).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export const podEventType = (verb: 'add' | 'update' | 'delete', mode: 'resource' | 'ref' = 'resource'): string =>
  `dev.knative.apiserver.${mode}.${verb}`;

/** The subject the ApiServerSource adapter sets (createSelfLink in knative/eventing). */
export const podSubject = (namespace: string, name: string): string => `/apis/v1/namespaces/${namespace}/pods/${name}`;
