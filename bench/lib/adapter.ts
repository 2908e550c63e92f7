/**
 * The sender as the ApiServerSource adapter behaves (knative/eventing pkg/adapter/apiserver,
 * cloudevents sdk-go v2; the same policy as test/delivery.test.ts): one event at a time per
 * watched namespace, each waited for; binary content mode with the adapter's header set (ce-id,
 * ce-source, ce-specversion, ce-type, ce-subject, ce-time with nanoseconds, the extensions
 * ce-kind, ce-apiversion, ce-name, ce-namespace, kn-namespace) and the object in Go's JSON
 * encoding; 5 retries, 50 ms × 2^n apart (0.1 … 1.6 s), only on network errors and HTTP 404, 413,
 * 425, 429, 502, 503, 504 — then the event is dropped. One keep-alive connection, as Go's
 * transport keeps one per host for a sequential sender.
 *
 * Every delivery is stamped on CLOCK_MONOTONIC (µs), the clock the emulator stamps its requests
 * with (bench/lib/emulator-child.ts), so that each API request can be put down to the event
 * that caused it.
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { goJson, goTimestamp } from '../../test/support/cloudevents.ts';
import type { PodBody } from './load.ts';
import { sleep } from './procs.ts';

/** HTTP statuses the adapter retries (sdk-go's http.IsRetriable... plus network errors). */
export const ADAPTER_RETRIED: ReadonlySet<number> = new Set([404, 413, 425, 429, 502, 503, 504]);
export const ADAPTER_RETRIES = 5;
export const ADAPTER_BACKOFF_MS = 50;

export interface AdapterEvent {
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** A Resource-mode ApiServerSource event for a pod as the watch showed it; serialized now (when the watch delivers it). */
export function adapterPodEvent(verb: 'add' | 'update' | 'delete', pod: PodBody): AdapterEvent {
  const { namespace, name } = pod.metadata;
  const body = goJson(pod);
  return {
    body,
    headers: {
      'ce-id': randomUUID(),
      'ce-source': 'https://10.96.0.1:443',
      'ce-specversion': '1.0',
      'ce-type': `dev.knative.apiserver.resource.${verb}`,
      'ce-subject': `/apis/v1/namespaces/${namespace}/pods/${name}`,
      'ce-time': goTimestamp(),
      'ce-kind': 'Pod',
      'ce-apiversion': 'v1',
      'ce-name': name,
      'ce-namespace': namespace,
      'kn-namespace': namespace,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      // Go's net/http client adds these two (e2e/README.md: the real adapter on the wire).
      'user-agent': 'Go-http-client/1.1',
      'accept-encoding': 'gzip',
    },
  };
}

/** CLOCK_MONOTONIC in µs (the emulator's request stamps use the same clock). */
export const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

export interface Delivery {
  /** First attempt sent, final answer received (monotonic µs): the namespace is blocked in between. */
  readonly sentUs: number;
  readonly answeredUs: number;
  /** answeredUs − sentUs, in ms: how long this event held its namespace's stream. */
  readonly ms: number;
  /** Status of each attempt ('network' for a connection error or no answer). */
  readonly statuses: ReadonlyArray<number | 'network'>;
  /** 2xx at the end. */
  readonly delivered: boolean;
  readonly body: string;
}

/** One namespace's sender: events strictly one after another. */
export class AdapterSender {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });
  private readonly url: URL;

  constructor(url: string) {
    this.url = new URL(url);
  }

  async send(event: AdapterEvent): Promise<Delivery> {
    const statuses: Array<number | 'network'> = [];
    const sentUs = nowUs();
    let body = '';
    for (let attempt = 0; attempt <= ADAPTER_RETRIES; attempt++) {
      if (attempt > 0) await sleep(ADAPTER_BACKOFF_MS * 2 ** attempt);
      let status: number | 'network';
      try {
        const answer = await this.post(event);
        status = answer.status;
        body = answer.body;
      } catch {
        status = 'network';
      }
      statuses.push(status);
      if (status !== 'network' && !ADAPTER_RETRIED.has(status)) break;
    }
    const answeredUs = nowUs();
    const last = statuses[statuses.length - 1]!;
    return { sentUs, answeredUs, ms: (answeredUs - sentUs) / 1000, statuses, delivered: last !== 'network' && last >= 200 && last < 300, body };
  }

  private post(event: AdapterEvent): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: this.url.hostname, port: this.url.port, path: this.url.pathname, method: 'POST', headers: event.headers, agent: this.agent, timeout: 30_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
      req.on('error', reject);
      req.end(event.body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * A namespace's event stream as the adapter drains it: events queue up as the watch delivers
 * them and are sent one at a time, in order, each waited for.
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
