/**
 * The invariant, checked on what the REAL API server says: one read of the namespace's pods and
 * Services with the admin's token, handed as they are to the spec-written oracle of
 * testkit/oracle.ts (one rule in one place).
 */
import { z } from 'zod';
import { type ClusterView, invariantProblems, type Obj } from '../../testkit/oracle.ts';
import { NS } from '../../test/support/audited.ts';
import { type ApiAccess, rawGet } from '../adapter/kube-access.ts';

/** A list as the API server answers it; the oracle reads the rest of each object as it is. */
const ObjectList = z.object({ items: z.array(z.looseObject({ metadata: z.looseObject({ name: z.string() }) })) });

/** Pods and Services of the namespace, as plain JSON (the API's field names). */
export async function snapshot(admin: ApiAccess, namespace: string): Promise<ClusterView> {
  const items = async (resource: 'pods' | 'services'): Promise<Obj[]> => {
    const path = `/api/v1/namespaces/${namespace}/${resource}`;
    const parsed = ObjectList.safeParse(await rawGet(admin, path));
    // A list the oracle cannot read is a failed check, never an empty (and so "holding") namespace.
    if (!parsed.success) throw new Error(`GET ${path}: not a list of objects: ${parsed.error.message}`);
    return parsed.data.items as unknown as Obj[];
  };
  const [pods, services] = await Promise.all([items('pods'), items('services')]);
  return { pods, services };
}

/**
 * Violations of the invariant in the real API server's namespace `spark` (the kustomization's
 * namespace). `genuine`: the executors known to be the real ones when a tenant's pod claims the same slot.
 */
export async function realInvariantProblems(
  admin: ApiAccess,
  defaultPort: number | undefined,
  genuine: ReadonlySet<string>,
): Promise<string[]> {
  return invariantProblems(await snapshot(admin, NS), { defaultPort, genuine });
}
