import type { ReconcileContext } from '../engine/context.ts';
import { reconcileServices } from '../engine/reconcile.ts';
import { appServicesSelector, serviceFact } from '../model/service-spec.ts';
import type { ServiceOutcome } from '../rules/outcome.ts';

/** Services of an application decided per page on a driver event: at most this many writes between budget checks. */
const APP_PAGE = 50;

/**
 * Every Service of one application, page by page, decided afresh (a driver ended: finished
 * drivers' Services are deleted, deleted drivers' are left to garbage collection). The work is
 * bounded per event — the sender waits for this answer before it sends the namespace's next
 * event: past half the event's budget the rest is left to the next sweep.
 */
export async function reconcileDriverEnded(ctx: ReconcileContext, namespace: string, appId: string): Promise<ServiceOutcome[]> {
  const outcomes: ServiceOutcome[] = [];
  const started = Date.now();
  let token: string | undefined;
  do {
    const page = await ctx.client.listServices(namespace, appServicesSelector(appId), Math.min(APP_PAGE, ctx.config.sweepPageSize), token);
    outcomes.push(
      ...(await reconcileServices(
        ctx,
        namespace,
        page.items.flatMap((s) => serviceFact(s) ?? []),
      )),
    );
    token = page.continueToken;
  } while (token !== undefined && Date.now() - started < ctx.config.eventDeadlineMs / 2);
  return outcomes;
}
