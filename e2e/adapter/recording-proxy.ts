/**
 * An HTTP proxy between a sender (the real receive adapter, the PingSource-shaped sender) and the
 * function: it records every request as it arrived (time, method, path, headers in arrival order,
 * body) and the answer it got, and can inject faults the way a dataplane shows them to a sender —
 * answer 503 without forwarding, or cut the connection — to see the sender's retries.
 *
 * Listens on 127.0.0.1 only. One upstream connection per sender connection is not kept: each
 * request is forwarded on its own (the function's keep-alive is not what is measured here).
 */
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  /** Order of arrival, from 0. */
  readonly seq: number;
  /** Wall clock (ms since epoch) when the request's headers arrived. */
  readonly receivedAtMs: number;
  /** performance.now() at arrival, for intervals (retries' backoff). */
  readonly receivedMonoMs: number;
  readonly method: string;
  readonly path: string;
  /** Raw header pairs in the order the sender wrote them (names as sent). */
  readonly rawHeaders: ReadonlyArray<readonly [string, string]>;
  /** Lower-cased names → value (last wins). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** The sender's TCP source port: a new one means a new connection. */
  readonly remotePort: number;
  /** What the sender got back: a status, or 'cut' when the proxy cut the connection. */
  status?: number | 'cut';
  /** 'forwarded' to the function, or the fault injected instead. */
  disposition?: 'forwarded' | 'injected' | 'cut' | 'upstream-unreachable';
  answeredMonoMs?: number;
  responseBody?: string;
}

/** Decides, per request: forward it, answer it here with this status (a 503 as a dataplane would), or cut the connection. */
export type FaultPlan = (req: RecordedRequest) => 'forward' | 'cut' | { readonly respond: number };

export interface RecordingProxy {
  readonly url: string;
  readonly requests: readonly RecordedRequest[];
  /** Replaces the fault plan (default: forward everything). */
  setFaultPlan(plan: FaultPlan): void;
  /** Points the proxy at another upstream (the function restarted on another port). */
  setUpstream(url: string): void;
  /** Resolves when a request matching `predicate` has been answered (already-recorded ones count). */
  waitFor(predicate: (r: RecordedRequest) => boolean, timeoutMs: number, what: string): Promise<RecordedRequest>;
  close(): Promise<void>;
}

export async function startRecordingProxy(upstreamUrl: string): Promise<RecordingProxy> {
  let upstream = new URL(upstreamUrl);
  let plan: FaultPlan = () => 'forward';
  const requests: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const notify = (): void => {
    for (const w of [...waiters]) w();
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const receivedAtMs = Date.now();
    const receivedMonoMs = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawHeaders: Array<readonly [string, string]> = [];
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const headers: Record<string, string> = {};
      for (const [k, v] of rawHeaders) headers[k.toLowerCase()] = v;
      const record: RecordedRequest = {
        seq: requests.length,
        receivedAtMs,
        receivedMonoMs,
        method: req.method ?? '',
        path: req.url ?? '',
        rawHeaders,
        headers,
        body: Buffer.concat(chunks).toString('utf8'),
        remotePort: req.socket.remotePort ?? 0,
      };
      requests.push(record);
      const done = (status: number | 'cut', disposition: NonNullable<RecordedRequest['disposition']>, responseBody = ''): void => {
        record.status = status;
        record.disposition = disposition;
        record.answeredMonoMs = performance.now();
        record.responseBody = responseBody;
        notify();
      };
      const decision = plan(record);
      if (decision === 'cut') {
        req.socket.destroy();
        done('cut', 'cut');
        return;
      }
      if (decision !== 'forward') {
        res
          .writeHead(decision.respond, { 'content-type': 'text/plain' })
          .end(decision.respond >= 400 ? 'injected by the recording proxy' : '');
        done(decision.respond, 'injected');
        return;
      }
      const forwarded = request(
        { host: upstream.hostname, port: upstream.port, path: record.path, method: record.method, headers: req.headers },
        (up) => {
          const body: Buffer[] = [];
          up.on('data', (c: Buffer) => body.push(c));
          up.on('end', () => {
            const text = Buffer.concat(body);
            res.writeHead(up.statusCode ?? 502, up.headers).end(text);
            done(up.statusCode ?? 502, 'forwarded', text.toString('utf8'));
          });
        },
      );
      forwarded.on('error', () => {
        // The function is not there (killed): a sender sees a refused connect as a network error;
        // cutting the connection is the closest a proxy can show.
        req.socket.destroy();
        done('cut', 'upstream-unreachable');
      });
      forwarded.end(record.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    setFaultPlan: (p) => {
      plan = p;
    },
    setUpstream: (u) => {
      upstream = new URL(u);
    },
    waitFor: (predicate, timeoutMs, what) =>
      new Promise((resolve, reject) => {
        const check = (): boolean => {
          const hit = requests.find((r) => r.status !== undefined && predicate(r));
          if (hit === undefined) return false;
          waiters.delete(check2);
          clearTimeout(timer);
          resolve(hit);
          return true;
        };
        const check2 = (): void => void check();
        const timer = setTimeout(() => {
          waiters.delete(check2);
          reject(new Error(`recording proxy: no ${what} within ${timeoutMs} ms (${requests.length} requests recorded)`));
        }, timeoutMs);
        if (!check()) waiters.add(check2);
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
