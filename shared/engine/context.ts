import type { Config } from '../ops/config.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Logger } from '../ops/log.ts';
import type { FactCache } from './memory.ts';
import type { SweepCursor } from '../triggers/sweep.ts';

/** What one event's reconciliation may use: the API (already wrapped with retries), config, a clock, the process's facts. */
export interface ReconcileContext {
  readonly client: KubeClient;
  readonly config: Config;
  readonly now: () => Date;
  readonly log: Logger;
  /** Shared across events of one process: facts observed and our own writes (never decisions). */
  readonly facts: FactCache;
  /** Where the last sweep stopped; absent = every sweep starts from the beginning. */
  readonly sweepCursor?: SweepCursor | undefined;
}

/** What happened to one Service. */
export type ServiceAction =
  | 'created' // did not exist, created for a running executor
  | 'verified' // exists and is right, or nothing to do: nothing written
  | 'patched' // ours, same identity, had drifted (type/selector/ports/labels/annotations): fixed
  | 'marked-gone' // its executor is verified gone: cool-down started (annotation set)
  | 'unmarked' // marked gone, but its executor runs: mark removed
  | 'deleted' // removed: its driver finished, its cool-down is over, or a stray whose name is needed
  | 'collected' // its driver pod is gone: Kubernetes garbage collection removes it
  | 'conflict' // not ours, or another identity's whose driver runs: left alone
  | 'skipped' // no Service for a running executor, with the reason (no port, no driver, cap, ambiguous)
  | 'ignored'; // the application did not opt in: nothing to do

export interface ServiceOutcome {
  readonly namespace: string;
  readonly service: string;
  readonly action: ServiceAction;
  readonly detail?: string;
}

/** The result of one event; `action` is the headline used as the reply's type. */
export interface EventResult {
  readonly action: ServiceAction | 'ignored' | 'skipped' | 'swept';
  readonly reason?: string;
  readonly namespace?: string;
  readonly pod?: string;
  readonly app?: string;
  readonly outcomes: readonly ServiceOutcome[];
}

export function ignored(reason: string, extra: Partial<EventResult> = {}): EventResult {
  return { action: 'ignored', reason, outcomes: [], ...extra };
}

/** The headline: the most consequential thing that happened. */
const PRIORITY: readonly ServiceAction[] = ['conflict', 'deleted', 'created', 'patched', 'unmarked', 'marked-gone', 'collected', 'skipped', 'verified', 'ignored'];

export function headline(outcomes: readonly ServiceOutcome[]): ServiceAction | undefined {
  for (const action of PRIORITY) if (outcomes.some((o) => o.action === action)) return action;
  return undefined;
}
