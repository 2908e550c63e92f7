/**
 * URL → route, and the Kubernetes verb of a request (what RBAC and audit would call it).
 */
import { isResourceName, type ResourceName } from './types.ts';

export type Route =
  | { readonly type: 'discovery'; readonly doc: 'version' | 'api' | 'api/v1' | 'apis' | 'openapi/v3' | 'openapi/v3/api/v1' | 'openapi' }
  | { readonly type: 'namespaces'; readonly name?: string }
  | {
      readonly type: 'resource';
      readonly resource: ResourceName;
      readonly namespace?: string;
      readonly name?: string;
      readonly subresource?: string;
    }
  | { readonly type: 'watchPath' }
  | { readonly type: 'notFound'; readonly resource?: string };

export type Verb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'watch' | 'discovery' | 'unknown';

function segments(path: string): string[] | undefined {
  try {
    return path
      .split('/')
      .filter((s) => s !== '')
      .map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

export function route(path: string): Route {
  const segs = segments(path);
  if (segs === undefined) return { type: 'notFound' };
  const [a, b, c, d, e, f, g] = segs;
  if (a === 'version' && segs.length === 1) return { type: 'discovery', doc: 'version' };
  if (a === 'openapi') {
    const rest = segs.slice(1).join('/');
    return { type: 'discovery', doc: rest === 'v3' ? 'openapi/v3' : rest === 'v3/api/v1' ? 'openapi/v3/api/v1' : 'openapi' };
  }
  if (a === 'apis' && segs.length === 1) return { type: 'discovery', doc: 'apis' };
  if (a !== 'api') return { type: 'notFound' };
  if (segs.length === 1) return { type: 'discovery', doc: 'api' };
  if (b !== 'v1') return { type: 'notFound' };
  if (segs.length === 2) return { type: 'discovery', doc: 'api/v1' };
  if (c === 'watch') return { type: 'watchPath' };
  if (c === 'namespaces') {
    if (segs.length === 3) return { type: 'namespaces' };
    if (segs.length === 4 && d !== undefined) return { type: 'namespaces', name: d };
    if (e === undefined || !isResourceName(e)) return { type: 'notFound', ...(e !== undefined ? { resource: e } : {}) };
    if (segs.length === 5) return { type: 'resource', resource: e, namespace: d ?? '' };
    if (segs.length === 6) return { type: 'resource', resource: e, namespace: d ?? '', name: f ?? '' };
    if (segs.length === 7 && g === 'status') return { type: 'resource', resource: e, namespace: d ?? '', name: f ?? '', subresource: g };
    return { type: 'notFound', resource: e };
  }
  if (c !== undefined && isResourceName(c) && segs.length === 3) return { type: 'resource', resource: c };
  return { type: 'notFound', ...(c !== undefined ? { resource: c } : {}) };
}

export function verbOf(method: string, r: Route, watch: boolean): Verb {
  switch (r.type) {
    case 'discovery':
      return 'discovery';
    case 'watchPath':
      return 'watch';
    case 'notFound':
      return 'unknown';
    case 'namespaces':
    case 'resource': {
      const hasName = r.name !== undefined;
      switch (method) {
        case 'GET':
          return hasName ? 'get' : watch ? 'watch' : 'list';
        case 'POST':
          return hasName ? 'unknown' : 'create';
        case 'PUT':
          return hasName ? 'update' : 'unknown';
        case 'PATCH':
          return hasName ? 'patch' : 'unknown';
        case 'DELETE':
          return hasName ? 'delete' : 'deletecollection';
        default:
          return 'unknown';
      }
    }
  }
}
