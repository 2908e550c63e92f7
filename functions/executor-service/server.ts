import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { HTTP } from 'cloudevents';
import { type CloudEventLike, PING_TYPE } from '../../shared/model/events.ts';
import type { Logger } from '../../shared/ops/log.ts';
import { type EventOutcome, METRICS_PATH, type RefusedReason } from '../../shared/ops/metrics.ts';
import { traceparentOf } from '../../shared/model/trace-context.ts';
import { type HandlerDeps, handleEvent, replyFor } from './handler.ts';
import { BodyRejected, checkBinaryHeaders, prepareBody } from './request-limits.ts';
import { SenderAuthenticator, type TokenReviewer } from './sender-auth.ts';
import { SweepGate } from './sweep-gate.ts';

export const LIVENESS_PATH = '/health/liveness';
export const READINESS_PATH = '/health/readiness';

export interface FunctionServer {
  readonly server: Server;
  /** Port actually bound (useful with port 0). */
  readonly port: number;
  readonly inFlight: () => number;
  /** Stop accepting, answer readiness 503, let in-flight events finish (bounded), then close. */
  shutdown(graceMs?: number): Promise<void>;
}

class HttpError extends Error {
  readonly status: number;
  readonly reason: RefusedReason;
  constructor(status: number, reason: RefusedReason, message: string) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

/** How one event was answered, for the metrics. */
interface Answered {
  readonly code: number;
  readonly outcome: EventOutcome;
}

export interface FunctionServerOptions {
  readonly port: number;
  readonly host?: string;
  /** Verifies senders' tokens; required when config.senderAuth is set (run.ts: TokenReview against the API server). */
  readonly tokenReviewer?: TokenReviewer;
}

/**
 * How often Node checks requestTimeout/headersTimeout. Node's default is 30 s
 * (http.createServer connectionsCheckingInterval), so a configured 30 s held a stalled
 * connection for up to 60 s: the bound is the timeout plus one interval.
 */
export function connectionsCheckingIntervalFor(receiveTimeoutMs: number): number {
  return Math.min(1_000, Math.max(50, Math.floor(receiveTimeoutMs / 10)));
}

/** The function's HTTP face: CloudEvents on POST /, health probes, graceful shutdown. */
export async function startFunctionServer(deps: HandlerDeps, options: FunctionServerOptions): Promise<FunctionServer> {
  let inFlight = 0;
  let draining = false;
  const drained: Array<() => void> = [];
  const log: Logger = deps.log;
  const metrics = deps.metrics;
  metrics.attach({
    facts: deps.caches.facts,
    namespaces: deps.config.namespaces,
    maxServicesPerNamespace: deps.config.maxServicesPerNamespace,
    inFlight: () => inFlight,
  });

  // The edge (issue 17): sender authentication, sweep coalescing, bounded requests (request-limits.ts).
  const senderAuth = deps.config.senderAuth;
  if (senderAuth !== undefined && options.tokenReviewer === undefined) throw new Error('SENDER_AUTH=tokenreview needs a token reviewer');
  const authenticator =
    senderAuth === undefined ? undefined : new SenderAuthenticator(senderAuth, options.tokenReviewer!, metrics.registry);
  const sweepGate = new SweepGate(deps.config.sweepMinIntervalMs, metrics);
  const receiveTimeoutMs = deps.config.requestReceiveTimeoutMs;

  const server = createServer(
    {
      requestTimeout: receiveTimeoutMs,
      headersTimeout: Math.min(receiveTimeoutMs, 10_000),
      connectionsCheckingInterval: connectionsCheckingIntervalFor(receiveTimeoutMs),
    },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === LIVENESS_PATH) return sendJson(res, 200, { status: 'ok' });
      if (req.method === 'GET' && path === READINESS_PATH)
        return sendJson(res, draining ? 503 : 200, { status: draining ? 'draining' : 'ready' });
      if (req.method === 'GET' && path === METRICS_PATH) return void serveMetrics(res);
      if (path !== '/') {
        metrics.recordRefused('unknown-path');
        return sendJson(res, 404, { error: `no route for ${req.method} ${path}` });
      }
      if (req.method !== 'POST') {
        metrics.recordRefused('method-not-allowed');
        return sendJson(res, 405, { error: 'CloudEvents are accepted with POST /' }, { allow: 'POST' });
      }
      inFlight++;
      const started = performance.now();
      // The type until the event is parsed: the binary-mode header (only known types become label values).
      const seen: { type: unknown } = { type: req.headers['ce-type'] };
      void serveEvent(req, res, seen)
        .catch((error: unknown): Answered => {
          if (!(error instanceof HttpError) && req.destroyed && !req.complete) {
            // The body did not arrive (REQUEST_RECEIVE_TIMEOUT_MS: Node answered 408 and closed), or the sender went away.
            log.warn('request body not received', { error: error instanceof Error ? error.message : String(error), receiveTimeoutMs });
            metrics.recordRefused('body-not-received');
            return { code: 408, outcome: 'rejected' };
          }
          const status = error instanceof HttpError ? error.status : 500;
          const message = error instanceof Error ? error.message : String(error);
          if (status >= 500) log.error('request failed', { error: message });
          else log.warn('request rejected', { status, error: message });
          if (error instanceof HttpError && status < 500) metrics.recordRefused(error.reason);
          if (!res.headersSent) sendJson(res, status, { error: message });
          return { code: status, outcome: status >= 500 ? 'failed' : 'rejected' };
        })
        .then((answered) => {
          try {
            metrics.recordEvent(seen.type, answered.outcome, answered.code, (performance.now() - started) / 1000);
          } catch (error) {
            log.error('metrics failed', { error: error instanceof Error ? error.message : String(error) });
          }
        })
        .finally(() => {
          inFlight--;
          if (inFlight === 0) drained.splice(0).forEach((resolve) => resolve());
        });
    },
  );
  // Over the bound Node closes a new connection as soon as it is accepted (net.Server
  // maxConnections, 'drop' event): the sender sees a reset and retries; Knative's queue-proxy
  // answers it 502, which the sources retry.
  server.maxConnections = deps.config.maxConnections;
  let lastDropWarning = 0;
  server.on('drop', () => {
    metrics.recordRefused('too-many-connections');
    if (Date.now() - lastDropWarning > 10_000) {
      lastDropWarning = Date.now();
      log.warn('connection refused: MAX_CONNECTIONS reached', { maxConnections: deps.config.maxConnections });
    }
  });

  async function serveEvent(req: IncomingMessage, res: ServerResponse, seen: { type: unknown }): Promise<Answered> {
    if (authenticator !== undefined) {
      // On the headers alone: a refused sender's body is never read.
      const verdict = await authenticator.check(req.headers.authorization);
      if (!verdict.ok) {
        res.shouldKeepAlive = false;
        throw new HttpError(verdict.status, verdict.reason, verdict.message);
      }
    }
    const body = await readBody(req, deps.config.maxBodyBytes);
    const event = toCloudEvent(req, body, deps.config.maxJsonDepth);
    seen.type = event.type;
    if (event.type === PING_TYPE) {
      const admission = sweepGate.tryStart();
      if (!admission.admitted) {
        const result = { action: 'swept' as const, reason: admission.message, outcomes: [] };
        log.debug('sweep coalesced', { eventId: event.id, reason: admission.reason });
        if (deps.config.replyMode === 'none') {
          res.writeHead(204);
          res.end();
        } else {
          const message = HTTP.binary(replyFor(event, result));
          res.writeHead(200, message.headers as Record<string, string>);
          res.end(typeof message.body === 'string' ? message.body : JSON.stringify(message.body));
        }
        return { code: deps.config.replyMode === 'none' ? 204 : 200, outcome: 'swept' };
      }
      try {
        return await answerEvent(req, res, event);
      } finally {
        admission.done();
      }
    }
    return answerEvent(req, res, event);
  }

  async function answerEvent(req: IncomingMessage, res: ServerResponse, event: CloudEventLike & { subject?: unknown }): Promise<Answered> {
    const traceparent = traceparentOf(req.headers['traceparent'], (event as { traceparent?: unknown }).traceparent);
    const handled = await handleEvent(deps, event, typeof event.subject === 'string' ? event.subject : undefined, traceparent);
    if (handled.status !== 200) {
      sendJson(res, handled.status, { error: handled.error });
      if (handled.status === 400) metrics.recordRefused('invalid-event');
      return { code: handled.status, outcome: handled.status === 400 ? 'rejected' : 'failed' };
    }
    if (deps.config.replyMode === 'none') {
      res.writeHead(204);
      res.end();
      return { code: 204, outcome: handled.result.action };
    }
    const message = HTTP.binary(handled.reply());
    res.writeHead(200, message.headers as Record<string, string>);
    res.end(typeof message.body === 'string' ? message.body : JSON.stringify(message.body));
    return { code: 200, outcome: handled.result.action };
  }

  async function serveMetrics(res: ServerResponse): Promise<void> {
    try {
      const { contentType, body } = await metrics.exposition();
      res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log.error('metrics failed', { error: message });
      if (!res.headersSent) sendJson(res, 500, { error: message });
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;

  return {
    server,
    port,
    inFlight: () => inFlight,
    async shutdown(graceMs = Math.max(deps.config.eventDeadlineMs, deps.config.sweepDeadlineMs) + 5_000) {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([new Promise<void>((resolve) => drained.push(resolve)), new Promise((r) => setTimeout(r, graceMs).unref())]);
      }
      // Whatever is still running past the grace period is cut: its sender gets no 2xx and redelivers.
      server.closeAllConnections();
      await closed;
    },
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new HttpError(413, 'body-too-large', `body of ${declared} bytes exceeds the limit of ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limit) throw new HttpError(413, 'body-too-large', `body exceeds the limit of ${limit} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Binary and structured content modes, via the CloudEvents SDK; then its own validation. The body
 * reaches the SDK already parsed, once, within the depth bound (request-limits.ts).
 */
function toCloudEvent(req: IncomingMessage, body: string, maxJsonDepth: number): CloudEventLike & { subject?: unknown } {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  let prepared;
  try {
    prepared = prepareBody(headers['content-type'], body, maxJsonDepth);
    // The SDK fills in a missing id or specversion (and accepts any specversion); the spec requires them.
    if (prepared.mode === 'binary') checkBinaryHeaders(headers);
  } catch (error) {
    if (error instanceof BodyRejected) throw new HttpError(error.status, error.reason, error.message);
    throw error;
  }
  return withoutStackTraces(() => {
    let parsed: unknown;
    try {
      parsed = HTTP.toEvent({ headers, body: prepared.body });
    } catch (error) {
      throw new HttpError(400, 'not-a-cloudevent', `not a valid CloudEvent: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (Array.isArray(parsed)) throw new HttpError(400, 'batch', 'batched CloudEvents are not accepted: send one event per request');
    const event = parsed as import('cloudevents').CloudEvent<unknown>;
    try {
      event.validate();
    } catch (error) {
      const detail = (error as { errors?: unknown }).errors;
      throw new HttpError(
        400,
        'not-a-cloudevent',
        `invalid CloudEvent: ${error instanceof Error ? error.message : String(error)}${detail === undefined ? '' : ` ${JSON.stringify(detail).slice(0, 300)}`}`,
      );
    }
    return event;
  });
}

/**
 * The SDK builds two ValidationError objects for every JSON body it parses, valid or not (they
 * are arguments: cloudevents dist/parsers.js, JSONParser.parse); capturing their stacks was half
 * of the parse (69 → 37 µs per 4 KB pod event). Only their messages are used here. Synchronous,
 * so nothing else runs while the limit is 0.
 */
function withoutStackTraces<T>(work: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return work();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
