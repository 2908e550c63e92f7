import { forEachPage } from '../kube/paging.ts';
import { appServicesSelector, isOurService, serviceOwnerUids } from '../service-spec.ts';
import type { PodIdentity } from '../spark-pod.ts';
import { type EventResult, type ServiceOutcome, headline } from './context.ts';
import type { ReconcileContext } from './context.ts';
import { deleteOurs } from './delete.ts';
import { readDriver } from './driver-lookup.ts';

/**
 * A driver went (deleted, being deleted, or finished). Services it owns are garbage-collected by
 * Kubernetes once the pod object is deleted: report them. A finished driver pod may stay for a
 * long time (Spark leaves Completed drivers), so its Services are deleted here. Services of the
 * app with no live owner are strays: delete them. Services owned by another live pod stay.
 */
export async function driverGone(
  ctx: ReconcileContext,
  driver: PodIdentity,
  appId: string,
  podObjectDeleted: boolean,
): Promise<EventResult> {
  if (driver.uid !== '') ctx.liveDrivers?.markGone(driver.uid);
  const outcomes: ServiceOutcome[] = [];
  const ownerAlive = new Map<string, boolean>([[driver.uid, false]]);
  await forEachPage(
    (token) => ctx.client.listServices(driver.namespace, appServicesSelector(appId), ctx.config.sweepPageSize, token),
    async (services) => {
      for (const service of services) {
        if (!isOurService(service)) continue;
        const owners = service.metadata.ownerReferences ?? [];
        const ownedByThisDriver = serviceOwnerUids(service).includes(driver.uid);
        if (ownedByThisDriver && podObjectDeleted) {
          outcomes.push({ namespace: driver.namespace, service: service.metadata.name, action: 'collected', detail: 'owned by the deleted driver' });
          continue;
        }
        if (ownedByThisDriver) {
          outcomes.push(await deleteOurs(ctx, service, 'driver finished'));
          continue;
        }
        let anyOwnerAlive = false;
        for (const owner of owners) {
          let alive = ownerAlive.get(owner.uid);
          if (alive === undefined) {
            alive = (await readDriver(ctx, { namespace: driver.namespace, name: owner.name, uid: owner.uid })).alive;
            ownerAlive.set(owner.uid, alive);
          }
          anyOwnerAlive ||= alive;
        }
        if (anyOwnerAlive) outcomes.push({ namespace: driver.namespace, service: service.metadata.name, action: 'verified', detail: 'owned by another live driver' });
        else outcomes.push(await deleteOurs(ctx, service, owners.length === 0 ? 'stray: no owner' : 'stray: owner gone'));
      }
    },
  );
  return {
    action: headline(outcomes) ?? 'verified',
    reason: outcomes.length === 0 ? 'no Services left for this app' : undefined,
    namespace: driver.namespace,
    pod: driver.name,
    app: appId,
    outcomes,
  };
}
