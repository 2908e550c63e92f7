/**
 * Bounds on what one request may cost before the CloudEvents SDK or any schema sees it (issue 17,
 * class 9): nesting depth checked by one linear scan of the raw text, then a single JSON.parse,
 * whose result the SDK receives as an object (it parses a string body again, twice in
 * structured mode: cloudevents dist/message/http/index.js, getVersion and parseStructured).
 *
 * Why depth: JSON.parse of a 1 MiB text nested ~500,000 levels deep costs ~0.3 s of CPU, and
 * every copy or walk of the result (the SDK's, zod's) costs as much again; a shallow 1 MiB body
 * costs a few ms. Kubernetes objects are shallow: a Pod with managedFields nests ~15 levels.
 * Too deep is a 400, not a 413: the ApiServerSource adapter retries a 413 (knative/eventing
 * pkg/adapter/apiserver), and the same body would be refused again.
 */

/** Attributes the CloudEvents spec requires; the SDK fills in a missing id or specversion, so they are checked here. */
export const REQUIRED_ATTRIBUTES = ['specversion', 'id', 'source', 'type'] as const;
export const SPEC_VERSIONS: readonly string[] = ['1.0', '0.3'];

export class BodyRejected extends Error {
  readonly status: 400;
  readonly reason: 'json-too-deep' | 'not-a-cloudevent' | 'batch';
  constructor(status: 400, reason: BodyRejected['reason'], message: string) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

/**
 * The offset at which `text` opens its (maxDepth + 1)-th nested array or object, or -1. Brackets
 * inside JSON strings do not count. Linear, no allocation: it runs before anything else.
 */
export function depthExceededAt(text: string, maxDepth: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > maxDepth) return i;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return -1;
}

/** JSON.parse, once, of a text whose depth was checked first. */
export function parseBoundedJson(text: string, maxDepth: number, what: string): unknown {
  const at = depthExceededAt(text, maxDepth);
  if (at >= 0)
    throw new BodyRejected(400, 'json-too-deep', `${what} nests deeper than ${maxDepth} levels (at byte ${at}): refused unparsed`);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new BodyRejected(
      400,
      'not-a-cloudevent',
      `not a valid CloudEvent: ${what} is not JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** The body handed to the SDK: an object for the content types it would JSON-parse, the raw text otherwise. */
export interface PreparedBody {
  readonly mode: 'structured' | 'binary';
  readonly body: unknown;
}

/**
 * Content types whose body the SDK JSON-parses (cloudevents dist/parsers.js, parserByContentType;
 * matched exactly, as the SDK does).
 */
const SDK_JSON_TYPES: ReadonlySet<string> = new Set([
  'application/json',
  'application/json; charset=utf-8',
  'application/cloudevents+json',
  'application/cloudevents+json; charset=utf-8',
]);

/**
 * Checks the body against the depth bound and parses it once, as the SDK's mode would read it.
 * Structured mode: the envelope must be a JSON object with the required attributes (a batch is
 * refused without parsing). Binary mode: JSON data becomes an object or array (a JSON scalar is
 * never a pod, and the SDK would parse a string again); any other body stays text, but its depth
 * is checked too, because the handler parses text data as JSON (shared/events.ts, decodeData).
 */
export function prepareBody(contentType: string | undefined, body: string, maxDepth: number): PreparedBody {
  const type = contentType ?? '';
  if (/^application\/cloudevents-batch/i.test(type))
    throw new BodyRejected(400, 'batch', 'batched CloudEvents are not accepted: send one event per request');
  if (/^application\/cloudevents/i.test(type)) {
    const envelope = parseBoundedJson(body, maxDepth, 'the structured CloudEvent');
    if (Array.isArray(envelope)) throw new BodyRejected(400, 'batch', 'batched CloudEvents are not accepted: send one event per request');
    if (typeof envelope !== 'object' || envelope === null)
      throw new BodyRejected(400, 'not-a-cloudevent', 'not a valid CloudEvent: a structured CloudEvent must be a JSON object');
    const record = envelope as Record<string, unknown>;
    checkRequired(
      Object.fromEntries(
        REQUIRED_ATTRIBUTES.map((name) => [name, typeof record[name] === 'string' ? (record[name] as string) : undefined]),
      ),
    );
    const dataBase64 = record['data_base64'];
    if (typeof dataBase64 === 'string') checkDepth(Buffer.from(dataBase64, 'base64').toString('utf8'), maxDepth, 'data_base64');
    else if (typeof record['data'] === 'string') checkDepth(record['data'], maxDepth, 'data');
    return { mode: 'structured', body: envelope };
  }
  if (SDK_JSON_TYPES.has(type) && body !== '') {
    const data = parseBoundedJson(body, maxDepth, 'the event data');
    if (typeof data !== 'object' || data === null) throw new BodyRejected(400, 'not-a-cloudevent', 'event data must be a JSON object');
    return { mode: 'binary', body: data };
  }
  checkDepth(body, maxDepth, 'the event data');
  return { mode: 'binary', body };
}

/** The required attributes of a binary-mode event, from its ce-* headers. */
export function checkBinaryHeaders(headers: Readonly<Record<string, string>>): void {
  checkRequired(Object.fromEntries(REQUIRED_ATTRIBUTES.map((name) => [name, headers[`ce-${name}`]])));
}

function checkRequired(declared: Record<string, string | undefined>): void {
  const missing = REQUIRED_ATTRIBUTES.filter((name) => declared[name] === undefined || declared[name] === '');
  if (missing.length > 0)
    throw new BodyRejected(400, 'not-a-cloudevent', `not a valid CloudEvent: missing required attribute(s) ${missing.join(', ')}`);
  if (!SPEC_VERSIONS.includes(declared['specversion']!)) {
    throw new BodyRejected(
      400,
      'not-a-cloudevent',
      `not a valid CloudEvent: specversion ${JSON.stringify(declared['specversion']!.slice(0, 20))} is not supported (1.0 or 0.3)`,
    );
  }
}

function checkDepth(text: string, maxDepth: number, what: string): void {
  const at = depthExceededAt(text, maxDepth);
  if (at >= 0)
    throw new BodyRejected(400, 'json-too-deep', `${what} nests deeper than ${maxDepth} levels (at byte ${at}): refused unparsed`);
}
