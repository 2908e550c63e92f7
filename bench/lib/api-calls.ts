/**
 * What one API request of the function was for, from the emulator's request log (verb, resource,
 * name, label selector): the one classification the bench counts API calls with, per event
 * (section sequential) and per step (section lifecycle).
 */
import type { LoggedRequest } from './procs.ts';

export function callKind(r: LoggedRequest, driverName: string): string {
  const selector = new URLSearchParams(r.query).get('labelSelector') ?? '';
  const what = `${r.verb} ${r.resource ?? '?'}`;
  switch (what) {
    case 'get pods':
      return r.name === driverName ? 'get driver' : 'get pod';
    case 'list pods':
      return selector.includes('spark-exec-id in') ? 'list pods (exec ids)' : 'list pods (namespace)';
    case 'list services':
      return selector.includes('spark-app-selector') ? 'list svc (app)' : 'list svc (namespace)';
    case 'create services':
      return 'create svc';
    case 'patch services':
      return 'patch svc';
    case 'delete services':
      return 'delete svc';
    default:
      return what;
  }
}

/** Requests counted by kind. */
export function countCalls(requests: readonly LoggedRequest[], driverName: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const r of requests) {
    const kind = callKind(r, driverName);
    calls[kind] = (calls[kind] ?? 0) + 1;
  }
  return calls;
}
