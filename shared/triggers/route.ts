/**
 * Events are hints (controller-runtime's Reconcile: "the Request won't contain that a Pod was
 * deleted"): each names what to look at — one executor slot, or one application — and the
 * decision is taken from what the API server says. This routes one parsed event to its trigger.
 */
import type { ReconcileContext } from '../engine/context.ts';
import type { FunctionEvent } from '../model/events.ts';
import { type EventResult, ignored } from '../rules/outcome.ts';
import { reconcilePodEvent, reconcileReference } from './pod-event.ts';
import type { SweepCursor } from './sweep-cursor.ts';
import { sweep } from './sweep.ts';

/** Routes one parsed event to the reconciliation it needs; a sweep goes on from `sweepCursor`. */
export async function reconcileEvent(ctx: ReconcileContext, event: FunctionEvent, sweepCursor?: SweepCursor): Promise<EventResult> {
  switch (event.kind) {
    case 'ignored':
      return ignored(event.reason);
    case 'sweep':
      return sweep(ctx, sweepCursor);
    case 'pod':
      return reconcilePodEvent(ctx, event.verb, event.pod, undefined);
    case 'pod-ref':
      return reconcileReference(ctx, event.verb, event.namespace, event.name);
  }
}
