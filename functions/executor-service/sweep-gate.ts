/**
 * Sweeps coalesced (issue 17, class 9): each sweep costs ~22 API requests and ~1.5 MiB of lists
 * per namespace page, and anyone who can reach the function can send a PingSource event. One
 * sweep runs at a time per process, and a new one starts only SWEEP_MIN_INTERVAL_MS after the
 * previous one started; a tick in between is answered 2xx at once (there is nothing to redeliver:
 * the running or recent sweep covers it, and the next tick goes on from its cursor) and counted
 * (spark_exec_svc_sweep_runs_total{result="already-running"|"too-soon"}).
 *
 * The sweep walks every watched namespace from one cursor (shared/reconcile/sweep.ts), so the
 * gate is per watch scope: with the default one-namespace install, per namespace. K instances
 * (Knative max-scale) each have their own gate: at most K sweep starts per interval.
 */
import type { Metrics } from '../../shared/ops/metrics.ts';

export type SweepAdmission =
  | { readonly admitted: true; readonly done: () => void }
  | { readonly admitted: false; readonly reason: 'already-running' | 'too-soon'; readonly message: string };

export class SweepGate {
  private running = false;
  private lastStart = Number.NEGATIVE_INFINITY;
  private readonly minIntervalMs: number;
  private readonly now: () => number;
  private readonly metrics: Metrics;

  constructor(minIntervalMs: number, metrics: Metrics, now: () => number = () => performance.now()) {
    this.minIntervalMs = minIntervalMs;
    this.metrics = metrics;
    this.now = now;
  }

  tryStart(): SweepAdmission {
    if (this.running) return this.refuse('already-running', 'coalesced: a sweep is already running in this process');
    const sinceMs = this.now() - this.lastStart;
    if (sinceMs < this.minIntervalMs) {
      return this.refuse(
        'too-soon',
        `coalesced: the last sweep started ${Math.round(sinceMs)} ms ago (SWEEP_MIN_INTERVAL_MS=${this.minIntervalMs})`,
      );
    }
    this.running = true;
    this.lastStart = this.now();
    let released = false;
    return {
      admitted: true,
      done: () => {
        if (released) return;
        released = true;
        this.running = false;
      },
    };
  }

  /** Counted as spark_exec_svc_sweep_runs_total{result=already-running|too-soon}, with no duration. */
  private refuse(reason: 'already-running' | 'too-soon', message: string): SweepAdmission {
    this.metrics.recordSweep(reason, 0, []);
    return { admitted: false, reason, message };
  }
}
