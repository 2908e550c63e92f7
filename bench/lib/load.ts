/**
 * The sending side: Spark pods as ApiServerSource CloudEvents (binary content mode, exactly the
 * headers the cloudevents SDK's HTTP.binary produces), pre-serialised so that building them is
 * never timed, posted over keep-alive HTTP with bounded concurrency.
 */
import { Agent, request } from 'node:http';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../test/support/spark-pods.ts';

export interface PreparedEvent {
  readonly headers: Record<string, string>;
  readonly body: string;
}

let sequence = 0;

/** An ApiServerSource Resource-mode event for a pod (binary mode). */
export function podEvent(verb: 'add' | 'update' | 'delete', pod: PodBody): PreparedEvent {
  const { namespace, name } = pod.metadata;
  return binaryEvent(`dev.knative.apiserver.resource.${verb}`, namespace, name, pod, { 'ce-time': new Date().toISOString() });
}

/** A Reference-mode event (only where the pod is). */
export function podRefEvent(verb: 'add' | 'update' | 'delete', namespace: string, name: string): PreparedEvent {
  return binaryEvent(`dev.knative.apiserver.ref.${verb}`, namespace, name, { apiVersion: 'v1', kind: 'Pod', name, namespace });
}

/** A PingSource event (the periodic sweep), as knative/base/pingsource.yaml configures it. */
export function pingEvent(): PreparedEvent {
  const body = '{"action":"sweep"}';
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'ce-specversion': '1.0',
      'ce-id': `bench-${process.pid}-${++sequence}`,
      'ce-type': 'dev.knative.sources.ping',
      'ce-source': '/apis/v1/namespaces/bench/pingsources/sweep',
      'ce-time': new Date().toISOString(),
    },
  };
}

/** A binary-mode CloudEvent as the ApiServerSource adapter sends it, serialized once up front. */
function binaryEvent(type: string, namespace: string, name: string, data: unknown, extra: Record<string, string> = {}): PreparedEvent {
  const body = JSON.stringify(data);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'ce-specversion': '1.0',
      'ce-id': `bench-${process.pid}-${++sequence}`,
      'ce-type': type,
      'ce-source': 'https://10.96.0.1:443',
      'ce-subject': `/apis/v1/namespaces/${namespace}/pods/${name}`,
      ...extra,
    },
  };
}

export interface Posted {
  readonly status: number;
  readonly ms: number;
  readonly type: string | undefined;
  readonly body: string;
}

/** Posts prepared events to one URL over a keep-alive connection pool. */
export class EventPoster {
  private readonly agent: Agent;
  private readonly url: URL;

  constructor(url: string, maxSockets: number) {
    this.url = new URL(url);
    this.agent = new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
  }

  post(event: PreparedEvent, timeoutMs = 30_000): Promise<Posted> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const req = request(
        { host: this.url.hostname, port: this.url.port, path: this.url.pathname, method: 'POST', headers: event.headers, agent: this.agent, timeout: timeoutMs },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const type = res.headers['ce-type'];
            resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, type: typeof type === 'string' ? type : undefined, body: Buffer.concat(chunks).toString('utf8') });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(event.body);
    });
  }

  close(): void {
    this.agent.destroy();
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

export interface App {
  readonly namespace: string;
  readonly appId: string;
  readonly driver: PodBody;
}

/** A driver pod body for an app (not yet seeded: the emulator gives it its uid). */
export function appDriver(namespace: string, seed: number): PodBody {
  return driverPod({ namespace, appId: sparkAppId(seed), name: `bench-${seed}-driver` });
}

/** Executor pods of a seeded driver, as Spark creates them (ownerReference, port via SPARK_JAVA_OPT). */
export function appExecutors(driver: PodBody, count: number, options: { optIn?: boolean; firstId?: number } = {}): PodBody[] {
  const { namespace, name, uid, labels } = driver.metadata;
  if (uid === undefined) throw new Error('seed the driver first: executors need its uid');
  const appId = labels['spark-app-selector']!;
  const first = options.firstId ?? 1;
  return Array.from({ length: count }, (_, i) =>
    executorPod({ namespace, appId, execId: String(first + i), driver: { name, uid }, blockManagerPort: 7079, optIn: options.optIn ?? true, name: `${name.replace(/-driver$/, '')}-exec-${first + i}` }),
  );
}

export type { PodBody };
