/**
 * The HTTP front end: routing, request accounting, fault injection, content negotiation,
 * query/body parsing, and translating registry results and ApiErrors into responses.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiGroupList, apiVersions, coreV1Resources, openapiV3CoreV1, openapiV3Root, SERVER_VERSION } from './discovery.ts';
import type { Fault, Faults } from './faults.ts';
import { listResource } from './list.ts';
import { Namespaces } from './namespaces.ts';
import type { DeleteOptions, PatchType, Registry, Scope, WriteOptions } from './registry.ts';
import { type Route, route, type Verb, verbOf } from './router.ts';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector, SelectorError } from './selectors.ts';
import {
  ApiError,
  badRequest,
  conflict,
  entityTooLarge,
  fieldNotSupported,
  internalError,
  invalid,
  MODIFIED,
  methodNotAllowed,
  notAcceptable,
  type Status,
  statusForCode,
  unsupportedMediaType,
} from './status.ts';
import { STRATEGIES } from './strategy.ts';
import { type IncludeObject, toTable, wantsTable } from './table.ts';
import { isRecord, labelsOf, nameOf, type Obj, RESOURCES } from './types.ts';
import { serveTokenReview, TOKEN_REVIEW_PATH, type TokenIssuer } from './tokenreview.ts';

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  status: number;
  readonly verb: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly namespace?: string;
  readonly name?: string;
}

export interface HandlerDeps {
  readonly registry: Registry;
  readonly namespaces: Namespaces;
  readonly faults: Faults;
  readonly records: RequestRecord[];
  readonly serverAddress: () => string;
  /** Hung responses and delay timers, so stop()/setDown() can end them. */
  readonly hung: Set<ServerResponse>;
  readonly timers: Set<NodeJS.Timeout>;
  /** authentication.k8s.io/v1 TokenReview (tokenreview.ts). */
  readonly tokens: TokenIssuer;
  /** The server's clock: every answer's `Date` header and the tables' ages follow it. */
  readonly clock: () => Date;
}

const MAX_BODY_BYTES = 3 * 1024 * 1024;
const JSON_TYPES = ['application/json'];
const PATCH_TYPES: Readonly<Record<string, PatchType>> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
};
const NOT_ALLOWED = 'the server does not allow this method on the requested resource';
const WATCH_UNSUPPORTED = 'watch is not supported by the kube-emulator (see packages/kube-emulator/README.md)';

interface Reply {
  readonly code: number;
  readonly body: unknown;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string | string[]>>;
}

const ok = (body: unknown, code = 200): Reply => ({ code, body });

function notFoundStatus(): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'the server could not find the requested resource',
    reason: 'NotFound',
    details: {},
    code: 404,
  };
}

function mediaType(header: string | undefined): string {
  return (header ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((part) => {
    const type = mediaType(part);
    return type === 'application/json' || type === '*/*' || type === 'application/*';
  });
}

/** Go's summarizeData for decode errors. */
function summarize(raw: string): string {
  if (raw.length === 0) return '<empty>';
  if (raw.startsWith('{')) return raw.length > 30 ? `${raw.slice(0, 30)} ...` : raw;
  const hex = Buffer.from(raw.slice(0, 30), 'utf8').toString('hex');
  return raw.length > 30 ? `${hex} ...` : hex;
}

/** A request without a body the emulator reads: drained so the connection can be reused. */
function discardBody(req: IncomingMessage): string {
  req.resume();
  return '';
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (tooLarge) reject(entityTooLarge(`limit is ${MAX_BODY_BYTES}`));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}

function parseJson(raw: string, kind: string | undefined): unknown {
  try {
    return JSON.parse(raw);
  } catch (e) {
    const why = raw.trim() === '' ? 'unexpected end of JSON input' : (e as Error).message;
    if (kind === undefined) throw badRequest(why);
    throw badRequest(
      `the object provided is unrecognized (must be of type ${kind}): couldn't get version/kind; json parse error: ${why} (${summarize(raw)})`,
    );
  }
}

function dryRunOf(query: URLSearchParams, optionsKind: string): boolean {
  const values = query.getAll('dryRun');
  for (const v of values) {
    if (v !== 'All') throw invalid(optionsKind, '', [fieldNotSupported('dryRun', v, ['All'])], 'meta.k8s.io');
  }
  return values.length > 0;
}

const FIELD_VALIDATION = ['Ignore', 'Warn', 'Strict'] as const;
type FieldValidation = (typeof FIELD_VALIDATION)[number];

function fieldValidationOf(query: URLSearchParams, optionsKind: string): FieldValidation {
  const raw = query.get('fieldValidation');
  if (raw === null || raw === '') return 'Warn';
  const found = FIELD_VALIDATION.find((v) => v === raw);
  if (found === undefined) throw invalid(optionsKind, '', [fieldNotSupported('fieldValidation', raw, FIELD_VALIDATION)], 'meta.k8s.io');
  return found;
}

/** RFC 7234 warn-code 299, as the apiserver sends admission and field-validation warnings. */
function warningHeader(text: string): string {
  return `299 - "${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

function limitOf(query: URLSearchParams): number | undefined {
  const raw = query.get('limit');
  if (raw === null || raw === '') return undefined;
  if (!/^-?\d+$/.test(raw)) throw badRequest(`strconv.ParseInt: parsing ${JSON.stringify(raw)}: invalid syntax`);
  return Number(raw);
}

function stripTypeMeta(obj: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(obj)) if (k !== 'kind' && k !== 'apiVersion') out[k] = v;
  return out;
}

export function createHandler(deps: HandlerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { registry, faults, records } = deps;

  const send = (res: ServerResponse, record: RequestRecord, reply: Reply): void => {
    record.status = reply.code;
    if (res.destroyed || res.writableEnded) return;
    const payload = JSON.stringify(reply.body);
    res.writeHead(reply.code, {
      'Content-Type': reply.contentType ?? 'application/json',
      'Content-Length': Buffer.byteLength(payload),
      'Cache-Control': 'no-cache, private',
      'Audit-Id': randomUUID(),
      // Go's net/http dates every answer (IMF-fixdate, whole seconds); here by the emulator's clock.
      Date: deps.clock().toUTCString(),
      ...(reply.headers ?? {}),
    });
    res.end(payload);
  };

  const errorReply = (e: unknown): Reply => {
    if (e instanceof ApiError) return { code: e.code, body: e.status, headers: e.headers };
    const message = e instanceof Error ? e.message : String(e);
    const err = internalError(message);
    return { code: err.code, body: err.status };
  };

  const faultReply = (fault: Exclude<Fault, { kind: 'delay' | 'late' | 'hang' | 'reset' }>, r: Route, verb: Verb): Reply => {
    const resource = r.type === 'resource' ? r.resource : r.type === 'namespaces' ? 'namespaces' : undefined;
    const name = r.type === 'resource' || r.type === 'namespaces' ? r.name : undefined;
    if (fault.kind === 'conflict') {
      const status = conflict(resource ?? '', name ?? '', MODIFIED).status;
      return { code: 409, body: status };
    }
    const status = statusForCode(fault.code, {
      ...(fault.message !== undefined ? { message: fault.message } : {}),
      ...(fault.retryAfterSeconds !== undefined ? { retryAfterSeconds: fault.retryAfterSeconds } : {}),
      ...(resource !== undefined ? { resource } : {}),
      ...(name !== undefined ? { name } : {}),
      verb,
    });
    const headers: Record<string, string> = {};
    if (fault.retryAfterSeconds !== undefined) headers['Retry-After'] = String(fault.retryAfterSeconds);
    return { code: fault.code, body: status, headers };
  };

  return (req, res) => {
    const method = (req.method ?? 'GET').toUpperCase();
    const url = new URL(req.url ?? '/', 'http://emulator.invalid');
    const query = url.searchParams;
    const r = route(url.pathname);
    const watch = query.get('watch') === 'true' || query.get('watch') === '1';
    // TokenReview (tokenreview.ts): the one resource outside core/v1, recorded as create tokenreviews.
    const tokenReview = url.pathname === TOKEN_REVIEW_PATH;
    const verb = tokenReview ? (method === 'POST' ? 'create' : 'unknown') : verbOf(method, r, watch);
    const resource = tokenReview
      ? 'tokenreviews'
      : r.type === 'resource'
        ? r.resource
        : r.type === 'namespaces'
          ? 'namespaces'
          : r.type === 'notFound'
            ? r.resource
            : undefined;
    const record: RequestRecord = {
      method,
      path: url.pathname,
      query: url.search.replace(/^\?/, ''),
      status: 0,
      verb,
      ...(resource !== undefined ? { resource } : {}),
      ...(r.type === 'resource' && r.subresource !== undefined ? { subresource: r.subresource } : {}),
      ...(r.type === 'resource' && r.namespace !== undefined ? { namespace: r.namespace } : {}),
      ...((r.type === 'resource' || r.type === 'namespaces') && r.name !== undefined ? { name: r.name } : {}),
    };
    records.push(record);

    const fault = faults.match({ method, path: url.pathname, verb, ...(resource !== undefined ? { resource } : {}) });
    if (fault?.kind === 'reset') {
      req.socket.resetAndDestroy();
      return;
    }
    if (fault?.kind === 'hang') {
      deps.hung.add(res);
      res.on('close', () => deps.hung.delete(res));
      req.resume();
      return;
    }

    const run = async (): Promise<Reply> => {
      const raw = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method) ? await readBody(req) : discardBody(req);
      if (fault?.kind === 'status' || fault?.kind === 'conflict') return faultReply(fault, r, verb);
      if (tokenReview) return serveTokenReview(deps.tokens, method, raw);
      // Negotiation only happens for API objects; unknown paths 404 whatever the Accept header.
      if ((r.type === 'resource' || r.type === 'namespaces') && !acceptsJson(req.headers.accept)) throw notAcceptable(JSON_TYPES);
      return dispatch(req, method, r, verb, query, raw);
    };

    const later = (reply: Reply): void => {
      if (fault?.kind !== 'late') {
        send(res, record, reply);
        return;
      }
      const timer = setTimeout(() => {
        deps.timers.delete(timer);
        if (!res.destroyed) send(res, record, reply);
      }, fault.ms);
      deps.timers.add(timer);
    };
    const go = (): void => {
      run().then(later, (e: unknown) => later(errorReply(e)));
    };
    if (fault?.kind === 'delay') {
      const timer = setTimeout(() => {
        deps.timers.delete(timer);
        if (!res.destroyed) go();
      }, fault.ms);
      deps.timers.add(timer);
    } else go();
  };

  async function dispatch(req: IncomingMessage, method: string, r: Route, verb: Verb, query: URLSearchParams, raw: string): Promise<Reply> {
    const accept = req.headers.accept ?? '';
    const table = wantsTable(accept);
    const includeParam = query.get('includeObject');
    const include: IncludeObject = includeParam === 'None' || includeParam === 'Object' ? includeParam : 'Metadata';
    switch (r.type) {
      case 'discovery':
        if (method !== 'GET') throw methodNotAllowed(NOT_ALLOWED);
        switch (r.doc) {
          case 'version':
            return ok(SERVER_VERSION);
          case 'api':
            return ok(apiVersions(deps.serverAddress()));
          case 'api/v1':
            return ok(coreV1Resources());
          case 'apis':
            return ok(apiGroupList());
          case 'openapi/v3':
            return ok(openapiV3Root());
          case 'openapi/v3/api/v1':
            return ok(openapiV3CoreV1());
          case 'openapi':
            return { code: 404, body: notFoundStatus() };
        }
        break;
      case 'notFound':
        return { code: 404, body: notFoundStatus() };
      case 'watchPath':
        throw methodNotAllowed(WATCH_UNSUPPORTED);
      case 'namespaces':
        return namespaces(method, r.name, query, raw, table, include);
      case 'resource':
        break;
    }
    if (r.type !== 'resource') return { code: 404, body: notFoundStatus() };
    if (verb === 'watch') throw methodNotAllowed(WATCH_UNSUPPORTED);
    const strategy = STRATEGIES[r.resource];
    const info = RESOURCES[r.resource];
    const ns = r.namespace;
    const name = r.name;

    // Cluster-wide collection: list only.
    if (ns === undefined) {
      if (method !== 'GET') throw methodNotAllowed(NOT_ALLOWED);
      return listReply(r.resource, undefined, query, table, include);
    }

    if (r.subresource !== undefined) {
      const scope: Scope = 'status';
      switch (method) {
        case 'GET':
          return objectReply(r.resource, registry.get(r.resource, ns, name ?? ''), table, include);
        case 'PUT':
          requireJsonBody(req);
          return written((o) => registry.update(r.resource, ns, name ?? '', parseJson(raw, info.kind), o), query, 'UpdateOptions', scope);
        case 'PATCH':
          return written(
            (o) => registry.patch(r.resource, ns, name ?? '', patchTypeOf(req), parseJson(raw, undefined), o),
            query,
            'PatchOptions',
            scope,
          );
        default:
          throw methodNotAllowed(NOT_ALLOWED);
      }
    }

    if (name === undefined) {
      switch (method) {
        case 'GET':
          return listReply(r.resource, ns, query, table, include);
        case 'POST': {
          requireJsonBody(req);
          return written((o) => registry.create(r.resource, ns, parseJson(raw, info.kind), o), query, 'CreateOptions', 'main', 201);
        }
        case 'DELETE': {
          const options = deleteOptionsOf(query, raw);
          const result = listResource(registry.store, strategy, ns, {
            labelSelector: query.get('labelSelector') ?? '',
            fieldSelector: query.get('fieldSelector') ?? '',
          });
          const deleted: Obj[] = [];
          for (const item of result.items) {
            try {
              deleted.push(registry.delete(r.resource, ns, nameOf(item), options));
            } catch (e) {
              // Already taken by the garbage collector earlier in this same call.
              if (!(e instanceof ApiError && e.code === 404)) throw e;
            }
          }
          return ok({
            kind: info.listKind,
            apiVersion: 'v1',
            metadata: { resourceVersion: String(registry.store.revision) },
            items: deleted.map(stripTypeMeta),
          });
        }
        default:
          throw methodNotAllowed(NOT_ALLOWED);
      }
    }

    switch (method) {
      case 'GET':
        return objectReply(r.resource, registry.get(r.resource, ns, name), table, include);
      case 'PUT':
        requireJsonBody(req);
        return written((o) => registry.update(r.resource, ns, name, parseJson(raw, info.kind), o), query, 'UpdateOptions');
      case 'PATCH':
        return written((o) => registry.patch(r.resource, ns, name, patchTypeOf(req), parseJson(raw, undefined), o), query, 'PatchOptions');
      case 'DELETE':
        return ok(registry.delete(r.resource, ns, name, deleteOptionsOf(query, raw)));
      default:
        throw methodNotAllowed(NOT_ALLOWED);
    }
  }

  /** Runs a write with the query's dryRun / fieldValidation and returns it with its Warning headers. */
  function written(
    write: (opts: WriteOptions) => Obj,
    query: URLSearchParams,
    optionsKind: string,
    scope: Scope = 'main',
    code = 200,
  ): Reply {
    const warnings: string[] = [];
    const obj = write({
      dryRun: dryRunOf(query, optionsKind),
      fieldValidation: fieldValidationOf(query, optionsKind),
      warnings,
      scope,
    });
    return warnings.length === 0 ? ok(obj, code) : { code, body: obj, headers: { Warning: warnings.map(warningHeader) } };
  }

  function requireJsonBody(req: IncomingMessage): void {
    const type = mediaType(req.headers['content-type']);
    if (!JSON_TYPES.includes(type)) throw unsupportedMediaType(JSON_TYPES);
  }

  function patchTypeOf(req: IncomingMessage): PatchType {
    const type = PATCH_TYPES[mediaType(req.headers['content-type'])];
    if (type === undefined) throw unsupportedMediaType(Object.keys(PATCH_TYPES));
    return type;
  }

  function deleteOptionsOf(query: URLSearchParams, raw: string): DeleteOptions {
    const body = raw.trim() === '' ? {} : parseJson(raw, undefined);
    if (!isRecord(body)) throw badRequest('json: cannot unmarshal array into Go value of type v1.DeleteOptions');
    const dryRun = dryRunOf(query, 'DeleteOptions') || (Array.isArray(body['dryRun']) && body['dryRun'].includes('All'));
    const qPolicy = query.get('propagationPolicy');
    const qOrphan = query.get('orphanDependents');
    const preconditions = isRecord(body['preconditions']) ? body['preconditions'] : undefined;
    const policy = body['propagationPolicy'] ?? (qPolicy === null ? undefined : qPolicy);
    const orphan = body['orphanDependents'] ?? (qOrphan === null ? undefined : qOrphan === 'true');
    return {
      ...(policy !== undefined && policy !== null ? { propagationPolicy: policy } : {}),
      ...(orphan !== undefined && orphan !== null ? { orphanDependents: orphan } : {}),
      ...(preconditions !== undefined ? { preconditions } : {}),
      dryRun,
    };
  }

  function objectReply(resource: string, obj: Obj, table: 'v1' | 'v1beta1' | undefined, include: IncludeObject): Reply {
    if (table === undefined) return ok(obj);
    const meta = { resourceVersion: String((obj['metadata'] as Obj)['resourceVersion'] ?? '') };
    return {
      code: 200,
      body: toTable(resource, [obj], meta, table, include, deps.clock()),
      contentType: `application/json;as=Table;v=${table};g=meta.k8s.io`,
    };
  }

  function listReply(
    resource: 'pods' | 'services',
    ns: string | undefined,
    query: URLSearchParams,
    table: 'v1' | 'v1beta1' | undefined,
    include: IncludeObject,
  ): Reply {
    const cont = query.get('continue') ?? '';
    if (cont !== '' && (query.get('resourceVersion') ?? '') !== '') {
      throw badRequest('specifying resource version is not allowed when using continue');
    }
    const limit = limitOf(query);
    const result = listResource(registry.store, STRATEGIES[resource], ns, {
      labelSelector: query.get('labelSelector') ?? '',
      fieldSelector: query.get('fieldSelector') ?? '',
      ...(limit !== undefined ? { limit } : {}),
      continue: cont,
    });
    const meta: Obj = { resourceVersion: result.resourceVersion };
    if (result.continue !== undefined) meta['continue'] = result.continue;
    if (result.remainingItemCount !== undefined) meta['remainingItemCount'] = result.remainingItemCount;
    if (table !== undefined) {
      return {
        code: 200,
        body: toTable(resource, result.items, meta, table, include, deps.clock()),
        contentType: `application/json;as=Table;v=${table};g=meta.k8s.io`,
      };
    }
    return ok({ kind: RESOURCES[resource].listKind, apiVersion: 'v1', metadata: meta, items: result.items.map(stripTypeMeta) });
  }

  function namespaces(
    method: string,
    name: string | undefined,
    query: URLSearchParams,
    raw: string,
    table: 'v1' | 'v1beta1' | undefined,
    include: IncludeObject,
  ): Reply {
    const nsTable = deps.namespaces;
    if (name !== undefined) {
      if (method !== 'GET') throw methodNotAllowed(NOT_ALLOWED);
      return objectReply('namespaces', nsTable.get(name), table, include);
    }
    if (method === 'POST') return ok(nsTable.create(parseJson(raw, 'Namespace')), 201);
    if (method !== 'GET') throw methodNotAllowed(NOT_ALLOWED);
    let items: Obj[];
    try {
      const labels = parseLabelSelector(query.get('labelSelector') ?? '');
      const fields = parseFieldSelector(query.get('fieldSelector') ?? '', ['metadata.name', 'status.phase']);
      items = nsTable.list().filter((n) => matchesLabels(labels, labelsOf(n)) && matchesFields(fields, Namespaces.fields(n)));
    } catch (e) {
      if (e instanceof SelectorError) throw badRequest(e.message);
      throw e;
    }
    const meta = { resourceVersion: String(registry.store.revision) };
    if (table !== undefined) {
      return {
        code: 200,
        body: toTable('namespaces', items, meta, table, include, deps.clock()),
        contentType: `application/json;as=Table;v=${table};g=meta.k8s.io`,
      };
    }
    return ok({ kind: 'NamespaceList', apiVersion: 'v1', metadata: meta, items: items.map(stripTypeMeta) });
  }
}
