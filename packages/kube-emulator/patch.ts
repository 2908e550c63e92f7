/**
 * The three PATCH flavours the apiserver accepts from client-node and kubectl:
 *  - JSON merge patch (RFC 7386),
 *  - JSON patch (RFC 6902),
 *  - strategic merge patch, reduced to what Pods and Services need: merge patch plus
 *    keyed merging of the lists that carry a patchMergeKey, set-merging of finalizers,
 *    and the $patch / $retainKeys / $setElementOrder / $deleteFromPrimitiveList directives.
 */
import { badRequest, genericInvalid, unknownServerError } from './status.ts';
import { clone, deepEqual, isRecord, type Obj } from './types.ts';

// ---- RFC 7386 -----------------------------------------------------------------------------

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return clone(patch);
  const out: Obj = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/** The apiserver only accepts an object as a merge patch document. */
export function applyMergePatch(current: Obj, patch: unknown): Obj {
  if (!isRecord(patch)) throw badRequest('Invalid JSON Patch');
  const result = mergePatch(current, patch);
  return isRecord(result) ? result : {};
}

// ---- RFC 6902 -----------------------------------------------------------------------------

interface Operation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
  hasValue: boolean;
}

class PatchFailure extends Error {}

function decodeOperations(patch: unknown): Operation[] {
  if (!Array.isArray(patch)) {
    throw badRequest(`json: cannot unmarshal ${jsonKind(patch)} into Go value of type jsonpatch.Patch`);
  }
  return patch.map((raw) => {
    if (!isRecord(raw)) throw badRequest(`json: cannot unmarshal ${jsonKind(raw)} into Go value of type jsonpatch.Operation`);
    return {
      op: typeof raw['op'] === 'string' ? raw['op'] : '',
      path: typeof raw['path'] === 'string' ? raw['path'] : '',
      ...(typeof raw['from'] === 'string' ? { from: raw['from'] } : {}),
      value: raw['value'],
      hasValue: Object.hasOwn(raw, 'value'),
    };
  });
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'object';
  return typeof value === 'boolean' ? 'bool' : typeof value;
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new PatchFailure(`invalid JSON pointer ${pointer}`);
  return pointer
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function arrayIndex(token: string, length: number, allowEnd: boolean): number {
  if (allowEnd && token === '-') return length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new PatchFailure(`invalid array index ${token}`);
  const i = Number(token);
  if (i > length || (!allowEnd && i === length)) throw new PatchFailure(`index out of range ${token}`);
  return i;
}

/** Returns the container holding the last token, so the caller can read or write it. */
function locate(doc: { root: unknown }, tokens: string[]): { parent: unknown; key: string } {
  let parent: unknown = doc;
  let key = 'root';
  for (const token of tokens) {
    const next: unknown = Array.isArray(parent)
      ? parent[arrayIndex(key, parent.length, false)]
      : isRecord(parent)
        ? parent[key]
        : undefined;
    if (next === undefined || next === null || typeof next !== 'object') throw new PatchFailure('doc is missing path');
    parent = next;
    key = token;
  }
  return { parent, key };
}

function getAt(doc: { root: unknown }, path: string): unknown {
  const { parent, key } = locate(doc, parsePointer(path));
  if (Array.isArray(parent)) return parent[arrayIndex(key, parent.length, false)];
  if (isRecord(parent) && Object.hasOwn(parent, key)) return parent[key];
  throw new PatchFailure('missing value');
}

function addAt(doc: { root: unknown }, path: string, value: unknown): void {
  const { parent, key } = locate(doc, parsePointer(path));
  if (Array.isArray(parent)) parent.splice(arrayIndex(key, parent.length, true), 0, value);
  else if (isRecord(parent)) parent[key] = value;
  else throw new PatchFailure('doc is missing path');
}

function removeAt(doc: { root: unknown }, path: string): unknown {
  const { parent, key } = locate(doc, parsePointer(path));
  if (Array.isArray(parent)) return parent.splice(arrayIndex(key, parent.length, false), 1)[0];
  if (isRecord(parent) && Object.hasOwn(parent, key)) {
    const old = parent[key];
    delete parent[key];
    return old;
  }
  throw new PatchFailure('Unable to remove nonexistent key');
}

/** Any failure while applying answers 422 with the generic message, like the apiserver. */
export function applyJsonPatch(current: Obj, patch: unknown): Obj {
  const ops = decodeOperations(patch);
  const doc: { root: unknown } = { root: clone(current) };
  try {
    for (const op of ops) {
      switch (op.op) {
        case 'add':
          if (!op.hasValue) throw new PatchFailure('missing value');
          addAt(doc, op.path, clone(op.value));
          break;
        case 'remove':
          removeAt(doc, op.path);
          break;
        case 'replace':
          if (!op.hasValue) throw new PatchFailure('missing value');
          getAt(doc, op.path);
          if (op.path === '') doc.root = clone(op.value);
          else {
            removeAt(doc, op.path);
            addAt(doc, op.path, clone(op.value));
          }
          break;
        case 'move': {
          const value = removeAt(doc, op.from ?? '');
          addAt(doc, op.path, value);
          break;
        }
        case 'copy':
          addAt(doc, op.path, clone(getAt(doc, op.from ?? '')));
          break;
        case 'test':
          if (!deepEqual(getAt(doc, op.path), op.value)) throw new PatchFailure('testing value failed');
          break;
        default:
          throw new PatchFailure(`Unexpected kind: ${op.op}`);
      }
    }
  } catch (e) {
    if (e instanceof PatchFailure) throw genericInvalid();
    throw e;
  }
  return isRecord(doc.root) ? doc.root : {};
}

// ---- strategic merge patch ------------------------------------------------------------------

/** How a list at a given path merges; paths use "[]" for list elements. */
export type ListStrategy = { readonly mergeKey: string } | { readonly primitiveMerge: true };
export type StrategyLookup = (path: string) => ListStrategy | undefined;

const SET_ELEMENT_ORDER = '$setElementOrder/';
const DELETE_FROM_PRIMITIVE = '$deleteFromPrimitiveList/';

export function applyStrategicMergePatch(current: Obj, patch: unknown, lookup: StrategyLookup): Obj {
  if (!isRecord(patch)) {
    throw badRequest(`json: cannot unmarshal ${jsonKind(patch)} into Go value of type map[string]interface {}`);
  }
  const out = mergeMap(current, patch, '', lookup);
  return out ?? {};
}

/** Returns undefined when the patch deletes the whole map ($patch: delete). */
function mergeMap(original: Obj, patch: Obj, path: string, lookup: StrategyLookup): Obj | undefined {
  const directive = patch['$patch'];
  if (directive === 'delete') return undefined;
  if (directive === 'replace') {
    const replaced: Obj = {};
    for (const [k, v] of Object.entries(patch)) if (k !== '$patch' && v !== null) replaced[k] = clone(v);
    return replaced;
  }
  if (directive !== undefined) throw badRequest(`Unknown patch type: ${String(directive)} in map: ${JSON.stringify(patch)}`);

  let out: Obj = { ...original };
  const retainKeys = patch['$retainKeys'];
  if (Array.isArray(retainKeys)) {
    const keep = new Set(retainKeys.filter((k): k is string => typeof k === 'string'));
    out = Object.fromEntries(Object.entries(out).filter(([k]) => keep.has(k)));
  }

  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys' || key.startsWith(SET_ELEMENT_ORDER)) continue;
    if (key.startsWith(DELETE_FROM_PRIMITIVE)) {
      const field = key.slice(DELETE_FROM_PRIMITIVE.length);
      const existing = out[field];
      if (Array.isArray(existing) && Array.isArray(value)) out[field] = existing.filter((v) => !value.some((d) => deepEqual(d, v)));
      continue;
    }
    const childPath = path === '' ? key : `${path}.${key}`;
    if (value === null) {
      delete out[key];
    } else if (isRecord(value)) {
      const existing = out[key];
      const merged = mergeMap(isRecord(existing) ? existing : {}, value, childPath, lookup);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    } else if (Array.isArray(value)) {
      const existing = out[key];
      out[key] = mergeList(Array.isArray(existing) ? existing : [], value, childPath, lookup);
    } else {
      out[key] = value;
    }
  }

  // $setElementOrder/<field>: the client's wanted order for a merged list.
  for (const [key, order] of Object.entries(patch)) {
    if (!key.startsWith(SET_ELEMENT_ORDER) || !Array.isArray(order)) continue;
    const field = key.slice(SET_ELEMENT_ORDER.length);
    const list = out[field];
    const strategy = lookup(path === '' ? field : `${path}.${field}`);
    if (Array.isArray(list) && strategy !== undefined) out[field] = reorder(list, order, strategy);
  }
  return out;
}

function mergeList(original: unknown[], patch: unknown[], path: string, lookup: StrategyLookup): unknown[] {
  const strategy = lookup(path);
  if (strategy === undefined) {
    // Atomic list: replaced, but a {$patch: replace} marker may still appear.
    return patch.filter((item) => !(isRecord(item) && item['$patch'] === 'replace')).map((v) => clone(v));
  }
  if ('primitiveMerge' in strategy) {
    const out = [...original];
    for (const item of patch) if (!out.some((o) => deepEqual(o, item))) out.push(clone(item));
    return out;
  }
  const key = strategy.mergeKey;
  if (patch.some((item) => isRecord(item) && item['$patch'] === 'replace')) {
    return patch.filter((item) => !(isRecord(item) && item['$patch'] === 'replace')).map((v) => clone(v));
  }
  const out = original.map((v) => v);
  for (const item of patch) {
    if (!isRecord(item)) {
      throw unknownServerError(`unable to find api field in struct for the merge key "${key}"`);
    }
    if (!Object.hasOwn(item, key)) {
      throw unknownServerError(`map: ${goMap(item)} does not contain declared merge key: ${key}`);
    }
    const index = out.findIndex((o) => isRecord(o) && deepEqual(o[key], item[key]));
    if (item['$patch'] === 'delete') {
      if (index >= 0) out.splice(index, 1);
      continue;
    }
    if (index >= 0) {
      const existing = out[index];
      const merged = mergeMap(isRecord(existing) ? existing : {}, item, `${path}[]`, lookup);
      if (merged === undefined) out.splice(index, 1);
      else out[index] = merged;
    } else {
      const fresh = mergeMap({}, item, `${path}[]`, lookup);
      if (fresh !== undefined) out.push(fresh);
    }
  }
  return out;
}

function reorder(list: unknown[], order: unknown[], strategy: ListStrategy): unknown[] {
  const keyOf = (v: unknown): unknown => ('mergeKey' in strategy ? (isRecord(v) ? v[strategy.mergeKey] : undefined) : v);
  const orderKeys = order.map((o) => keyOf(o));
  const rank = (v: unknown): number => {
    const i = orderKeys.findIndex((k) => deepEqual(k, keyOf(v)));
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  // Stable: elements not named in the order keep their relative place after the named ones.
  return list
    .map((v, i) => ({ v, i }))
    .sort((a, b) => rank(a.v) - rank(b.v) || a.i - b.i)
    .map((e) => e.v);
}

function goMap(obj: Obj): string {
  return `map[${Object.keys(obj)
    .sort()
    .map((k) => `${k}:${JSON.stringify(obj[k])}`)
    .join(' ')}]`;
}
