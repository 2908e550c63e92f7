/**
 * Types shared by the orchestrator (run.ts) and the measuring client (client.ts).
 * The client is spawned as its own process (inside the demo's network namespace), so
 * the plan and the results travel as JSON on argv / stdout.
 */

/** drop = lost executor pod IP; reject = Service without endpoints; closed = RST; live = healthy peer. */
export type CaseId = 'drop' | 'reject' | 'closed' | 'live';

export type Outcome = 'connected' | 'refused' | 'timeout' | 'error';

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
}

/** Marker the client prints before its JSON result line. */
export const RESULT_PREFIX = 'FAST-FAIL-RESULT ';
