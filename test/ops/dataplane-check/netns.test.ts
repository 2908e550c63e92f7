/**
 * dataplane-check.sh in a network namespace the test builds (unique per run), where iptables rules
 * make a Service refuse or drop connections as each dataplane does (docs/dataplanes.md).
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CURL, IP, IPTABLES, IS_ROOT, SHELLS, runScript, fakeCluster, verbOf } from './support.ts';
// ===========================================================================
// 3. Classification in a network namespace: iptables REJECT vs DROP.
const T = 0.4; // connect timeout, seconds
const N = 3; // attempts
const NS_PREFIX = 'sxs-dpc-';

function netnsPrerequisites(): { ok: boolean; reason: string } {
  if (!IS_ROOT) return { ok: false, reason: 'not root' };
  if (IP === undefined) return { ok: false, reason: 'no ip (iproute2)' };
  if (IPTABLES === undefined) return { ok: false, reason: 'no iptables' };
  if (CURL === undefined) return { ok: false, reason: 'no curl' };
  const probe = `${NS_PREFIX}probe-${process.pid}`;
  const add = spawnSync(IP, ['netns', 'add', probe], { encoding: 'utf8' });
  if (add.status !== 0) return { ok: false, reason: `ip netns add failed: ${add.stderr.trim()}` };
  spawnSync(IP, ['netns', 'del', probe]);
  return { ok: true, reason: '' };
}
const pre = netnsPrerequisites();
const skipNote = pre.ok ? '' : ` (SKIPPED: ${pre.reason}; needs root + iproute2 + iptables + curl)`;
if (!pre.ok) console.warn(`[dataplane-check.test] netns tests skipped: ${pre.reason}`);

/** Addresses in the namespace and what iptables does to TCP connects to them (port 7079). */
const RULES = {
  '127.0.2.1': ['REJECT', '--reject-with', 'icmp-port-unreachable'], // kube-proxy iptables, Calico eBPF, Cilium >= 1.15
  '127.0.2.2': ['REJECT', '--reject-with', 'tcp-reset'],
  '127.0.2.3': ['REJECT', '--reject-with', 'icmp-host-unreachable'], // EHOSTUNREACH, as Cilium's socket LB returns
  '127.0.1.1': ['DROP'], // older Cilium, internalTrafficPolicy: Local, ICMP blocked by policy
} as const;
const MEASURED: { shell: string; kase: string; verdict: string; ms: number[] }[] = [];

describe.skipIf(!pre.ok)(`dataplane-check.sh in a network namespace${skipNote}`, () => {
  const ns = `${NS_PREFIX}${process.pid}`;
  const ipt = (...args: string[]) => {
    const r = spawnSync(IP!, ['netns', 'exec', ns, IPTABLES!, '-w', '5', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`iptables ${args.join(' ')}: ${r.stderr}`);
  };
  beforeAll(() => {
    // Namespaces left behind by a run that was killed: remove those whose pid is gone.
    for (const line of spawnSync(IP!, ['netns', 'list'], { encoding: 'utf8' }).stdout.split('\n')) {
      const m = new RegExp(`^(${NS_PREFIX}(\\d+))\\b`).exec(line.trim());
      if (m === null) continue;
      let alive = true;
      try {
        process.kill(Number(m[2]), 0);
      } catch (e) {
        alive = (e as NodeJS.ErrnoException).code === 'EPERM';
      }
      if (!alive) spawnSync(IP!, ['netns', 'del', m[1]!]);
    }
    spawnSync(IP!, ['netns', 'del', ns]);
    const add = spawnSync(IP!, ['netns', 'add', ns], { encoding: 'utf8' });
    if (add.status !== 0) throw new Error(add.stderr);
    spawnSync(IP!, ['-n', ns, 'link', 'set', 'lo', 'up']);
    ipt('-N', 'SXS-DPC');
    for (const [addr, target] of Object.entries(RULES))
      ipt('-A', 'SXS-DPC', '-d', `${addr}/32`, '-p', 'tcp', '--dport', '7079', '-j', ...target);
    // Mixed: every other connect dropped, the rest rejected.
    ipt(
      '-A',
      'SXS-DPC',
      '-d',
      '127.0.3.1/32',
      '-p',
      'tcp',
      '--dport',
      '7079',
      '-m',
      'statistic',
      '--mode',
      'nth',
      '--every',
      '2',
      '--packet',
      '0',
      '-j',
      'DROP',
    );
    ipt('-A', 'SXS-DPC', '-d', '127.0.3.1/32', '-p', 'tcp', '--dport', '7079', '-j', 'REJECT');
    // The ClusterIPs of the whole-check runs: one chain each, so a fake delete can rewrite it.
    for (const [chain, addr, target] of [
      ['SXS-CIP-A', '127.0.2.10', 'REJECT'],
      ['SXS-CIP-B', '127.0.1.10', 'DROP'],
      ['SXS-CIP-C', '127.0.2.11', 'REJECT'],
    ] as const) {
      ipt('-N', chain);
      ipt('-A', chain, '-d', `${addr}/32`, '-p', 'tcp', '--dport', '7079', '-j', target);
      ipt('-A', 'SXS-DPC', '-j', chain);
    }
    ipt('-A', 'OUTPUT', '-j', 'SXS-DPC');
  });
  afterAll(() => {
    spawnSync(IP!, ['netns', 'del', ns]);
    if (MEASURED.length > 0) {
      console.log(
        '[dataplane-check.test] measured connect times (ms), netns, T=%s s:\n%s',
        T,
        MEASURED.map(
          (m) => `  ${m.shell.padEnd(10)} ${m.kase.padEnd(38)} ${m.verdict.padEnd(13)} ${m.ms.map((x) => x.toFixed(1)).join(', ')}`,
        ).join('\n'),
      );
    }
  });
  const env = { ATTEMPTS: String(N), CONNECT_TIMEOUT_SECONDS: String(T) };

  describe.each(SHELLS)('under $name', ({ name: shellName, argv: shell }) => {
    it.each([
      ['127.0.2.1', 'REJECT icmp-port-unreachable (kube-proxy)', 'Connection refused'],
      ['127.0.2.2', 'REJECT tcp-reset', 'Connection refused'],
      ['127.0.2.3', 'REJECT icmp-host-unreachable', 'No route to host'],
    ])('%s, %s: verdict reject, every connect refused within milliseconds, exit 0', async (addr, kase, reason) => {
      const r = await runScript({ shell, netns: ns, args: ['probe', addr, '7079'], env });
      MEASURED.push({ shell: shellName, kase, verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.verdict).toMatchObject({ verdict: 'reject', attempts: N, refused: N, timeout: 0, other: 0, target: `${addr}:7079` });
      expect(r.attempts).toHaveLength(N);
      for (const a of r.attempts) {
        expect(a.outcome).toBe('refused');
        expect(a.reason).toBe(reason);
        expect(a.ms).toBeLessThan(100);
      }
      expect(r.stdout).toContain('REJECT: fast fail works');
    });

    it('127.0.1.1, DROP: verdict drop, every connect waits the whole timeout, exit 2 with what to change', async () => {
      const r = await runScript({ shell, netns: ns, args: ['probe', '127.0.1.1', '7079'], env });
      MEASURED.push({ shell: shellName, kase: 'DROP', verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
      expect(r.code).toBe(2);
      expect(r.verdict).toMatchObject({ verdict: 'drop', attempts: N, refused: 0, timeout: N, other: 0 });
      for (const a of r.attempts) {
        expect(a.outcome).toBe('timeout');
        expect(a.ms).toBeGreaterThanOrEqual(T * 1000 * 0.95);
        expect(a.ms).toBeLessThan(T * 1000 + 500);
      }
      expect(r.elapsedMs).toBeGreaterThanOrEqual(N * T * 1000 * 0.95);
      for (const hint of ['service-no-backend-response=reject', 'internalTrafficPolicy: Local', 'ICMP', 'PROGRAM_DELAY_SECONDS'])
        expect(r.stdout).toContain(hint);
    });

    it('127.0.3.1, every other connect dropped: verdict inconclusive, exit 3', async () => {
      const r = await runScript({ shell, netns: ns, args: ['probe', '127.0.3.1', '7079'], env: { ...env, ATTEMPTS: '4' } });
      MEASURED.push({
        shell: shellName,
        kase: 'mixed (nth DROP, else REJECT)',
        verdict: r.verdict?.verdict ?? '?',
        ms: r.attempts.map((a) => a.ms),
      });
      expect(r.code).toBe(3);
      expect(r.verdict).toMatchObject({ verdict: 'inconclusive', attempts: 4, refused: 2, timeout: 2 });
      expect(r.stdout).toContain('INCONCLUSIVE');
    });

    it('whole check: Service refused at once; deleted, its old ClusterIP is dropped (nftables/Cilium) -> cool-down advice', async () => {
      const k = fakeCluster({
        ...env,
        PROGRAM_DELAY_SECONDS: '0',
        PORT: '7079',
        FAKE_CLUSTER_IP: '127.0.2.10',
        // What kube-proxy nftables does once the Service is gone: "Drop traffic to unallocated ClusterIPs".
        FAKE_ON_DELETE: `${IPTABLES} -w 5 -R SXS-CIP-A 1 -d 127.0.2.10/32 -p tcp --dport 7079 -j DROP`,
      });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        MEASURED.push({
          shell: shellName,
          kase: 'whole check: Service (REJECT)',
          verdict: r.verdict?.verdict ?? '?',
          ms: r.attempts.map((a) => a.ms),
        });
        MEASURED.push({
          shell: shellName,
          kase: 'whole check: deleted Service (DROP)',
          verdict: r.deletedVerdict?.verdict ?? '?',
          ms: r.deletedAttempts.map((a) => a.ms),
        });
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.verdict).toMatchObject({ verdict: 'reject', refused: N, target: '127.0.2.10:7079' });
        for (const a of r.attempts) expect(a.ms).toBeLessThan(100);
        expect(r.deletedVerdict).toMatchObject({ verdict: 'drop', timeout: N, target: '127.0.2.10:7079' });
        for (const a of r.deletedAttempts) expect(a.ms).toBeGreaterThanOrEqual(T * 1000 * 0.95);
        expect(r.stdout).toContain('Keep COOLDOWN_SECONDS above');
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
      } finally {
        ipt('-R', 'SXS-CIP-A', '1', '-d', '127.0.2.10/32', '-p', 'tcp', '--dport', '7079', '-j', 'REJECT');
        k.dispose();
      }
    });

    it('whole check: a dataplane that drops: exit 2, and the Service is still deleted', async () => {
      const k = fakeCluster({ ...env, PROGRAM_DELAY_SECONDS: '0', PORT: '7079', FAKE_CLUSTER_IP: '127.0.1.10', CHECK_DELETED: 'false' });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        MEASURED.push({
          shell: shellName,
          kase: 'whole check: Service (DROP)',
          verdict: r.verdict?.verdict ?? '?',
          ms: r.attempts.map((a) => a.ms),
        });
        expect(r.code).toBe(2);
        expect(r.verdict).toMatchObject({ verdict: 'drop', timeout: N });
        expect(r.stdout).toContain('DROP: fast fail does NOT work here');
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
      } finally {
        k.dispose();
      }
    });

    it("whole check: a dataplane that also rejects a deleted Service's ClusterIP", async () => {
      const k = fakeCluster({ ...env, PROGRAM_DELAY_SECONDS: '0', PORT: '7079', FAKE_CLUSTER_IP: '127.0.2.11' });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        expect(r.code).toBe(0);
        expect(r.verdict?.verdict).toBe('reject');
        expect(r.deletedVerdict?.verdict).toBe('reject');
        expect(r.stdout).toContain('deleting early does not bring the');
      } finally {
        k.dispose();
      }
    });
  });
});
