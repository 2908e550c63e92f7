/**
 * A minimal JSON client for the harness's own API calls (bootstrap objects, health, token
 * requests, waiting): node:https with the run's CA and a bearer token. Tests that want a full
 * client use @kubernetes/client-node with `cluster.kubeConfig(token)`.
 */
import { request } from 'node:https';

export interface ApiResponse {
  status: number;
  /** Parsed JSON body, or the raw text when it is not JSON. */
  body: unknown;
}

export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(method: string, path: string, res: ApiResponse) {
    const reason =
      typeof res.body === 'object' && res.body !== null && 'message' in res.body
        ? String((res.body as { message: unknown }).message)
        : JSON.stringify(res.body);
    super(`${method} ${path}: HTTP ${res.status}: ${reason}`);
    this.status = res.status;
    this.body = res.body;
  }
}

export interface ApiClient {
  readonly server: string;
  /** Any status; never throws for HTTP errors (only for transport errors). */
  raw(method: string, path: string, body?: unknown, contentType?: string): Promise<ApiResponse>;
  /** 2xx or throws ApiError. */
  call<T = unknown>(method: string, path: string, body?: unknown, contentType?: string): Promise<T>;
}

export function apiClient(server: string, caPem: string, token: string, timeoutMs = 15_000): ApiClient {
  const base = new URL(server);
  const raw = (method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<ApiResponse> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = request(
        {
          host: base.hostname,
          port: base.port,
          method,
          path,
          ca: caPem,
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            ...(payload !== undefined ? { 'content-type': contentType, 'content-length': payload.length } : {}),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON (e.g. /readyz text)
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  return {
    server,
    raw,
    async call<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
      const res = await raw(method, path, body, contentType);
      if (res.status < 200 || res.status > 299) throw new ApiError(method, path, res);
      return res.body as T;
    },
  };
}

/** Create, or leave as is when it exists already (409). */
export async function ensure(api: ApiClient, path: string, body: unknown): Promise<void> {
  const res = await api.raw('POST', path, body);
  if (res.status === 409) return;
  if (res.status < 200 || res.status > 299) throw new ApiError('POST', path, res);
}
