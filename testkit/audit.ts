/**
 * The security audit of an emulator request log (no vitest import: the soak uses it too).
 * Every HTTP request that reached the emulator is checked: the function may only get/list pods
 * and get/list/create/patch/delete Services, only in its namespaces, and never write to a
 * Service that is someone else's.
 */
import type { RequestRecord } from '../packages/kube-emulator/index.ts';

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export interface AuditScope {
  /** Namespaces the function may touch (its WATCH_NAMESPACES). */
  readonly namespaces: readonly string[];
  /** Services the function must never write to (someone else's). */
  readonly foreign?: ReadonlyArray<{ namespace: string; name: string }>;
}

/** Problems in a request log; [] = the function stayed in its lane. */
export function auditRequests(requests: readonly RequestRecord[], scope: AuditScope): string[] {
  const problems: string[] = [];
  const foreign = new Set((scope.foreign ?? []).map((f) => `${f.namespace}/${f.name}`));
  for (const r of requests) {
    const what = `${r.method} ${r.path}${r.query === '' ? '' : `?${r.query}`}`;
    if (r.resource !== 'pods' && r.resource !== 'services') problems.push(`request outside pods/services: ${what}`);
    if (r.subresource !== undefined) problems.push(`subresource request: ${what}`);
    if (r.namespace === undefined) problems.push(`cluster-wide request: ${what}`);
    else if (!scope.namespaces.includes(r.namespace)) problems.push(`request outside the watched namespaces: ${what}`);
    if (r.resource === 'pods' && WRITE_VERBS.has(r.verb)) problems.push(`pod write: ${what}`);
    if (r.verb === 'deletecollection' || r.verb === 'update' || r.verb === 'watch')
      problems.push(`verb ${r.verb} never used by the function: ${what}`);
    if (r.resource === 'services' && WRITE_VERBS.has(r.verb) && r.name !== undefined && foreign.has(`${r.namespace}/${r.name}`)) {
      problems.push(`write to a foreign Service: ${what}`);
    }
  }
  return problems;
}
