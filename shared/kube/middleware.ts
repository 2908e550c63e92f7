/**
 * Cross-cutting concerns of API calls, as middleware around one choke point (controller-runtime's
 * pkg/client/interceptor: decorate a client once): `intercept` turns every KubeClient method
 * into one described call (verb, resource, target, the response code its answer stands for),
 * and each layer wraps that call. Two layers: retries under one event's policy and deadline,
 * and request metrics (count and time per attempt). Retries go outside the metrics, so that
 * each attempt is one counted request.
 */
import type { ServiceBody } from '../model/service-spec.ts';
import { type CallDescription, KubeApiError } from './errors.ts';
import { type CreateResult, type DeleteResult, type KubeClient, type Page, type SkippedItem, sendsRequest } from './client.ts';

export type KubeVerb = CallDescription['verb'];
export type KubeResource = CallDescription['resource'];

/** One call as a layer sees it: what it is, whether the client sends it at all, and the response code a value stands for. */
export interface KubeCall<T> extends CallDescription {
  /** The client sends no request for a target no object can have (shared/kube/client.ts). */
  readonly sent: boolean;
  /** The client turns some answers into values (404 → undefined, 409 → 'exists'…): the code the API server sent. */
  readonly codeOf: (value: T) => string;
  /** A list's items that could not be read (shared/kube/client.ts: Page.skipped); none for other calls. */
  readonly skippedOf: (value: T) => readonly SkippedItem[];
}

export type Layer = <T>(call: KubeCall<T>, send: () => Promise<T>) => Promise<T>;

/** The same KubeClient with `layers` around every call, the first outermost. */
export function intercept(client: KubeClient, ...layers: readonly Layer[]): KubeClient {
  const run = <T>(call: KubeCall<T>, send: () => Promise<T>): Promise<T> =>
    layers.reduceRight<() => Promise<T>>((inner, layer) => () => layer(call, inner), send)();
  const found = (value: unknown): string => (value === undefined ? '404' : '200');
  const listed = (): string => '200';
  const none = (): readonly SkippedItem[] => [];
  const at = <T>(
    verb: KubeVerb,
    resource: KubeResource,
    namespace: string,
    name: string | undefined,
    codeOf: (value: T) => string,
    skippedOf: (value: T) => readonly SkippedItem[] = none,
  ): KubeCall<T> => {
    const call = { verb, resource, namespace, name };
    return { ...call, sent: sendsRequest(call), codeOf, skippedOf };
  };
  const skippedOf = (page: Page<unknown>): readonly SkippedItem[] => page.skipped;
  return {
    readPod: (ns, name) => run(at('get', 'pods', ns, name, found), () => client.readPod(ns, name)),
    listPods: (ns, selector, limit, token) =>
      run(at('list', 'pods', ns, undefined, listed, skippedOf), () => client.listPods(ns, selector, limit, token)),
    readService: (ns, name) => run(at('get', 'services', ns, name, found), () => client.readService(ns, name)),
    listServices: (ns, selector, limit, token) =>
      run(at('list', 'services', ns, undefined, listed, skippedOf), () => client.listServices(ns, selector, limit, token)),
    createService: (body: ServiceBody) =>
      run(
        at<CreateResult>('create', 'services', body.metadata.namespace, undefined, (r) => (r.outcome === 'created' ? '201' : '409')),
        () => client.createService(body),
      ),
    patchService: (ns, name, patch) =>
      run(
        at<Awaited<ReturnType<KubeClient['patchService']>>>('patch', 'services', ns, name, (r) =>
          r === 'not-found' ? '404' : r === 'conflict' ? '409' : '200',
        ),
        () => client.patchService(ns, name, patch),
      ),
    deleteService: (ns, name, uid, rv) =>
      run(
        at<DeleteResult>('delete', 'services', ns, name, (r) => (r === 'deleted' ? '200' : r === 'not-found' ? '404' : '409')),
        () => client.deleteService(ns, name, uid, rv),
      ),
  };
}

// ---- request metrics

/** Where one finished API request is reported (shared/ops/metrics.ts: Metrics). */
export interface RequestRecorder {
  recordKubeRequest(verb: KubeVerb, resource: KubeResource, code: string, seconds: number): void;
}

/** The `code` label of a failed API request: its HTTP status, or what stood in for an answer. */
export function kubeCodeLabel(error: unknown): string {
  if (!(error instanceof KubeApiError)) return 'error';
  if (error.reason === 'InvalidResponse') return 'invalid-response';
  if (error.status >= 100 && error.status <= 599) return String(error.status);
  return error.reason === 'Timeout' ? 'timeout' : 'error';
}

/** Counts every request the client sends by verb, resource and response code, and times it. */
export function requestMetrics(recorder: RequestRecorder, clock: () => number = () => performance.now()): Layer {
  return async (call, send) => {
    if (!call.sent) return send();
    const started = clock();
    let code = 'error';
    try {
      const value = await send();
      code = call.codeOf(value);
      return value;
    } catch (error) {
      code = kubeCodeLabel(error);
      throw error;
    } finally {
      recorder.recordKubeRequest(call.verb, call.resource, code, Math.max(0, clock() - started) / 1000);
    }
  };
}

export function withRequestMetrics(client: KubeClient, recorder: RequestRecorder, clock?: () => number): KubeClient {
  return intercept(client, requestMetrics(recorder, clock));
}

// ---- items a list could not read

/** Where list items that could not be read are reported (shared/ops/metrics.ts: Metrics, and the log). */
export type SkippedItemReporter = (resource: KubeResource, namespace: string, item: SkippedItem) => void;

/** Reports every item a list answer skipped (each attempt's answer once: put it inside the retries). */
export function skippedItems(report: SkippedItemReporter): Layer {
  return async (call, send) => {
    const value = await send();
    for (const item of call.skippedOf(value)) report(call.resource, call.namespace, item);
    return value;
  };
}

// ---- retries

export interface RetryPolicy {
  /** Epoch ms after which no new attempt starts: the event's deadline. */
  readonly deadline: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** [0, 1); injectable so that tests are reproducible. */
  readonly random: () => number;
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  /** Called before each retry, for counting and logging. */
  readonly onRetry?: ((error: KubeApiError, attempt: number, delayMs: number) => void) | undefined;
}

/** The event ran out of time; answered 5xx so that Knative redelivers it. */
export class DeadlineExceededError extends Error {
  override readonly name = 'DeadlineExceededError';
  readonly lastError: KubeApiError;
  constructor(lastError: KubeApiError) {
    super(`event deadline exceeded while retrying: ${lastError.message}`);
    this.lastError = lastError;
  }
}

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Every call retried under one event's policy and deadline. */
export function retries(policy: RetryPolicy): Layer {
  return (_call, send) => withRetry(send, policy);
}

export function withRetries(client: KubeClient, policy: RetryPolicy): KubeClient {
  return intercept(client, retries(policy));
}

/**
 * Capped exponential backoff with full jitter (delay = random × min(cap, base × 2^attempt)),
 * never shorter than the server's Retry-After, and never past the deadline.
 * Only retryable errors are retried: a 4xx other than 409 Conflict / 429 is final.
 * An attempt still running at the deadline is not waited for (its request ends at its own
 * timeout): the event is answered by its deadline, not deadline + request timeout.
 */
export async function withRetry<T>(operation: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await beforeDeadline(operation, policy);
    } catch (error) {
      if (!(error instanceof KubeApiError) || !error.retryable) throw error;
      const backoff = policy.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
      const delay = Math.max(backoff, error.retryAfterMs ?? 0);
      if (policy.now() + delay >= policy.deadline) throw new DeadlineExceededError(error);
      policy.onRetry?.(error, attempt + 1, delay);
      await policy.sleep(delay);
    }
  }
}

function deadlineError(): DeadlineExceededError {
  return new DeadlineExceededError(new KubeApiError('API request still unanswered at the event deadline', 0, 'Timeout', true, undefined));
}

/** Runs one attempt, but gives up on it (DeadlineExceededError) when the event's deadline comes first. */
async function beforeDeadline<T>(operation: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const remaining = policy.deadline - policy.now();
  if (remaining <= 0) throw deadlineError();
  let timer: NodeJS.Timeout | undefined;
  const attempt = operation();
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(deadlineError()), remaining);
  });
  try {
    return await Promise.race([attempt, expired]);
  } finally {
    clearTimeout(timer);
    attempt.catch(() => undefined); // an abandoned attempt may still fail later: not an unhandled rejection
  }
}
