/**
 * The fast-fail demo (bench/fast-fail) in small: K=2 lost peers, T=300 ms connect timeout.
 *
 * netns test: needs root plus `ip` (iproute2) and `iptables` (Debian: apt-get install -y
 * iproute2 iptables); it is skipped, with the reason in its name, when those are missing.
 * The loopback-fallback test and the projection tests need nothing special.
 */
import { describe, expect, it } from 'vitest';
import { median, projectTotal, SPARK_CONNECT_TIMEOUT_MS } from '../bench/fast-fail/report.ts';
import { netnsPrerequisites, runFastFail } from '../bench/fast-fail/run.ts';
import type { FastFailReport } from '../bench/fast-fail/run.ts';
import { findBinary, run } from '../bench/fast-fail/sys.ts';

const K = 2;
const T = 300;

function caseOf(report: FastFailReport, id: string) {
  const c = report.cases.find((x) => x.id === id);
  if (c === undefined) throw new Error(`case ${id} missing`);
  return c;
}

describe('fast-fail projection', () => {
  it('scales only timeout-bound totals to the 120 s Spark timeout', () => {
    expect(projectTotal(600, 300, true)).toBe(600 * (SPARK_CONNECT_TIMEOUT_MS / 300));
    expect(projectTotal(0.8, 300, false)).toBe(0.8);
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNull();
  });
});

const pre = netnsPrerequisites();
const skipReason = pre.ok ? '' : ` (SKIPPED: ${pre.reason}; needs root + iproute2 + iptables)`;
if (!pre.ok) console.warn(`fast-fail netns test skipped: ${pre.reason}`);

describe('fast-fail demo, netns mode', () => {
  it.skipIf(!pre.ok)(`drop waits for T, Service reject fails at once${skipReason}`, { timeout: 10_000 }, async () => {
    const report = await runFastFail({ peers: K, timeoutMs: T, mode: 'netns', outFile: null, log: () => {} });
    expect(report.mode).toBe('netns');

    const drop = caseOf(report, 'drop');
    expect(drop.peers).toBe(K);
    for (const ms of drop.perPeerMs) expect(ms).toBeGreaterThanOrEqual(T * 0.9);
    expect(drop.codes).toEqual({ CONNECT_TIMEOUT: K });
    expect(drop.timeoutBound).toBe(true);
    expect(drop.projectedTotalMs).toBeCloseTo(((drop.totalMs ?? 0) * SPARK_CONNECT_TIMEOUT_MS) / T, 0);

    const reject = caseOf(report, 'reject');
    expect(reject.peers).toBe(K);
    for (const ms of reject.perPeerMs) expect(ms).toBeLessThan(100);
    expect(reject.codes).toEqual({ ECONNREFUSED: K });
    expect(reject.projectedTotalMs).toBe(reject.totalMs);

    const closed = caseOf(report, 'closed');
    expect(closed.codes).toEqual({ ECONNREFUSED: K });
    expect(caseOf(report, 'live').codes).toEqual({ OK: K });

    // The firewall rules did the work: SYNs hit the DROP chain, the REJECT chain answered.
    expect(report.kernelCounters?.dropPackets ?? 0).toBeGreaterThanOrEqual(K);
    expect(report.kernelCounters?.rejectPackets ?? 0).toBeGreaterThanOrEqual(K);

    // And the namespace is gone.
    const ip = findBinary('ip');
    if (ip !== null && report.namespace !== null) {
      expect(run(ip, ['netns', 'list']).stdout).not.toContain(report.namespace);
    }
  });
});

describe('fast-fail demo, loopback fallback', () => {
  it('drop (full accept queue) waits for T, closed port fails at once, reject is skipped', { timeout: 10_000 }, async () => {
    const report = await runFastFail({ peers: K, timeoutMs: T, mode: 'loopback', outFile: null, log: () => {} });
    expect(report.mode).toBe('loopback');
    const drop = caseOf(report, 'drop');
    expect(drop.codes).toEqual({ CONNECT_TIMEOUT: K });
    for (const ms of drop.perPeerMs) expect(ms).toBeGreaterThanOrEqual(T * 0.9);
    const closed = caseOf(report, 'closed');
    expect(closed.codes).toEqual({ ECONNREFUSED: K });
    for (const ms of closed.perPeerMs) expect(ms).toBeLessThan(100);
    expect(caseOf(report, 'reject').skipped).toBeDefined();
  });
});
