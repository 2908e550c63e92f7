/**
 * A recording proxy in front of the API server: every Service write (method, name, request and
 * response bodies, status), for the model's check that nothing was marked or deleted while its
 * executor and owner lived, nor deleted before its cool-down ended by the API server's clock.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// ---- a recording proxy in front of the API server: every Service write, with its body ---------

export interface ServiceWrite {
  readonly method: string;
  readonly name: string | undefined;
  readonly requestBody: string;
  readonly status: number;
  readonly responseBody: string;
  /** The answer's `Date` header: when the API server did it, by its own clock. */
  readonly date: string | undefined;
}

export interface Proxy {
  readonly url: string;
  readonly writes: ServiceWrite[];
  close(): Promise<void>;
}

export async function startRecordingProxy(target: string): Promise<Proxy> {
  const upstream = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const writes: ServiceWrite[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = { ...req.headers };
      delete headers['host'];
      delete headers['connection'];
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => parts.push(chunk));
          answer.on('end', () => {
            const payload = Buffer.concat(parts);
            const path = (req.url ?? '').split('?')[0]!;
            const service = /^\/api\/v1\/namespaces\/[^/]+\/services(?:\/([^/]+))?/.exec(path);
            if (service !== null && req.method !== 'GET') {
              writes.push({
                method: req.method ?? '',
                name: service[1],
                requestBody: body.toString('utf8'),
                status: answer.statusCode ?? 0,
                responseBody: payload.toString('utf8'),
                date: answer.headers.date,
              });
            }
            const out = { ...answer.headers };
            delete out['transfer-encoding'];
            delete out['connection'];
            out['content-length'] = String(payload.length);
            res.writeHead(answer.statusCode ?? 502, out);
            res.end(payload);
          });
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    writes,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
