import type { Service } from '../k8s-objects.ts';
import type { ReconcileContext, ServiceOutcome } from './context.ts';

/** Delete one of our Services, and only that very object (UID precondition). */
export async function deleteOurs(ctx: ReconcileContext, service: Service, why: string): Promise<ServiceOutcome> {
  const { namespace, name, uid } = service.metadata;
  if (uid === undefined) throw new Error(`service ${name} has no uid`);
  const result = await ctx.client.deleteService(namespace, name, uid);
  const detail = result === 'deleted' ? why : result === 'not-found' ? `${why}; already gone` : `${why}; replaced by a newer Service, left alone`;
  return { namespace, service: name, action: result === 'precondition-failed' ? 'verified' : 'deleted', detail };
}

