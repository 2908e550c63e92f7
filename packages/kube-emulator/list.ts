/**
 * LIST semantics of the etcd3 storage layer: etcd key order, selectors applied while
 * filling a page, continue tokens in the real format (base64url JSON with rv and start
 * key) served from the snapshot taken at the first page, remainingItemCount only for
 * unfiltered lists.
 */
import {
  type LabelSelector,
  type FieldTerm,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
  SelectorError,
} from './selectors.ts';
import { type ApiError, badRequest, expired } from './status.ts';
import type { Entry, Store } from './store.ts';
import type { Strategy } from './strategy.ts';
import { isRecord, labelsOf, type Obj } from './types.ts';

export interface ListQuery {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly limit?: number;
  readonly continue?: string;
}

export interface ListResult {
  readonly items: Obj[];
  readonly resourceVersion: string;
  readonly continue?: string;
  readonly remainingItemCount?: number;
}

const EXPIRED_MESSAGE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

export interface Filter {
  readonly labels?: LabelSelector;
  readonly fields: readonly FieldTerm[];
  readonly empty: boolean;
}

/** Parses both selectors; any problem is the 400 BadRequest the real list handler answers. */
export function compileFilter(strategy: Strategy, labelSelector = '', fieldSelector = ''): Filter {
  try {
    const labels = labelSelector === '' ? undefined : parseLabelSelector(labelSelector);
    const fields = parseFieldSelector(fieldSelector, strategy.fieldLabels);
    const empty = (labels === undefined || labels.requirements.length === 0) && fields.length === 0;
    return labels === undefined ? { fields, empty } : { labels, fields, empty };
  } catch (e) {
    if (e instanceof SelectorError) throw badRequest(e.message);
    throw e;
  }
}

export function matches(strategy: Strategy, filter: Filter, obj: Obj): boolean {
  if (filter.labels !== undefined && !matchesLabels(filter.labels, labelsOf(obj))) return false;
  return matchesFields(filter.fields, strategy.fields(obj));
}

function encodeContinue(revision: number, startKey: string): string {
  const json = JSON.stringify({ v: 'meta.k8s.io/v1', rv: revision, start: startKey });
  return Buffer.from(json, 'utf8').toString('base64url');
}

function decodeContinue(token: string): { revision: number; start: string } {
  const invalid = (why: string): ApiError => badRequest(`invalid continue token: continue key is not valid: ${why}`);
  if (!/^[A-Za-z0-9_-]*$/.test(token)) throw invalid('illegal base64 data');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch (e) {
    throw invalid(e instanceof Error ? e.message : String(e));
  }
  const rec = isRecord(parsed) ? parsed : {};
  if (rec['v'] !== 'meta.k8s.io/v1') throw invalid(`server does not recognize this encoded version ${String(rec['v'] ?? '')}`);
  const revision = rec['rv'];
  if (typeof revision !== 'number' || !Number.isInteger(revision) || revision <= 0)
    throw invalid('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  const start = rec['start'];
  if (typeof start !== 'string' || start === '') throw invalid('encoded start key empty (version meta.k8s.io/v1)');
  return { revision, start };
}

export function listResource(store: Store, strategy: Strategy, namespace: string | undefined, query: ListQuery): ListResult {
  const filter = compileFilter(strategy, query.labelSelector, query.fieldSelector);
  const prefix = namespace === undefined ? '' : `${namespace}/`;
  const relative = (key: string): string => key.slice(prefix.length);

  let revision: number;
  let entries: readonly Entry[];
  let startAfter = '';
  if (query.continue !== undefined && query.continue !== '') {
    const token = decodeContinue(query.continue);
    const pinned = store.snapshotAt(strategy.resource, token.revision);
    if (pinned === undefined) throw expired(EXPIRED_MESSAGE);
    revision = token.revision;
    entries = pinned;
    startAfter = prefix + token.start;
  } else if (query.limit !== undefined && query.limit > 0) {
    ({ revision, entries } = store.snapshot(strategy.resource));
  } else {
    revision = store.revision;
    entries = store.entries(strategy.resource);
  }

  const inScope = entries.filter(([key]) => key.startsWith(prefix) && (startAfter === '' || key >= startAfter));
  const limit = query.limit !== undefined && query.limit > 0 ? query.limit : Number.POSITIVE_INFINITY;
  const items: Obj[] = [];
  let lastIndex = -1;
  for (let i = 0; i < inScope.length && items.length < limit; i++) {
    const entry = inScope[i];
    if (entry === undefined) continue;
    lastIndex = i;
    if (matches(strategy, filter, entry[1])) items.push(entry[1]);
  }
  const remaining = inScope.length - (lastIndex + 1);
  if (items.length >= limit && remaining > 0) {
    const lastKey = inScope[lastIndex]?.[0] ?? '';
    return {
      items,
      resourceVersion: String(revision),
      continue: encodeContinue(revision, `${relative(lastKey)}\u0000`),
      ...(filter.empty ? { remainingItemCount: remaining } : {}),
    };
  }
  return { items, resourceVersion: String(revision) };
}
