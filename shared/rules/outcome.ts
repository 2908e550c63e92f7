/**
 * The outcome vocabulary, in one table: what can happen to one Service, and for each outcome how
 * it ranks as an event's headline, whether it changed anything, whether a sweep that produced it
 * repaired something an event missed, how loudly it is logged and which reply type it answers
 * with. A new outcome is one row here (and its line in docs/metrics.md).
 */

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

/** What the rule book reports without writing (the other outcomes come from a write). */
export type ReportOutcome = Extract<ServiceAction, 'verified' | 'conflict' | 'collected' | 'skipped' | 'ignored'>;

/** An event's headline: a Service outcome, or `swept` for a sweep tick. */
export type EventAction = ServiceAction | 'swept';

export type LogLevel = 'debug' | 'info' | 'warn';

export interface OutcomeRow {
  /** Rank as an event's headline: the most consequential thing that happened (lower first). */
  readonly priority: number;
  /** Something was written (a sweep reports these; with `conflict`, which needs a person). */
  readonly changed: boolean;
  /** A sweep that wrote it repaired what no event did: an event was lost or a Service drifted. `deleted` is mostly cool-downs ending, as planned. */
  readonly lostEventRepair: boolean;
  /** The log level of an event whose headline it is: the no-ops of every pod's life are debug, what needs a person warn. */
  readonly log: LogLevel;
  /** The reply's CloudEvent type, after `spark-exec-svc.`. */
  readonly reply: string;
}

export const OUTCOMES: Readonly<Record<EventAction, OutcomeRow>> = {
  //             priority  changed  lostEventRepair  log      reply
  conflict: { priority: 0, changed: false, lostEventRepair: false, log: 'warn', reply: 'service.conflict' },
  deleted: { priority: 1, changed: true, lostEventRepair: false, log: 'info', reply: 'service.deleted' },
  created: { priority: 2, changed: true, lostEventRepair: true, log: 'info', reply: 'service.created' },
  patched: { priority: 3, changed: true, lostEventRepair: true, log: 'info', reply: 'service.patched' },
  unmarked: { priority: 4, changed: true, lostEventRepair: true, log: 'info', reply: 'service.unmarked' },
  'marked-gone': { priority: 5, changed: true, lostEventRepair: true, log: 'info', reply: 'service.marked-gone' },
  collected: { priority: 6, changed: false, lostEventRepair: false, log: 'info', reply: 'service.collected' },
  skipped: { priority: 7, changed: false, lostEventRepair: false, log: 'warn', reply: 'skipped' },
  verified: { priority: 8, changed: false, lostEventRepair: false, log: 'debug', reply: 'service.verified' },
  ignored: { priority: 9, changed: false, lostEventRepair: false, log: 'debug', reply: 'ignored' },
  swept: { priority: 10, changed: false, lostEventRepair: false, log: 'info', reply: 'swept' },
};

export const SERVICE_ACTIONS: readonly ServiceAction[] = (Object.keys(OUTCOMES) as EventAction[]).filter(
  (a): a is ServiceAction => a !== 'swept',
);

export interface ServiceOutcome {
  readonly namespace: string;
  readonly service: string;
  readonly action: ServiceAction;
  readonly detail?: string;
}

/** How a sweep tick ended, as the sweep itself knows it (the handler adds `failed`). */
export type SweepRound = 'round-completed' | 'continues' | 'already-running';

/** The result of one event; `action` is the headline used as the reply's type. */
export interface EventResult {
  readonly action: EventAction;
  readonly reason?: string;
  readonly namespace?: string;
  readonly pod?: string;
  readonly app?: string;
  readonly outcomes: readonly ServiceOutcome[];
  /** A sweep's: whether this tick finished a round over every watched namespace. */
  readonly round?: SweepRound;
}

export function ignored(reason: string, extra: Partial<EventResult> = {}): EventResult {
  return { action: 'ignored', reason, outcomes: [], ...extra };
}

/** The headline: the most consequential thing that happened. */
export function headline(outcomes: readonly ServiceOutcome[]): ServiceAction | undefined {
  let best: ServiceAction | undefined;
  for (const o of outcomes) if (best === undefined || OUTCOMES[o.action].priority < OUTCOMES[best].priority) best = o.action;
  return best;
}

/** What a sweep reports: what it wrote, and conflicts (which need a person); the rest is the normal state of things. */
export const sweepReports = (action: ServiceAction): boolean => OUTCOMES[action].changed || action === 'conflict';

/**
 * The event's answer. With `own` (the Service of the slot the event names), the headline and the
 * reason are that Service's: what the event's look at its peers found is in `outcomes` only.
 */
export function eventResult(
  outcomes: readonly ServiceOutcome[],
  base: { namespace: string; pod: string; app?: string | undefined },
  own?: string,
): EventResult {
  const mine = own === undefined ? [] : outcomes.filter((o) => o.service === own);
  const basis = mine.length > 0 ? mine : outcomes;
  const action = headline(basis) ?? 'verified';
  const reason =
    action === 'skipped' || action === 'conflict' || action === 'ignored'
      ? basis.find((o) => o.action === action)?.detail
      : outcomes.length === 0
        ? 'no Services'
        : undefined;
  return { action, ...base, reason, outcomes };
}
