import { z } from 'zod';

/** A Kubernetes API call that failed, classified for the decision "retry, redeliver, or give up". */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  /** HTTP status; 0 for network failures and timeouts. */
  readonly status: number;
  /** Status.reason from the API (NotFound, AlreadyExists, Conflict, Forbidden, …) or a local cause. */
  readonly reason: string;
  /** Worth trying again: throttling, server errors, timeouts, lost connections, write conflicts. */
  readonly retryable: boolean;
  /** From a Retry-After header, when the server sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, status: number, reason: string, retryable: boolean, retryAfterMs: number | undefined) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.retryable = retryable;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The Status object every API error carries (apimachinery metav1.Status). */
const StatusBody = z.looseObject({
  kind: z.literal('Status').optional(),
  message: z.string().optional(),
  reason: z.string().optional(),
  code: z.number().optional(),
});

/** Names the call, so that a 403 says exactly which permission is missing. */
export interface CallDescription {
  readonly verb: 'get' | 'list' | 'create' | 'patch' | 'delete';
  readonly resource: 'pods' | 'services';
  readonly namespace: string;
  readonly name?: string | undefined;
}

function describe(call: CallDescription): string {
  return `${call.verb} ${call.resource}${call.name === undefined ? '' : ` "${call.name}"`} in namespace "${call.namespace}"`;
}

/**
 * The message of a ResourceQuota refusal as kube-apiserver v1.34.4 words it: admission.NewForbidden
 * (`services "<name>" is forbidden: `) around "exceeded quota: <quota>, requested: …, used: …,
 * limited: …" (k8s.io/apiserver v0.34.4 pkg/admission/plugin/resourcequota/controller.go; measured
 * in e2e/scenarios/limits.e2e.ts).
 */
const QUOTA_REFUSAL = /(^|is forbidden: )exceeded quota: /;

/** Turns whatever client-node (and undici under it) threw into a KubeApiError. */
export function toKubeApiError(error: unknown, call: CallDescription): KubeApiError {
  if (error instanceof KubeApiError) return error;
  const code = httpCodeOf(error);
  if (code !== undefined) {
    const status = parseStatusBody((error as { body?: unknown }).body);
    const reason = status?.reason ?? `HTTP${code}`;
    const detail = status?.message ?? `HTTP ${code}`;
    const retryAfterMs = parseRetryAfter((error as { headers?: unknown }).headers);
    // A ResourceQuota refusal is a 403 too, reason Forbidden: not a missing
    // permission. Final as well (not retried here; the adapter does not retry a 500 either,
    // cloudevents sdk-go v2.16.1 protocol/http defaultRetriableErrors): once the quota is raised,
    // the sweep creates what is missing.
    if (code === 403 && QUOTA_REFUSAL.test(detail)) {
      return new KubeApiError(
        `refused by a ResourceQuota: ${describe(call)} — raise the quota of that namespace; the sweep then creates what is missing (${detail})`,
        code,
        reason,
        false,
        undefined,
      );
    }
    if (code === 403) {
      return new KubeApiError(
        `forbidden: ${describe(call)} — the function's ServiceAccount needs RBAC verb "${call.verb}" on "${call.resource}" in that namespace (${detail})`,
        code,
        reason,
        false,
        undefined,
      );
    }
    const retryable = code === 429 || code >= 500 || (code === 409 && reason === 'Conflict');
    return new KubeApiError(`${describe(call)}: ${detail}`, code, reason, retryable, retryAfterMs);
  }
  const cause = causeCode(error);
  if (cause === 'TimeoutError' || cause === 'AbortError') {
    return new KubeApiError(`${describe(call)}: request timed out`, 0, 'Timeout', true, undefined);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new KubeApiError(`${describe(call)}: ${cause ?? 'network error'}: ${message}`, 0, cause ?? 'NetworkError', true, undefined);
}

function httpCodeOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' && code >= 100 && code <= 599 ? code : undefined;
}

function parseStatusBody(body: unknown): z.infer<typeof StatusBody> | undefined {
  let value = body;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return undefined;
    }
  }
  const parsed = StatusBody.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

function parseRetryAfter(headers: unknown): number | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined;
  const raw = (headers as Record<string, unknown>)['retry-after'];
  if (typeof raw !== 'string') return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** undici wraps socket errors: TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } }). */
function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const { name, code, cause } = current as { name?: unknown; code?: unknown; cause?: unknown };
    if (name === 'TimeoutError' || name === 'AbortError') return name;
    if (typeof code === 'string') return code;
    current = cause;
  }
  return undefined;
}
