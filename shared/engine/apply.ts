/**
 * Carries one decided action out as one API call, with the preconditions the decision was taken
 * on (the resourceVersion it saw, the UID it names), and records our own write in the process's
 * memory (kubernetes' endpointslice reconciler: finalize is the only writer, and the tracker
 * records what it wrote).
 */
import { serviceFact } from '../model/service-spec.ts';
import type { Action } from '../rules/decide.ts';
import type { ServiceOutcome } from '../rules/outcome.ts';
import type { ReconcileContext } from './context.ts';
import type { FactView } from './observe.ts';
import { appCountKey } from './service-count.ts';

/** 'redo' = the Service was not what the decision saw: read it and decide again; `decideAgain` = done, and the slot is to be decided once more (its name is free now). */
export type Applied = ServiceOutcome | 'redo' | { readonly outcome: ServiceOutcome; readonly decideAgain: true };

export async function apply(ctx: ReconcileContext, view: FactView, action: Action): Promise<Applied> {
  const namespace = view.namespace;
  const counts = ctx.facts.counts;
  const done = (service: string, outcome: ServiceOutcome['action'], detail: string): ServiceOutcome => ({
    namespace,
    service,
    action: outcome,
    detail,
  });
  switch (action.kind) {
    case 'report':
      return done(action.service, action.outcome, action.why);
    case 'create': {
      let created;
      try {
        created = await ctx.client.createService(action.body);
      } finally {
        // Its reservation ends here; a success enters the counts below, in the same step.
        counts.reserve(namespace, -1);
        counts.reserve(appCountKey(namespace, action.slot.appId), -1);
      }
      if (created.outcome === 'exists') {
        view.forgetService(action.slot);
        return 'redo';
      }
      const fact = serviceFact(created.service);
      if (fact !== undefined) view.rememberService(action.slot, fact);
      counts.adjust(namespace, +1);
      counts.adjust(appCountKey(namespace, action.slot.appId), +1);
      return done(action.body.metadata.name, 'created', action.why);
    }
    case 'patch': {
      const { service } = action;
      const metadata = {
        ...(action.patch['metadata'] as Record<string, unknown> | undefined),
        resourceVersion: service.resourceVersion,
        uid: service.uid,
      };
      const patched = await ctx.client.patchService(namespace, service.name, { ...action.patch, metadata });
      if (patched === 'not-found' || patched === 'conflict') {
        view.forgetService(action.slot);
        return 'redo';
      }
      const fact = serviceFact(patched);
      if (fact !== undefined) view.rememberService(action.slot, fact);
      return done(service.name, action.outcome, action.why);
    }
    case 'delete': {
      const { service } = action;
      const result = await ctx.client.deleteService(namespace, service.name, service.uid, service.resourceVersion);
      view.forgetService(action.slot);
      if (result === 'precondition-failed') return 'redo';
      if (result === 'deleted') {
        counts.adjust(namespace, -1);
        counts.adjust(appCountKey(namespace, action.slot.appId), -1);
        view.noteServiceDeleted(action.slot);
      }
      const outcome = done(service.name, 'deleted', result === 'deleted' ? action.why : `${action.why}; already gone`);
      if (action.thenDecideAgain === true) {
        view.noteServiceAbsent(action.slot);
        return { outcome, decideAgain: true };
      }
      return outcome;
    }
  }
}
