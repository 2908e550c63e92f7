/**
 * The periodic safety net (a PingSource event): the ApiServerSource sends nothing for its
 * initial list, re-lists and restarts, so only a list-and-compare repairs what those lost. It
 * walks each watched namespace page by page — first our Services (marks, cool-downs, strays),
 * then the executor pods (missing Services) — and hands every page to the same reconciliation
 * as the events, which reads what it needs afresh per application before acting. Each sweep
 * stops after half the event's budget and the next one goes on from there, so a namespace of any
 * size is covered in a bounded number of sweeps; every write carries preconditions, so
 * overlapping sweeps and events cannot undo each other.
 */
import type { SlotKey } from '../rules/decide.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { Page } from '../kube/client.ts';
import type { Pod, Service } from '../model/k8s-objects.ts';
import { SPARK_ROLE_EXECUTOR, SPARK_ROLE_LABEL } from '../model/labels.ts';
import { OUR_SERVICES_SELECTOR, serviceFact } from '../model/service-spec.ts';
import { type PodFact, podFact } from '../model/spark-pod.ts';
import type { ReconcileContext } from '../engine/context.ts';
import { FactsKeptChangingError, reconcileServices, reconcileSlots } from '../engine/reconcile.ts';
import { LOOK_AFRESH } from '../rules/plan.ts';
import { type EventResult, type ServiceOutcome, sweepReports } from '../rules/outcome.ts';
import { type Pass, SweepCursor } from './sweep-cursor.ts';

/** Objects of a page decided together between two checks of the sweep's budget. */
const CHUNK = 100;

/** One sweep tick, from `cursor` (a fresh cursor: from the beginning); its result says whether it finished a round. */
export async function sweep(ctx: ReconcileContext, cursor: SweepCursor = new SweepCursor()): Promise<EventResult> {
  // One sweep at a time per process: two would share (and corrupt) the cursor. A tick that finds
  // one running has nothing to add; the running one goes on from where it is.
  if (cursor.running)
    return { action: 'swept', reason: 'a sweep is already running in this process', outcomes: [], round: 'already-running' };
  cursor.running = true;
  try {
    return await sweepFromCursor(ctx, cursor);
  } finally {
    cursor.running = false;
  }
}

async function sweepFromCursor(ctx: ReconcileContext, cursor: SweepCursor): Promise<EventResult> {
  const namespaces = ctx.config.namespaces;
  const started = Date.now();
  const overBudget = (): boolean => Date.now() - started >= ctx.config.sweepDeadlineMs / 2;
  const outcomes: ServiceOutcome[] = [];
  const startRound = cursor.rounds;
  let examined = 0;
  let pages = 0;
  do {
    const namespace = namespaces[cursor.namespaceIndex % namespaces.length]!;
    let page: Page<Service> | Page<Pod>;
    try {
      page = await listPage(ctx, namespace, cursor.pass, cursor.pageToken);
    } catch (error) {
      // A continue token expires (410 Expired) when its snapshot is compacted: start the pass again.
      if (error instanceof KubeApiError && error.status === 410 && cursor.pageToken !== undefined) {
        Object.assign(cursor, { pageToken: undefined, skip: 0, counted: 0 });
        continue;
      }
      throw error;
    }
    pages++;
    // Items the page could not read are Services of ours all the same (our label selected them).
    if (cursor.skip === 0 && cursor.pass === 'services') cursor.counted += page.items.length + page.skipped.length;
    // A page is decided in chunks, so that one sweep's work stays within its budget; a page cut
    // short is listed again by the next sweep (same token) and goes on after what was decided.
    while (cursor.skip < page.items.length) {
      const chunk = page.items.slice(cursor.skip, cursor.skip + CHUNK);
      examined += chunk.length;
      try {
        if (cursor.pass === 'services') {
          outcomes.push(
            ...(await reconcileServices(
              ctx,
              namespace,
              (chunk as Service[]).flatMap((s) => serviceFact(s) ?? []),
            )),
          );
        } else {
          outcomes.push(...(await reconcileExecutorPage(ctx, namespace, chunk as Pod[])));
        }
      } catch (error) {
        // Objects that kept changing under this chunk are left to the next sweep; the rest goes on.
        if (!(error instanceof FactsKeptChangingError)) throw error;
        ctx.log.warn('sweep: chunk left for the next sweep', { namespace, error: error.message });
      }
      cursor.skip += chunk.length;
      if (overBudget()) break;
    }
    if (cursor.skip >= page.items.length) advance(ctx, cursor, namespace, page.continueToken);
  } while (cursor.rounds === startRound && !overBudget());
  const changed = outcomes.filter((o) => sweepReports(o.action));
  const done = cursor.rounds > startRound;
  return {
    action: 'swept',
    reason: `${pages} page(s), ${examined} objects examined, ${changed.filter((o) => o.action !== 'conflict').length} repaired${done ? '' : '; the next sweep goes on from here'}`,
    outcomes: changed,
    round: done ? 'round-completed' : 'continues',
  };
}

function listPage(ctx: ReconcileContext, namespace: string, pass: Pass, token: string | undefined): Promise<Page<Service> | Page<Pod>> {
  const limit = ctx.config.sweepPageSize;
  return pass === 'services'
    ? ctx.client.listServices(namespace, OUR_SERVICES_SELECTOR, limit, token)
    : ctx.client.listPods(namespace, `${SPARK_ROLE_LABEL}=${SPARK_ROLE_EXECUTOR}`, limit, token);
}

function advance(ctx: ReconcileContext, cursor: SweepCursor, namespace: string, next: string | undefined): void {
  cursor.pageToken = next;
  cursor.skip = 0;
  if (next !== undefined) return;
  if (cursor.pass === 'services') {
    // A complete count: the cap's check starts from it, our own writes keep it current.
    ctx.facts.setServiceCount(namespace, cursor.counted, ctx.now().getTime());
    cursor.counted = 0;
    cursor.pass = 'executors';
    return;
  }
  cursor.pass = 'services';
  cursor.namespaceIndex = (cursor.namespaceIndex + 1) % ctx.config.namespaces.length;
  if (cursor.namespaceIndex === 0) cursor.rounds++;
}

/** Executor pods of a page: their slots are decided with their Services read first (so that existing ones are not created again). */
export async function reconcileExecutorPage(ctx: ReconcileContext, namespace: string, pods: readonly Pod[]): Promise<ServiceOutcome[]> {
  const facts: PodFact[] = [];
  const slots: SlotKey[] = [];
  for (const pod of pods) {
    const fact = podFact(pod, ctx.config.defaultBlockManagerPort);
    if (fact === undefined) continue;
    facts.push(fact);
    // Only a running pod claims its slot (shared/rules/decide.ts); Services of the others are the services pass's.
    if (fact.appId !== undefined && fact.execId !== undefined && fact.running) slots.push({ appId: fact.appId, execId: fact.execId });
  }
  if (slots.length === 0) return [];
  // A continued page comes from the list snapshot of the sweep's first page, possibly minutes old:
  // its pods are hints (what to look at), and each slot's pods are listed afresh.
  return reconcileSlots(ctx, { namespace, slots, hintPods: facts, look: { ...LOOK_AFRESH, readServicesFirst: true } });
}
