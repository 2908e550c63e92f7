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

/** Posts a CloudEvent over real HTTP, as the ApiServerSource adapter or a Broker would. */
export async function postCloudEvent(
  url: string,
  event: { type: string; data: unknown; id?: string; source?: string; subject?: string },
  mode: ContentMode = 'binary',
): Promise<PostedReply> {
  const ce = new CloudEvent({
    id: event.id ?? randomUUID(),
    type: event.type,
    source: event.source ?? 'https://10.96.0.1:443',
    subject: event.subject,
    datacontenttype: 'application/json',
    data: event.data,
  });
  const message = mode === 'binary' ? HTTP.binary(ce) : HTTP.structured(ce);
  const body = typeof message.body === 'string' ? message.body : JSON.stringify(message.body);
  const response = await fetch(url, { method: 'POST', headers: message.headers as Record<string, string>, body });
  const text = await response.text();
  const type = response.headers.get('ce-type') ?? undefined;
  let data: ReplyData | undefined;
  if (response.status === 200 && type !== undefined) data = JSON.parse(text) as ReplyData;
  return { status: response.status, headers: response.headers, text, data, type };
}

export const podEventType = (verb: 'add' | 'update' | 'delete', mode: 'resource' | 'ref' = 'resource'): string =>
  `dev.knative.apiserver.${mode}.${verb}`;

/** The subject the ApiServerSource adapter sets (createSelfLink in knative/eventing). */
export const podSubject = (namespace: string, name: string): string => `/apis/v1/namespaces/${namespace}/pods/${name}`;
