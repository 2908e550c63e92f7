/**
 * The invariant, checked on what the REAL API server says: one read of the namespace's pods and
 * Services with the admin's token, handed to the spec-written check of test/security/invariant.ts
 * (one rule in one place) through the two reads it makes.
 */
import type { KubeEmulator } from '../../test/kube-emulator/index.ts';
import { invariantProblems } from '../../test/security/invariant.ts';
import { NS } from '../../test/reliability/support.ts';
import { type ApiAccess, rawGet } from '../adapter/kube-access.ts';

export interface Snapshot {
  readonly pods: Record<string, unknown>[];
  readonly services: Record<string, unknown>[];
}

/** Pods and Services of the namespace, as plain JSON (the API's field names). */
export async function snapshot(admin: ApiAccess, namespace: string): Promise<Snapshot> {
  const items = async (resource: string): Promise<Record<string, unknown>[]> =>
    ((await rawGet(admin, `/api/v1/namespaces/${namespace}/${resource}`)) as { items: Record<string, unknown>[] }).items;
  const [pods, services] = await Promise.all([items('pods'), items('services')]);
  return { pods, services };
}

function matches(labels: Record<string, string> | undefined, selector: string | undefined): boolean {
  if (selector === undefined || selector === '') return true;
  return selector.split(',').every((term) => {
    const [key, value] = term.split('=');
    return key !== undefined && labels?.[key] === value;
  });
}

/** Violations of the invariant in the real API server's namespace `spark` (the kustomization's namespace). */
export async function realInvariantProblems(admin: ApiAccess, defaultPort: number | undefined, genuine: ReadonlySet<string>): Promise<string[]> {
  const snap = await snapshot(admin, NS);
  const byKind = { pods: snap.pods, services: snap.services } as Record<string, Record<string, unknown>[]>;
  const labelsOf = (o: Record<string, unknown>): Record<string, string> | undefined =>
    (o['metadata'] as { labels?: Record<string, string> } | undefined)?.labels;
  const nameOf = (o: Record<string, unknown>): string | undefined => (o['metadata'] as { name?: string } | undefined)?.name;
  const view = {
    listObjects: (resource: string, namespace?: string, labelSelector?: string) => {
      if (namespace !== NS) throw new Error(`invariant read outside ${NS}`);
      return (byKind[resource] ?? []).filter((o) => matches(labelsOf(o), labelSelector));
    },
    getObject: (resource: string, namespace: string, name: string) => {
      if (namespace !== NS) throw new Error(`invariant read outside ${NS}`);
      return (byKind[resource] ?? []).find((o) => nameOf(o) === name);
    },
  } as unknown as KubeEmulator;
  return invariantProblems(view, defaultPort, genuine);
}
