/**
 * Shared JSON helpers and the resource table. Objects are plain JSON (`Obj`);
 * the emulator never trusts a shape it has not checked, so everything is narrowed here.
 */

export type Obj = Record<string, unknown>;

export type ResourceName = 'pods' | 'services';

export interface ResourceInfo {
  readonly resource: ResourceName;
  readonly kind: 'Pod' | 'Service';
  readonly listKind: 'PodList' | 'ServiceList';
  readonly singular: string;
  readonly shortNames: readonly string[];
}

export const RESOURCES: Readonly<Record<ResourceName, ResourceInfo>> = {
  pods: { resource: 'pods', kind: 'Pod', listKind: 'PodList', singular: 'pod', shortNames: ['po'] },
  services: { resource: 'services', kind: 'Service', listKind: 'ServiceList', singular: 'service', shortNames: ['svc'] },
};

export function isResourceName(value: string): value is ResourceName {
  return value === 'pods' || value === 'services';
}

export function isRecord(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function clone<T>(value: T): T {
  return structuredClone(value);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isRecord(a)) {
    if (!isRecord(b)) return false;
    const ak = Object.keys(a);
    const bk = Object.keys(b);
    if (ak.length !== bk.length) return false;
    return ak.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Reads a nested value; undefined when any step is missing or not an object. */
export function getPath(obj: unknown, ...keys: string[]): unknown {
  let cur: unknown = obj;
  for (const key of keys) {
    if (!isRecord(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

export function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function record(value: unknown): Obj {
  return isRecord(value) ? value : {};
}

export function array(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The object's metadata, created when absent (callers own `obj`). */
export function metadataOf(obj: Obj): Obj {
  const meta = obj['metadata'];
  if (isRecord(meta)) return meta;
  const fresh: Obj = {};
  obj['metadata'] = fresh;
  return fresh;
}

/** Also used for objects fetched from the store: never mutates. */
export function nameOf(obj: Obj): string {
  return str(getPath(obj, 'metadata', 'name'));
}

export function namespaceOf(obj: Obj): string {
  return str(getPath(obj, 'metadata', 'namespace'));
}

export function uidOf(obj: Obj): string {
  return str(getPath(obj, 'metadata', 'uid'));
}

export function stringMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isRecord(value)) return out;
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

export function labelsOf(obj: Obj): Record<string, string> {
  return stringMap(getPath(obj, 'metadata', 'labels'));
}

export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export function ownerRefsOf(obj: Obj): OwnerRef[] {
  return array(getPath(obj, 'metadata', 'ownerReferences'))
    .filter(isRecord)
    .map((r) => ({
      apiVersion: str(r['apiVersion']),
      kind: str(r['kind']),
      name: str(r['name']),
      uid: str(r['uid']),
      ...(typeof r['controller'] === 'boolean' ? { controller: r['controller'] } : {}),
      ...(typeof r['blockOwnerDeletion'] === 'boolean' ? { blockOwnerDeletion: r['blockOwnerDeletion'] } : {}),
    }));
}

/** RFC 3339 with second precision, as metav1.Time serialises. */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
