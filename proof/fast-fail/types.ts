/**
 * Types shared by the orchestrator (run.ts) and the measuring client (client.ts).
 * The client is spawned as its own process (inside the demo's network namespace), so
 * the plan and the results travel as JSON on argv / stdout.
 */

/** drop = lost executor pod IP; reject = Service without endpoints; closed = RST; live = healthy peer. */
export type CaseId = 'drop' | 'reject' | 'closed' | 'live';

export type Outcome = 'connected' | 'refused' | 'timeout' | 'error' | 'aborted';

export interface TargetPlan {
  host: string;
  port: number;
}

export interface CasePlan {
  id: CaseId;
  targets: TargetPlan[];
  /** live case: the client opens a listener on targets[0].host (port 0 = any) and connects to it. */
  serveLocal?: boolean;
}

export interface ClientPlan {
  /** The client's connect timeout: plays the role of Spark's connection timeout. */
  timeoutMs: number;
  cases: CasePlan[];
  /** Spark fetch-path scenarios (spark-fetch-model.ts), run after the cases. */
  spark?: SparkPlan;
}

/**
 * A reduce task that fetches from K lost peers, run for real with scaled-down settings: the first
 * connect to each peer in turn on the "task thread", each failed connect followed by an
 * IsExecutorAlive ask to a stand-in driver, retries after retryWait in the background, and the task
 * gives up at the first final failure once its first wave is sent.
 */
export interface SparkScenarioPlan {
  id: string;
  targets: TargetPlan[];
  connectTimeoutMs: number;
  retryWaitMs: number;
  maxRetries: number;
  /** Whether the driver already knows the lost executors are dead (answers the ask with false). */
  driverKnows: boolean;
}

export interface SparkPlan {
  /** Where the stand-in driver listens (port 0 = any). */
  driverHost: string;
  scenarios: SparkScenarioPlan[];
}

export interface SparkAttempt {
  /** Index of the target in the scenario's send order. */
  peer: number;
  /** 1 = first attempt (task thread), 2.. = retries (background). */
  attempt: number;
  /** Times relative to the task's start. */
  startMs: number;
  connectEndMs: number;
  endMs: number;
  outcome: Outcome;
  code: string;
  connectMs: number;
  /** IsExecutorAlive round trip; null when the connect did not fail (aborted at give-up). */
  rpcMs: number | null;
  driverSaysDead: boolean | null;
}

export interface SparkScenarioResult {
  id: string;
  /** When the task threw (FetchFailedException). */
  giveUpMs: number;
  /** When the task thread had sent its first wave. */
  waveEndMs: number;
  failingPeer: number;
  failingReason: 'executor-dead' | 'retries-exhausted';
  attempts: SparkAttempt[];
}

export interface Attempt {
  target: string;
  outcome: Outcome;
  /** errno-style code (ECONNREFUSED, ...) or CONNECT_TIMEOUT when the client's timer fired. */
  code: string;
  ms: number;
}

export interface CaseAttempts {
  id: CaseId;
  attempts: Attempt[];
}

export interface ClientResult {
  node: string;
  cases: CaseAttempts[];
  spark?: SparkScenarioResult[];
}

/** Marker the client prints before its JSON result line. */
export const RESULT_PREFIX = 'FAST-FAIL-RESULT ';

/**
 * Upper bound (ms) for running a Spark plan: every scenario's connects could all time out, one
 * after another, with every retry wait in between. Used for the client watchdog and the
 * orchestrator's kill timer.
 */
export function sparkPlanBoundMs(plan: SparkPlan | undefined): number {
  if (plan === undefined) return 0;
  let total = 0;
  for (const s of plan.scenarios) {
    const connects = s.targets.length * (s.maxRetries + 1);
    total += connects * (s.connectTimeoutMs + 1000) + s.maxRetries * s.retryWaitMs * s.targets.length + 2000;
  }
  return total;
}
