/**
 * The I/O around the rule book, for a batch of slots in one namespace: gather facts (what the
 * caller already read, what the process remembers where the plan trusts it), let `decide`
 * choose, read what it asks for, apply what it decided with preconditions, and decide again
 * for the slots whose Service changed under us. Events, Reference-mode deletes, driver ends and
 * the sweep all come through here.
 */
import { executorServiceName } from '../model/naming.ts';
import type { ServiceFact } from '../model/service-spec.ts';
import { type Need, type SlotKey, decide } from '../rules/decide.ts';
import type { ServiceOutcome } from '../rules/outcome.ts';
import { apply } from './apply.ts';
import type { ReconcileContext } from './context.ts';
import { CONCURRENCY, FactView } from './observe.ts';
import { inParallel, uniqueSlots } from './batching.ts';
import type { ReconcileRequest } from './request.ts';
import { appCountKey } from './service-count.ts';
import type { SlotHolder } from './slot-locks.ts';

export type { ReconcileRequest } from './request.ts';

/** Rounds of decide → read → decide per batch (a cold add takes four: its pods, its driver, the count, the create); a slot still undecided after them is a retryable failure (503). */
const MAX_ROUNDS = 10;

export class FactsKeptChangingError extends Error {
  override readonly name = 'FactsKeptChangingError';
}

export async function reconcileSlots(ctx: ReconcileContext, request: ReconcileRequest): Promise<ServiceOutcome[]> {
  if (request.look?.coordinate !== true) return reconcileHeld(ctx, request, undefined);
  const holder = ctx.facts.slotsUnderWay.holder(request.namespace);
  try {
    await holder.waitForOthers(request.slots);
    holder.hold(request.slots);
    return await reconcileHeld(ctx, request, holder);
  } finally {
    holder.release();
  }
}

/** Decides the slots of Services already read (fresh); what else the rules need is read. */
export async function reconcileServices(
  ctx: ReconcileContext,
  namespace: string,
  services: readonly ServiceFact[],
): Promise<ServiceOutcome[]> {
  const slots = services.flatMap((service) => (service.slot === undefined ? [] : [{ slot: service.slot, service }]));
  if (slots.length === 0) return [];
  return reconcileSlots(ctx, { namespace, slots: slots.map((s) => s.slot), read: { services: slots } });
}

async function reconcileHeld(ctx: ReconcileContext, request: ReconcileRequest, holder: SlotHolder | undefined): Promise<ServiceOutcome[]> {
  const view = new FactView(ctx, request);
  const outcomes: ServiceOutcome[] = [];
  let pending: SlotKey[] = uniqueSlots(request.slots);
  const look = request.look;
  if (look?.readServicesFirst === true) {
    await view.read(
      pending.map((slot): Need => ({ kind: 'service', slot })),
      [],
    );
    // A marked Service whose recorded executor the caller's list showed running (a sweep page):
    // read that executor, or the cool-down's "the mark stands, unread" would keep a wrong mark.
    await view.read(
      view.markedButHintedRunning().map((name): Need => ({ kind: 'pod', name })),
      [],
    );
  }
  for (let round = 0; round < MAX_ROUNDS && pending.length > 0; round++) {
    const decision = decide(view.facts(pending), ctx.config, ctx.now().getTime());
    const redo: SlotKey[] = [];
    const again: SlotKey[] = [];
    // Reserved before anything is awaited, so that a concurrent decision counts them (in the
    // namespace's and in each application's count); each create drops its own reservation as it
    // settles (into the count if it succeeded), those never sent at the end.
    const unsent = new Map<string, number>();
    for (const action of decision.actions) {
      if (action.kind !== 'create') continue;
      const key = appCountKey(request.namespace, action.slot.appId);
      unsent.set(key, (unsent.get(key) ?? 0) + 1);
      unsent.set(request.namespace, (unsent.get(request.namespace) ?? 0) + 1);
    }
    for (const [key, n] of unsent) ctx.facts.counts.reserve(key, n);
    try {
      await inParallel(decision.actions, CONCURRENCY, async (action) => {
        if (action.kind === 'create') {
          const key = appCountKey(request.namespace, action.slot.appId);
          unsent.set(key, unsent.get(key)! - 1);
          unsent.set(request.namespace, unsent.get(request.namespace)! - 1);
        }
        const outcome = await apply(ctx, view, action);
        if (outcome === 'redo') redo.push(action.slot);
        else if ('decideAgain' in outcome) {
          outcomes.push(outcome.outcome);
          again.push(action.slot);
        } else outcomes.push(outcome);
      });
    } finally {
      for (const [key, n] of unsent) ctx.facts.counts.reserve(key, -n);
    }
    pending = uniqueSlots([...decision.waiting, ...redo, ...again]);
    if (pending.length === 0) break;
    await view.read([...decision.needs, ...redo.map((slot): Need => ({ kind: 'service', slot }))], redo);
    // The window's slots that the list found claimed are decided with the rest, once — except
    // those another event of this process is deciding (concurrent deliveries: Broker, sweep).
    const claimed = view.takeClaimedWindowSlots();
    pending = uniqueSlots([...pending, ...(holder === undefined ? claimed : holder.holdFree(claimed))]);
    if (look?.readClaimedServices === true) {
      // Executors that ran before this update: a Service of theirs the process does not know is
      // read before deciding, not created blind (a create that fails with 409, then a read).
      await view.read(
        view.claimedUnknownServices(pending).map((slot): Need => ({ kind: 'service', slot })),
        [],
      );
    }
  }
  if (pending.length > 0) {
    throw new FactsKeptChangingError(
      `${pending.length} executor slot(s) in ${request.namespace} could not be decided: their Services or pods kept changing (${pending
        .slice(0, 3)
        .map((s) => executorServiceName(s.appId, s.execId))
        .join(', ')})`,
    );
  }
  return outcomes;
}
