import type { ReconcileContext } from '../engine/context.ts';
import { SPARK_APP_ID_LABEL, SPARK_ROLE_EXECUTOR, SPARK_ROLE_LABEL } from '../model/labels.ts';
import type { ServiceOutcome } from '../rules/outcome.ts';
import { reconcileExecutorPage } from './sweep.ts';

/** Executor pods of an application decided per page on a driver's opt-in. */
const APP_PAGE = 50;

/**
 * A driver that opted in (shared/rules/plan.ts: driverOptInLook): its application's executor
 * pods, page by page, decided as a sweep page is (their slots' pods listed afresh, their
 * Services read first), so that running executors get their Services now rather than at the
 * next sweep. Bounded like a driver's end: past half the event's budget the rest is the sweep's.
 */
export async function reconcileDriverOptedIn(ctx: ReconcileContext, namespace: string, appId: string): Promise<ServiceOutcome[]> {
  const outcomes: ServiceOutcome[] = [];
  const started = Date.now();
  const selector = `${SPARK_APP_ID_LABEL}=${appId},${SPARK_ROLE_LABEL}=${SPARK_ROLE_EXECUTOR}`;
  let token: string | undefined;
  do {
    const page = await ctx.client.listPods(namespace, selector, Math.min(APP_PAGE, ctx.config.sweepPageSize), token);
    outcomes.push(...(await reconcileExecutorPage(ctx, namespace, page.items)));
    token = page.continueToken;
  } while (token !== undefined && Date.now() - started < ctx.config.eventDeadlineMs / 2);
  return outcomes;
}
