import type { Config } from '../config.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Logger } from '../log.ts';
import type { LiveDriverCache } from './driver-lookup.ts';
import type { EnsuredCache } from './ensured-cache.ts';
import type { ExpiryThrottle } from './expiry.ts';

/** What one event's reconciliation may use: the API (already wrapped with retries), config, a clock. */
export interface ReconcileContext {
  readonly client: KubeClient;
  readonly config: Config;
  readonly now: () => Date;
  readonly log: Logger;
  /** Shared across events of one process; absent = no opportunistic expiry scans on add/update. */
  readonly expiryThrottle?: ExpiryThrottle | undefined;
  /** Shared across events of one process; absent = every update is checked against the API. */
  readonly ensuredCache?: EnsuredCache | undefined;
  /** Shared across events of one process; absent = every executor add reads its driver. */
  readonly liveDrivers?: LiveDriverCache | undefined;
}

/** What happened to one Service. */
export type ServiceAction =
  | 'created' // did not exist, created for a live executor
  | 'verified' // exists and is right: nothing written
  | 'patched' // ours, had drifted (selector/port/owner/labels), fixed
  | 'recreated' // executor went and its Service was missing while the driver lives: created again
  | 'marked-gone' // executor went: cool-down started (annotation set)
  | 'deleted' // removed: driver gone, cool-down over, or a stray
  | 'collected' // owned by the deleted driver: Kubernetes garbage collection removes it
  | 'conflict'; // a Service with that name exists and is not ours: left alone

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

export function skipped(reason: string, extra: Partial<EventResult> = {}): EventResult {
  return { action: 'skipped', reason, outcomes: [], ...extra };
}

/** The headline: the most consequential thing that happened. */
const PRIORITY: readonly ServiceAction[] = ['conflict', 'deleted', 'recreated', 'created', 'patched', 'marked-gone', 'collected', 'verified'];

export function headline(outcomes: readonly ServiceOutcome[]): ServiceAction | undefined {
  for (const action of PRIORITY) if (outcomes.some((o) => o.action === action)) return action;
  return undefined;
}
