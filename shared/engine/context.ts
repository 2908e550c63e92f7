import type { KubeClient } from '../kube/client.ts';
import type { Config } from '../ops/config.ts';
import type { Logger } from '../ops/log.ts';
import type { FactCache } from './memory.ts';

/** What one event's reconciliation may use: the API (already wrapped with retries), config, a clock, the process's facts. */
export interface ReconcileContext {
  readonly client: KubeClient;
  readonly config: Config;
  readonly now: () => Date;
  readonly log: Logger;
  /** Shared across events of one process: facts observed and our own writes (never decisions). */
  readonly facts: FactCache;
}
