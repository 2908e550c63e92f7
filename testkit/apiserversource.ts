/**
 * The ApiServerSource as the function meets it, once for the tests, the bench and the demo:
 * the adapter's CloudEvents (binary content mode, its header set, the object in Go's JSON
 * encoding), its retry policy, and a sender that posts them one at a time (as the adapter does per
 * namespace) or several at once (as a Broker may). The PingSource's sweep event too.
 *
 * Upstream: knative/eventing pkg/adapter/apiserver (events.go: the types, the subject from
 * createSelfLink, the kind/apiversion/name/namespace extensions) on cloudevents sdk-go v2 (binary
 * mode; `ce-time` as RFC 3339 with nanoseconds; encoding/json sorts map keys and escapes `<>&`).
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { CloudEvent, HTTP } from 'cloudevents';

// ---- the retry policy ----------------------------------------------------------------------------

/**
 * The adapter's delivery: up to 5 retries, 50 ms × 2^n apart (0.1 + 0.2 + 0.4 + 0.8 + 1.6 s),
 * only on network errors and these statuses (sdk-go's retriable statuses); then the event is
 * dropped. shared/ops/config.ts derives the event deadline from this policy.
 */
export const ADAPTER_RETRY = {
  retries: 5,
  backoffMs: 50,
  statuses: new Set([404, 413, 425, 429, 502, 503, 504]) as ReadonlySet<number>,
} as const;

export type AttemptStatus = number | 'network';

const retried = (status: AttemptStatus): boolean => status === 'network' || ADAPTER_RETRY.statuses.has(status);
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` as the adapter delivers one event: again after 50 ms × 2^n while the answer is a
 * network error (a thrown error) or a retried status, at most 1 + 5 times. Returns the last answer
 * (undefined when even the last attempt failed on the network) and every attempt's status.
 */
export async function withAdapterRetries<R extends { readonly status: number }>(
  attempt: () => Promise<R>,
): Promise<{ readonly last: R | undefined; readonly statuses: readonly AttemptStatus[] }> {
  const statuses: AttemptStatus[] = [];
  let last: R | undefined;
  for (let n = 0; n <= ADAPTER_RETRY.retries; n++) {
    if (n > 0) await sleep(ADAPTER_RETRY.backoffMs * 2 ** n);
    let status: AttemptStatus;
    try {
      last = await attempt();
      status = last.status;
    } catch {
      last = undefined;
      status = 'network';
    }
    statuses.push(status);
    if (!retried(status)) break;
  }
  return { last, statuses };
}

// ---- the events ----------------------------------------------------------------------------------

export type Verb = 'add' | 'update' | 'delete';
/** Resource mode sends the object; Reference mode only a reference to it. */
export type SourceMode = 'resource' | 'ref';
export type ContentMode = 'binary' | 'structured';

export const podEventType = (verb: Verb, mode: SourceMode = 'resource'): string => `dev.knative.apiserver.${mode}.${verb}`;
/** The subject the adapter sets (createSelfLink in knative/eventing). */
export const podSubject = (namespace: string, name: string): string => `/apis/v1/namespaces/${namespace}/pods/${name}`;
export const SWEEP_EVENT_TYPE = 'dev.knative.sources.ping';

/** An event ready to post: its headers and body, serialized once (when the watch delivers it). */
export interface AdapterEvent {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** RFC 3339 with nanoseconds, as Go's time.Time marshals (sdk-go's types.Timestamp). */
export function goTimestamp(date = new Date()): string {
  const nanos = String(process.hrtime.bigint() % 1_000_000n).padStart(6, '0');
  return date.toISOString().replace(/\.(\d{3})Z$/, `.$1${nanos}Z`);
}

/** Go's encoding/json for an unstructured object: map keys sorted, and `<`, `>`, `&` escaped (HTMLEscape). */
export function goJson(value: unknown): string {
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sorted);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(
        Object.keys(v as object)
          .sort()
          .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sorted(value)).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export interface EventSpec {
  readonly type: string;
  readonly data: unknown;
  readonly id?: string;
  readonly source?: string;
  readonly subject?: string;
}

/**
 * A binary-mode CloudEvent exactly as the adapter sends it: `ce-id`, `ce-source`,
 * `ce-specversion`, `ce-type`, `ce-subject`, `ce-time` with nanoseconds, the extensions
 * `ce-kind`, `ce-apiversion`, `ce-name`, `ce-namespace` taken from the object (Resource mode) or
 * the reference (Reference mode), `kn-namespace`, `content-type: application/json`, and the body
 * in Go's JSON encoding. A PingSource event carries no content type when the PingSource sets none,
 * as ours does not.
 */
export function adapterEvent(spec: EventSpec): AdapterEvent {
  const headers: Record<string, string> = {
    // Go's net/http client adds these two (e2e/README.md: the real adapter on the wire); fetch
    // still adds accept, accept-language and sec-fetch-mode, which the function ignores.
    'user-agent': 'Go-http-client/1.1',
    'accept-encoding': 'gzip',
    'ce-id': spec.id ?? randomUUID(),
    'ce-source': spec.source ?? 'https://10.96.0.1:443',
    'ce-specversion': '1.0',
    'ce-type': spec.type,
    'ce-time': goTimestamp(),
  };
  if (spec.subject !== undefined) headers['ce-subject'] = spec.subject;
  const body = goJson(spec.data);
  if (spec.type !== SWEEP_EVENT_TYPE) {
    headers['content-type'] = 'application/json';
    const obj = (typeof spec.data === 'object' && spec.data !== null ? spec.data : {}) as {
      kind?: unknown;
      apiVersion?: unknown;
      name?: unknown;
      namespace?: unknown;
      metadata?: { name?: unknown; namespace?: unknown };
    };
    const ext = {
      kind: obj.kind,
      apiversion: obj.apiVersion,
      name: obj.metadata?.name ?? obj.name,
      namespace: obj.metadata?.namespace ?? obj.namespace,
    };
    for (const [key, value] of Object.entries(ext)) if (typeof value === 'string' && value !== '') headers[`ce-${key}`] = value;
    if (typeof ext.namespace === 'string') headers['kn-namespace'] = ext.namespace;
  }
  headers['content-length'] = String(Buffer.byteLength(body));
  return { headers, body };
}

interface PodLike {
  readonly metadata: { readonly name: string; readonly namespace: string };
}

/** The adapter's event for a pod as the watch showed it; Reference mode sends only where the pod is. */
export function podEvent<P extends PodLike>(verb: Verb, pod: P, mode: SourceMode = 'resource', id?: string): AdapterEvent {
  const { namespace, name } = pod.metadata;
  const data = mode === 'resource' ? pod : { apiVersion: 'v1', kind: 'Pod', name, namespace };
  return adapterEvent({ type: podEventType(verb, mode), data, subject: podSubject(namespace, name), ...(id === undefined ? {} : { id }) });
}

/** The PingSource's event (the periodic sweep), as knative/base/pingsource.yaml configures it. */
export function sweepEvent(id: string = `sweep-${randomUUID()}`): AdapterEvent {
  return adapterEvent({
    type: SWEEP_EVENT_TYPE,
    data: { action: 'sweep' },
    id,
    source: '/apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep',
  });
}

// ---- the sender ----------------------------------------------------------------------------------

/** CLOCK_MONOTONIC in µs (the bench's emulator stamps its requests on the same clock). */
export const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** One attempt's answer. */
export interface Answer {
  readonly status: number;
  /** The reply CloudEvent's type, when the function answered with one. */
  readonly type: string | undefined;
  readonly body: string;
  /** Send → answer, ms. */
  readonly ms: number;
}

/** An event delivered with the adapter's retry policy. */
export interface Delivery {
  /** First attempt sent, final answer received (monotonic µs): the namespace's stream is held in between. */
  readonly sentUs: number;
  readonly answeredUs: number;
  /** answeredUs − sentUs, in ms. */
  readonly ms: number;
  /** Status of each attempt ('network' for a connection error or no answer). */
  readonly statuses: readonly AttemptStatus[];
  /** 2xx at the end. */
  readonly delivered: boolean;
  /** The last answer's body ('' when none). */
  readonly body: string;
  readonly last: Answer | undefined;
}

/**
 * The adapter's HTTP client as one process has it, shared by every namespace it watches: Go's
 * transport (knative/eventing v0.48.2 pkg/adapter/v2/cloudevents.go clones http.DefaultTransport
 * and sets no MaxIdleConnsPerHost, so net/http's DefaultMaxIdleConnsPerHost = 2 applies) opens a
 * connection for every request in flight and keeps at most 2 idle per host: when more than two
 * namespaces send at once, most events beyond the second open a new connection. Node's Agent
 * `maxFreeSockets` is the same per-host idle limit; `maxSockets` stays unbounded as in Go.
 */
export function goTransportAgent(): Agent {
  return new Agent({ keepAlive: true, maxFreeSockets: 2 });
}

/**
 * Posts adapter events to one URL over keep-alive HTTP. `concurrency` 1 (the default) is one
 * namespace's stream on a connection of its own (Go keeps it idle between events); more lets a
 * Broker-like caller post several at once. `agent` (see goTransportAgent): the one client of an
 * adapter watching several namespaces, shared by their senders (each still one at a time).
 *
 * What it models and what not (the real adapter in e2e/scenarios/delivery.e2e.ts is the final
 * word): the headers, the body in Go's JSON (byte-identical, e2e/README.md), the retry policy, one
 * event at a time per stream, the shared client's idle limit. Not: Go's request header order, the
 * `connection: keep-alive` header Node adds, a new connection after a 503 (Go drops one whose
 * answer it did not read to the end; this sender reads every answer and keeps it).
 */
export class AdapterSender {
  private readonly agent: Agent;
  private readonly ownsAgent: boolean;
  private readonly url: URL;

  constructor(url: string, options: { readonly concurrency?: number; readonly agent?: Agent } = {}) {
    const sockets = Math.max(1, options.concurrency ?? 1);
    this.url = new URL(url);
    this.ownsAgent = options.agent === undefined;
    this.agent = options.agent ?? new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  }

  /** One attempt, no retry. */
  post(event: AdapterEvent, timeoutMs = 30_000): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const req = request(
        {
          host: this.url.hostname,
          port: this.url.port,
          path: this.url.pathname,
          method: 'POST',
          headers: event.headers,
          agent: this.agent,
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const type = res.headers['ce-type'];
            resolve({
              status: res.statusCode ?? 0,
              type: typeof type === 'string' ? type : undefined,
              body: Buffer.concat(chunks).toString('utf8'),
              ms: performance.now() - started,
            });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(event.body);
    });
  }

  /** The adapter's delivery of one event: the retry policy above. */
  async send(event: AdapterEvent): Promise<Delivery> {
    const sentUs = nowUs();
    const { last, statuses } = await withAdapterRetries(() => this.post(event));
    const answeredUs = nowUs();
    const final = statuses[statuses.length - 1]!;
    return {
      sentUs,
      answeredUs,
      ms: (answeredUs - sentUs) / 1000,
      statuses,
      delivered: final !== 'network' && final >= 200 && final < 300,
      body: last?.body ?? '',
      last,
    };
  }

  /** Closes its connections; a shared agent is closed by whoever made it. */
  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }
}

/**
 * A namespace's event stream as the adapter drains it: events queue up as the watch delivers them
 * and are sent one at a time, in order, each waited for.
 */
export class EventStream<M> {
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;
  /** The most events waiting at once (including the one being sent). */
  maxQueued = 0;
  readonly sender: AdapterSender;
  private readonly onDelivered: (meta: M, delivery: Delivery, queuedUs: number) => void;

  constructor(sender: AdapterSender, onDelivered: (meta: M, delivery: Delivery, queuedUs: number) => void) {
    this.sender = sender;
    this.onDelivered = onDelivered;
  }

  push(event: AdapterEvent, meta: M): void {
    const queuedUs = nowUs();
    this.queued++;
    this.maxQueued = Math.max(this.maxQueued, this.queued);
    this.tail = this.tail.then(async () => {
      const delivery = await this.sender.send(event);
      this.queued--;
      this.onDelivered(meta, delivery, queuedUs);
    });
  }

  /** Resolves once every event pushed so far is answered. */
  drained(): Promise<void> {
    return this.tail;
  }
}

/** Runs `task` for every index 0..n-1 with at most `concurrency` in flight; resolves when all are done. */
export async function pool(n: number, concurrency: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const index = next++;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}

// ---- posting from a test: one attempt, the reply parsed ---------------------------------------------

export interface ReplyData {
  action: string;
  reason?: string;
  namespace?: string;
  pod?: string;
  app?: string;
  outcomes: Array<{ namespace: string; service: string; action: string; detail?: string }>;
}

export interface PostedReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The reply CloudEvent's data, when the function answered with one. */
  readonly data: ReplyData | undefined;
  readonly type: string | undefined;
}

/**
 * Posts one CloudEvent over real HTTP, once. Binary mode is the adapter's event (adapterEvent);
 * structured mode goes through the SDK, as a Broker could send it.
 */
export async function postCloudEvent(url: string, spec: EventSpec, mode: ContentMode = 'binary'): Promise<PostedReply> {
  let headers: Record<string, string>;
  let body: string;
  if (mode === 'binary') {
    const event = adapterEvent(spec);
    headers = { ...event.headers };
    delete headers['content-length']; // fetch sets it
    body = event.body;
  } else {
    const ce = new CloudEvent({
      id: spec.id ?? randomUUID(),
      type: spec.type,
      source: spec.source ?? 'https://10.96.0.1:443',
      subject: spec.subject,
      datacontenttype: 'application/json',
      data: spec.data,
    });
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

/** A pod event posted once, as the adapter would send it for the pod's state given. */
export const postPodEvent = <P extends PodLike>(
  url: string,
  verb: Verb,
  pod: P,
  options: { mode?: SourceMode; content?: ContentMode; id?: string } = {},
): Promise<PostedReply> => {
  const { namespace, name } = pod.metadata;
  const ref = options.mode === 'ref';
  return postCloudEvent(
    url,
    {
      type: podEventType(verb, options.mode),
      data: ref ? { apiVersion: 'v1', kind: 'Pod', name, namespace } : pod,
      subject: podSubject(namespace, name),
      ...(options.id === undefined ? {} : { id: options.id }),
    },
    options.content,
  );
};

/** The sweep's PingSource event, posted once. */
export const postSweep = (url: string, id = `sweep-${randomUUID()}`): Promise<PostedReply> =>
  postCloudEvent(url, {
    id,
    type: SWEEP_EVENT_TYPE,
    data: { action: 'sweep' },
    source: '/apis/v1/namespaces/spark/pingsources/spark-exec-svc-sweep',
  });

/** A posted event delivered with the adapter's retry policy: the final reply and how many attempts it took. */
export async function deliverLikeAdapter(send: () => Promise<PostedReply>): Promise<{ reply: PostedReply; attempts: number }> {
  const { last, statuses } = await withAdapterRetries(send);
  if (last === undefined) throw new Error(`no answer after ${statuses.length} attempts (${statuses.join(', ')})`);
  return { reply: last, attempts: statuses.length };
}
