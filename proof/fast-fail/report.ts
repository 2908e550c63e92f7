/** Statistics, the 120 s projection and the printed table for the fast-fail demo. */
import type { Attempt, CaseId } from './types.ts';

/** Spark's connection timeout by default: spark.network.timeout = 120 s. */
export const SPARK_CONNECT_TIMEOUT_MS = 120_000;

export const CASE_INFO: Record<CaseId, { title: string; standsFor: string; timeoutBound: boolean }> = {
  drop: {
    title: '(a) lost executor (drop)',
    standsFor: "a deleted executor pod's IP: SYNs are silently dropped, nothing answers",
    timeoutBound: true,
  },
  reject: {
    title: '(b) Service, no endpoints',
    standsFor: "the executor's ClusterIP Service after the pod is gone: kube-proxy (iptables mode) REJECTs with icmp-port-unreachable",
    timeoutBound: false,
  },
  closed: {
    title: '(c) closed port (RST)',
    standsFor: 'reference: a host that is up but has nothing listening answers the SYN with RST',
    timeoutBound: false,
  },
  live: {
    title: '(d) live peer',
    standsFor: 'reference: a healthy peer, the connect succeeds',
    timeoutBound: false,
  },
};

export interface CaseSummary {
  id: CaseId;
  title: string;
  standsFor: string;
  peers: number;
  timeoutMs: number;
  perPeerMs: number[];
  p50Ms: number | null;
  maxMs: number | null;
  totalMs: number | null;
  /** true when every attempt ended by the client's timer, i.e. the time is set by T. */
  timeoutBound: boolean;
  /** drop: totalMs x 120000 / T; the others do not wait on T, so projected = measured. */
  projectedTotalMs: number | null;
  codes: Record<string, number>;
  attempts: Attempt[];
  /** set when the case could not be run in this mode. */
  skipped?: string;
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] as number;
  return sorted.length % 2 === 1 ? hi : ((sorted[mid - 1] as number) + hi) / 2;
}

/**
 * Scale a measured total to Spark's default connect timeout. Only a failure that waits for
 * the connect timeout scales with it (linearly: each peer costs exactly T); a failure the
 * network answers (RST / ICMP) costs the same whatever T is.
 */
export function projectTotal(totalMs: number, timeoutMs: number, timeoutBound: boolean): number {
  return timeoutBound ? (totalMs * SPARK_CONNECT_TIMEOUT_MS) / timeoutMs : totalMs;
}

export function summarize(id: CaseId, attempts: Attempt[], timeoutMs: number): CaseSummary {
  const info = CASE_INFO[id];
  const perPeerMs = attempts.map((a) => round3(a.ms));
  const totalMs = perPeerMs.reduce((s, v) => s + v, 0);
  const codes: Record<string, number> = {};
  for (const a of attempts) codes[a.code] = (codes[a.code] ?? 0) + 1;
  const timeoutBound = attempts.length > 0 && attempts.every((a) => a.outcome === 'timeout');
  return {
    id,
    title: info.title,
    standsFor: info.standsFor,
    peers: attempts.length,
    timeoutMs,
    perPeerMs,
    p50Ms: median(perPeerMs),
    maxMs: perPeerMs.length === 0 ? null : Math.max(...perPeerMs),
    totalMs: round3(totalMs),
    timeoutBound,
    projectedTotalMs: round3(projectTotal(totalMs, timeoutMs, timeoutBound)),
    codes,
    attempts,
  };
}

export function skippedCase(id: CaseId, peers: number, timeoutMs: number, reason: string): CaseSummary {
  const info = CASE_INFO[id];
  return {
    id,
    title: info.title,
    standsFor: info.standsFor,
    peers,
    timeoutMs,
    perPeerMs: [],
    p50Ms: null,
    maxMs: null,
    totalMs: null,
    timeoutBound: false,
    projectedTotalMs: null,
    codes: {},
    attempts: [],
    skipped: reason,
  };
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}

export function formatMs(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(2)} s`;
  return `${(ms / 1000).toFixed(0)} s (${(ms / 60_000).toFixed(1)} min)`;
}

export function describeCodes(s: CaseSummary): string {
  if (s.skipped !== undefined) return 'skipped';
  return Object.entries(s.codes)
    .map(([code, n]) => {
      const name = code === 'CONNECT_TIMEOUT' ? 'timeout (ETIMEDOUT-like: client timer fired, no reply)' : code;
      return n === s.peers ? name : `${name} x${n}`;
    })
    .join(', ');
}
