/**
 * metav1.Status bodies and field errors, with the messages the real apiserver builds
 * (k8s.io/apimachinery/pkg/api/errors and .../util/validation/field, v1.32).
 */

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** Thrown anywhere below the HTTP layer; the server turns it into the Status response. */
export class ApiError extends Error {
  readonly status: Status;
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: Status, headers: Record<string, string> = {}) {
    super(status.message ?? `HTTP ${status.code}`);
    this.name = 'ApiError';
    this.status = status;
    this.headers = headers;
  }

  get code(): number {
    return this.status.code;
  }
}

export function failure(code: number, reason: string, message: string, details?: StatusDetails): Status {
  // Field order matches the Go struct so the JSON looks like the real thing; empty details are omitted.
  if (details && Object.keys(details).length > 0) {
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
  }
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

function err(code: number, reason: string, message: string, details?: StatusDetails): ApiError {
  return new ApiError(failure(code, reason, message, details));
}

export function notFound(resource: string, name: string): ApiError {
  return err(404, 'NotFound', `${resource} ${goQuote(name)} not found`, { name, kind: resource });
}

export function alreadyExists(resource: string, name: string): ApiError {
  return err(409, 'AlreadyExists', `${resource} ${goQuote(name)} already exists`, { name, kind: resource });
}

export function conflict(resource: string, name: string, detail: string): ApiError {
  return err(409, 'Conflict', `Operation cannot be fulfilled on ${resource} ${goQuote(name)}: ${detail}`, {
    name,
    kind: resource,
  });
}

export const MODIFIED = 'the object has been modified; please apply your changes to the latest version and try again';

export function badRequest(message: string): ApiError {
  return err(400, 'BadRequest', message);
}

export function methodNotSupported(resource: string, action: string): ApiError {
  return err(405, 'MethodNotAllowed', `${action} is not supported on resources of kind ${goQuote(resource)}`, {
    kind: resource,
  });
}

export function methodNotAllowed(message: string): ApiError {
  return err(405, 'MethodNotAllowed', message);
}

export function unsupportedMediaType(accepted: readonly string[]): ApiError {
  return err(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
  );
}

export function notAcceptable(accepted: readonly string[]): ApiError {
  return err(406, 'NotAcceptable', `only the following media types are accepted: ${accepted.join(', ')}`);
}

export function expired(message: string): ApiError {
  return err(410, 'Expired', message);
}

export function internalError(message: string): ApiError {
  return err(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ message }] });
}

/** What ErrorToAPIStatus makes of a plain Go error: 500 with reason Unknown. */
export function unknownServerError(message: string): ApiError {
  return err(500, 'Unknown', message);
}

export function entityTooLarge(message: string): ApiError {
  return err(413, 'RequestEntityTooLarge', `Request entity too large: ${message}`);
}

/** errors.NewGenericServerResponse(422, ...) without causes: what a failed JSON patch returns. */
export function genericInvalid(): ApiError {
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'the server rejected our request due to an error in our request',
    reason: 'Invalid',
    details: {},
    code: 422,
  });
}

// ---- field errors -------------------------------------------------------------------------

export type FieldErrorType =
  | 'FieldValueRequired'
  | 'FieldValueInvalid'
  | 'FieldValueDuplicate'
  | 'FieldValueNotSupported'
  | 'FieldValueForbidden'
  | 'FieldValueTooLong';

/** A value already rendered the way Go's %#v would print it (e.g. []string{"a"}). */
export interface GoLiteral {
  readonly go: string;
}

export type BadValue = string | number | boolean | null | GoLiteral;

export interface FieldError {
  readonly type: FieldErrorType;
  readonly field: string;
  readonly badValue: BadValue;
  readonly detail: string;
}

const TYPE_TEXT: Record<FieldErrorType, string> = {
  FieldValueRequired: 'Required value',
  FieldValueInvalid: 'Invalid value',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueForbidden: 'Forbidden',
  FieldValueTooLong: 'Too long',
};

export const fieldRequired = (field: string, detail = ''): FieldError => ({
  type: 'FieldValueRequired',
  field,
  badValue: '',
  detail,
});
export const fieldInvalid = (field: string, value: BadValue, detail: string): FieldError => ({
  type: 'FieldValueInvalid',
  field,
  badValue: value,
  detail,
});
export const fieldDuplicate = (field: string, value: BadValue): FieldError => ({
  type: 'FieldValueDuplicate',
  field,
  badValue: value,
  detail: '',
});
export const fieldNotSupported = (field: string, value: BadValue, valid: readonly string[]): FieldError => ({
  type: 'FieldValueNotSupported',
  field,
  badValue: value,
  detail: valid.length > 0 ? `supported values: ${valid.map(goQuote).join(', ')}` : '',
});
export const fieldForbidden = (field: string, detail: string): FieldError => ({
  type: 'FieldValueForbidden',
  field,
  badValue: '',
  detail,
});
export const fieldTooLong = (field: string, maxBytes: number): FieldError => ({
  type: 'FieldValueTooLong',
  field,
  badValue: '',
  detail: `must have at most ${maxBytes} bytes`,
});

/** field.Error.ErrorBody(). */
export function errorBody(e: FieldError): string {
  let s = TYPE_TEXT[e.type];
  const valueless = e.type === 'FieldValueRequired' || e.type === 'FieldValueForbidden' || e.type === 'FieldValueTooLong';
  if (!valueless) s += `: ${renderGo(e.badValue)}`;
  if (e.detail !== '') s += `: ${e.detail}`;
  return s;
}

function renderGo(value: BadValue): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return value.go;
}

/** Go's %q for the ASCII-ish strings Kubernetes deals in. */
export function goQuote(s: string): string {
  return JSON.stringify(s);
}

export function goStringSlice(values: readonly string[]): GoLiteral {
  return { go: `[]string{${values.map(goQuote).join(', ')}}` };
}

/** errors.NewInvalid: message "<Kind> "<name>" is invalid: <aggregate>". */
export function invalid(kind: string, name: string, errors: readonly FieldError[], group = ''): ApiError {
  const causes = errors.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field }));
  const seen = new Set<string>();
  const messages: string[] = [];
  for (const e of errors) {
    const m = `${e.field}: ${errorBody(e)}`;
    if (!seen.has(m)) {
      seen.add(m);
      messages.push(m);
    }
  }
  const qualified = group === '' ? kind : `${kind}.${group}`;
  const aggregate = messages.length === 1 ? (messages[0] ?? '') : `[${messages.join(', ')}]`;
  const details: StatusDetails = {};
  if (name !== '') details.name = name;
  if (group !== '') details.group = group;
  if (kind !== '') details.kind = kind;
  details.causes = causes;
  return err(422, 'Invalid', `${qualified} ${goQuote(name)} is invalid: ${aggregate}`, details);
}

/** Status for an HTTP code chosen by a fault rule: reason and default message follow the real server. */
export function statusForCode(
  code: number,
  opts: { message?: string; retryAfterSeconds?: number; resource?: string; name?: string; verb?: string } = {},
): Status {
  const resource = opts.resource ?? '';
  const name = opts.name ?? '';
  const details: StatusDetails = {};
  if (name !== '') details.name = name;
  if (resource !== '') details.kind = resource;
  if (opts.retryAfterSeconds !== undefined) details.retryAfterSeconds = opts.retryAfterSeconds;
  const target = name !== '' ? `${resource} ${goQuote(name)}` : resource;
  switch (code) {
    case 400:
      return failure(400, 'BadRequest', opts.message ?? 'the server rejected our request for an unknown reason', details);
    case 401:
      return failure(401, 'Unauthorized', opts.message ?? 'Unauthorized', details);
    case 403: {
      const user = 'system:serviceaccount:default:default';
      const dflt =
        resource === ''
          ? `forbidden: User ${goQuote(user)} cannot ${opts.verb ?? 'get'} path`
          : `${target} is forbidden: User ${goQuote(user)} cannot ${opts.verb ?? 'get'} resource ${goQuote(resource)} in API group ""`;
      return failure(403, 'Forbidden', opts.message ?? dflt, details);
    }
    case 404:
      return failure(404, 'NotFound', opts.message ?? 'the server could not find the requested resource', details);
    case 409:
      return failure(409, 'Conflict', opts.message ?? `Operation cannot be fulfilled on ${target}: ${MODIFIED}`, details);
    case 410:
      return failure(410, 'Expired', opts.message ?? 'the resourceVersion is too old', details);
    case 422:
      return failure(422, 'Invalid', opts.message ?? 'the server rejected our request due to an error in our request', details);
    case 429:
      return failure(429, 'TooManyRequests', opts.message ?? 'Too many requests, please try again later.', details);
    case 500:
      return failure(500, 'InternalError', opts.message ?? 'Internal error occurred: injected fault', details);
    case 503:
      return failure(503, 'ServiceUnavailable', opts.message ?? 'the server is currently unable to handle the request', details);
    case 504:
      return failure(
        504,
        'Timeout',
        opts.message ?? 'Timeout: request did not complete within requested timeout - context deadline exceeded',
        details,
      );
    default:
      return failure(code, code >= 500 ? 'InternalError' : 'Unknown', opts.message ?? `injected fault (HTTP ${code})`, details);
  }
}
