/**
 * The executor wrapper's DNS wait is bounded by SPARK_EXEC_SVC_WAIT_SECONDS, also when the DNS
 * server never answers: the real `getent` and glibc resolver, in a network namespace this test
 * creates (loopback only), whose resolv.conf is a Kubernetes pod's in shape
 *     nameserver 127.0.0.1 / search a.svc b.svc c.svc / options ndots:5
 * (`ip netns exec` bind-mounts /etc/netns/<name>/resolv.conf over /etc/resolv.conf), and a UDP
 * "DNS server" on 127.0.0.1:53 inside it that reads every query and answers none. One unbounded
 * `getent hosts <svc>.<ns>.svc` there takes 40 s (4 names x 5 s x 2 attempts); the wrapper must
 * give up within its bound + 1 s, with `timeout` and with its watchdog (no `timeout` on PATH).
 * The same server answers "not found" (NXDOMAIN) to a name the test registers, for a while after
 * its first query, and then stays silent: the last look-up then starts with part of a second left
 * and is cut off; the wait must end within its bound + 0.2 s, also with busybox's own tools, whose
 * `timeout` counts whole seconds (busybox 1.35: `timeout -s KILL 0.50 sleep 4` returns after 1 s).
 *
 * Needs root and `ip` (iproute2); skipped, with the reason in the test name and on stderr, otherwise.
 * The namespace, the /etc/netns/<name> directory and the server are removed afterwards; leftovers
 * of a killed run (pid gone) are swept first.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBinary, isRoot, run } from '../../proof/fast-fail/sys.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import {
  APP,
  argAfter,
  executorEnv,
  type ExecutorLayout,
  makeExecutorLayout,
  pathWith,
  POD_IP,
  type Result,
  runScript,
} from './executor-wrapper.ts';

const PREFIX = 'sxs-dns-';
const SEARCH = ['a.svc', 'b.svc', 'c.svc'];

function prerequisites(): { ok: true; ip: string } | { ok: false; reason: string } {
  if (process.platform !== 'linux') return { ok: false, reason: 'not Linux' };
  if (!isRoot()) return { ok: false, reason: 'not root' };
  const ip = findBinary('ip');
  if (ip === null) return { ok: false, reason: '`ip` (iproute2) not found' };
  for (const cmd of ['getent', 'timeout']) if (findBinary(cmd) === null) return { ok: false, reason: `\`${cmd}\` not found` };
  const probe = `${PREFIX}probe-${process.pid}`;
  const add = run(ip, ['netns', 'add', probe]);
  if (!add.ok) return { ok: false, reason: `cannot create a network namespace: ${add.stderr.trim()}` };
  run(ip, ['netns', 'del', probe]);
  return { ok: true, ip };
}

const pre = prerequisites();
const skipReason = pre.ok ? '' : ` (SKIPPED: ${pre.reason}; needs root + iproute2)`;
if (!pre.ok) console.warn(`executor DNS netns test skipped: ${pre.reason}`);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Namespaces (and /etc/netns dirs) of earlier runs whose process is gone. */
function sweepStale(ip: string): void {
  const names = new Set<string>();
  for (const line of run(ip, ['netns', 'list']).stdout.split('\n')) {
    const name = line.trim().split(/\s+/)[0] ?? '';
    if (name.startsWith(PREFIX)) names.add(name);
  }
  if (existsSync('/etc/netns')) for (const d of readdirSync('/etc/netns')) if (d.startsWith(PREFIX)) names.add(d);
  for (const name of names) {
    const pid = Number(/^sxs-dns-(?:probe-)?(\d+)/.exec(name)?.[1] ?? NaN);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || isAlive(pid)) continue;
    run(ip, ['netns', 'del', name]);
    rmSync(join('/etc/netns', name), { recursive: true, force: true });
  }
}

// A DNS server that swallows queries: prints "ready", then one "Q <name> <uptime>" line per query
// (/proc/uptime: the kernel's clock, also read by the fake entrypoint). A line
// "nx <host> <ms>" on its stdin (answered "nx <host>") makes it answer NXDOMAIN to <host> and to
// <host>.<search domain> for <ms> after the first such query ("NX <name>" lines), and swallow them
// from then on.
const SILENT_DNS = `
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import readline from 'node:readline';
const nx = new Map(); // host -> { ms, first }
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, host, ms] = line.split(' ');
  if (cmd !== 'nx') return;
  nx.set(host, { ms: Number(ms), first: undefined });
  process.stdout.write('nx ' + host + '\\n');
});
const sock = dgram.createSocket('udp4');
sock.on('message', (m, from) => {
  const labels = [];
  let end = 12;
  for (; end < m.length && m[end] !== 0; end += m[end] + 1) labels.push(m.subarray(end + 1, end + 1 + m[end]).toString('latin1'));
  const name = labels.join('.');
  process.stdout.write('Q ' + name + ' ' + readFileSync('/proc/uptime', 'utf8').split(' ')[0] + '\\n');
  const rule = [...nx].find(([host]) => name === host || name.startsWith(host + '.'))?.[1];
  if (rule === undefined) return;
  const now = Date.now();
  rule.first ??= now;
  if (now - rule.first >= rule.ms) return;
  // the query's header and question; QR, its opcode and RD, RA, RCODE 3 (NXDOMAIN), no records
  const reply = Buffer.from(m.subarray(0, end + 5));
  reply[2] = 0x80 | (m[2] & 0x79);
  reply[3] = 0x80 | 3;
  reply.writeUInt16BE(1, 4);
  reply.fill(0, 6, 12);
  sock.send(reply, from.port, from.address);
  process.stdout.write('NX ' + name + '\\n');
});
sock.bind(53, '127.0.0.1', () => process.stdout.write('ready\\n'));
`;

describe('executor DNS wait against a DNS server that never answers (netns)', () => {
  const ip = pre.ok ? pre.ip : 'ip';
  const name = `${PREFIX}${process.pid}-${Math.random().toString(16).slice(2, 8)}`;
  const etcDir = join('/etc/netns', name);
  // made in beforeAll, which does not run when the tests are skipped
  let layout: ExecutorLayout | null = null;
  let noTimeoutBin = '';
  // busybox's applets and nothing else, but getent (busybox has none; Alpine's is musl's)
  let busyboxOnlyBin = '';
  let createdEtcNetns = false;
  let server: ChildProcess | null = null;
  let queries = '';

  beforeAll(async () => {
    if (!pre.ok) return;
    sweepStale(ip);
    layout = makeExecutorLayout('exec-svc-dns-');
    noTimeoutBin = pathWith(
      join(layout.root, 'no-timeout-bin'),
      [
        'sh',
        'env',
        'sed',
        'sort',
        'head',
        'tr',
        'sha256sum',
        'cut',
        'cat',
        'sleep',
        'date',
        'getent',
        ...(findBinary('busybox') !== null ? ['busybox'] : []),
      ],
      `${process.env.PATH ?? ''}:/usr/sbin:/usr/bin:/sbin:/bin`,
    );
    const busybox = findBinary('busybox');
    const getent = findBinary('getent');
    if (busybox !== null && getent !== null) {
      busyboxOnlyBin = join(layout.root, 'busybox-bin');
      mkdirSync(busyboxOnlyBin);
      for (const applet of run(busybox, ['--list']).stdout.split('\n'))
        if (applet !== '') symlinkSync(busybox, join(busyboxOnlyBin, applet));
      symlinkSync(getent, join(busyboxOnlyBin, 'getent'));
    }
    const add = run(ip, ['netns', 'add', name]);
    if (!add.ok) throw new Error(`ip netns add ${name}: ${add.stderr}`);
    const lo = run(ip, ['-n', name, 'link', 'set', 'lo', 'up']);
    if (!lo.ok) throw new Error(`ip link set lo up: ${lo.stderr}`);
    createdEtcNetns = !existsSync('/etc/netns');
    mkdirSync(etcDir, { recursive: true });
    writeFileSync(join(etcDir, 'resolv.conf'), `nameserver 127.0.0.1\nsearch ${SEARCH.join(' ')}\noptions ndots:5\n`);
    const script = join(layout.root, 'silent-dns.mjs');
    writeFileSync(script, SILENT_DNS);
    const child = spawn(ip, ['netns', 'exec', name, process.execPath, script], { stdio: ['pipe', 'pipe', 'pipe'] });
    server = child;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('silent DNS server did not start within 10 s')), 10_000);
      child.stdout?.on('data', (c: Buffer) => {
        queries += c.toString('utf8');
        if (queries.includes('ready\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`silent DNS server exited (${code})`));
      });
    });
  }, 20_000);

  afterAll(() => {
    if (!pre.ok) return;
    server?.kill('SIGKILL');
    const del = run(ip, ['netns', 'del', name]);
    if (!del.ok) console.warn(`could not delete namespace ${name}: ${del.stderr.trim()}`);
    rmSync(etcDir, { recursive: true, force: true });
    if (createdEtcNetns) {
      try {
        rmdirSync('/etc/netns');
      } catch {
        // not empty: someone else's namespaces live there too
      }
    }
    layout?.remove();
    expect(run(ip, ['netns', 'list']).stdout).not.toContain(name);
  });

  const shells: { name: string; cmd: string[] }[] = [
    { name: 'sh', cmd: ['sh'] },
    ...(findBinary('busybox') !== null ? [{ name: 'busybox sh', cmd: ['busybox', 'sh'] }] : []),
  ];
  let execId = 100;

  function wrapperIn(shell: string[], extra: Record<string, string | undefined>, before: (host: string) => Promise<void> = async () => {}) {
    if (layout === null) throw new Error('no layout');
    const { wrapper } = layout;
    execId += 1;
    const id = String(execId);
    const host = `${executorServiceName(APP, id)}.jobs.svc`;
    const env = executorEnv(layout, { SPARK_EXECUTOR_ID: id, SPARK_EXEC_SVC_WAIT_INTERVAL: '0.5', ...extra });
    return { host, result: before(host).then(() => runScript(ip, ['netns', 'exec', name, ...shell, wrapper, 'executor'], env)) };
  }

  /** Has the server answer NXDOMAIN to host for ms after its first query, and then nothing. */
  async function notFoundThenSilent(host: string, ms: number): Promise<void> {
    const ack = `nx ${host}\n`;
    server?.stdin?.write(`nx ${host} ${ms}\n`);
    for (let i = 0; i < 500 && !queries.includes(ack); i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    if (!queries.includes(ack)) throw new Error(`the DNS server did not take ${host}`);
  }

  // NXDOMAIN for 2.4 s, then silence: with 0.1 s between look-ups, one starts after 2.4 s, with
  // 0.6 s or less left, and is not answered (also when a loaded machine makes a round 0.4 s long)
  const NOT_FOUND_MS = 2400;
  const NOT_FOUND_INTERVAL = '0.1';
  /**
   * The wait as seen from outside, by the kernel's clock (/proc/uptime, 10 ms steps): from the
   * server's first query for the host to the start of Spark's (fake) entrypoint. It starts a few ms
   * after the wrapper's own clock does (getent has to start), and ends a few ms after the wait (the
   * log line, the port check, the exec).
   */
  function waitMs(r: Result, host: string): number {
    const first = queries
      .split('\n')
      .map((line) => /^Q (\S+) (\d+\.\d+)$/.exec(line))
      .find((m) => m !== null && (m[1] === host || m[1]?.startsWith(`${host}.`)));
    const started = /^STARTED (\d+\.\d+)$/m.exec(r.stdout);
    if (first?.[2] === undefined || started?.[1] === undefined)
      throw new Error(`no query for ${host}, or the entrypoint did not say when it started`);
    return Math.round((Number(started[1]) - Number(first[2])) * 1000);
  }

  function expectCutOffWithinBound(r: Result, host: string, bound: number): void {
    expect(r.code).toBe(0);
    const waited = waitMs(r, host);
    expect(waited).toBeGreaterThanOrEqual(bound * 1000 - 100);
    expect(waited).toBeLessThanOrEqual(bound * 1000 + 200);
    expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
    const logLine = new RegExp(
      `${host.replaceAll('.', '\\.')} does not resolve after ${bound}\\.\\d\\ds \\((\\d+) look-up\\(s\\), 1 cut off unanswered by the DNS server\\)`,
    );
    expect(r.stderr).toMatch(logLine);
    // several look-ups answered "not found", then the one cut off
    expect(Number(logLine.exec(r.stderr)?.[1])).toBeGreaterThanOrEqual(3);
    // answered "not found" first, swallowed later
    expect(queries).toContain(`NX ${host}.${SEARCH[0]}\n`);
  }

  it.skipIf(!pre.ok)(
    `an unbounded look-up of the Service name outlasts the bound: getent is still waiting after 4.5 s${skipReason}`,
    { timeout: 15_000 },
    async () => {
      const host = `${executorServiceName(APP, '99')}.jobs.svc`;
      const r = await runScript(ip, ['netns', 'exec', name, 'timeout', '4.5', 'getent', 'hosts', host], {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
      });
      expect(r.code).toBe(124); // killed by timeout, not answered
      expect(r.ms).toBeGreaterThanOrEqual(4400);
      // ndots:5 sends the 2-dot name through the search path first
      expect(queries).toContain(`Q ${host}.${SEARCH[0]} `);
    },
  );

  describe.concurrent.each(shells)('under $name', ({ cmd }) => {
    for (const [bound, timer] of [
      [3, 'timeout'],
      [5, 'timeout'],
      [3, 'watchdog'],
    ] as const) {
      it.skipIf(!pre.ok)(`gives up within ${bound} s + 1 s and keeps the pod IP (${timer})${skipReason}`, { timeout: 20_000 }, async () => {
        const pathEnv = timer === 'watchdog' ? { PATH: noTimeoutBin } : {};
        const { host, result } = wrapperIn(cmd, { SPARK_EXEC_SVC_WAIT_SECONDS: String(bound), ...pathEnv });
        const r = await result;
        console.log(
          `[dns-netns] ${cmd.join(' ')} bound ${bound} s (${timer}): ${(r.ms / 1000).toFixed(2)} s; ${r.stderr.trim().split('\n').at(-1)}`,
        );
        expect(r.code).toBe(0);
        expect(r.ms).toBeGreaterThanOrEqual(bound * 1000 - 100);
        expect(r.ms).toBeLessThanOrEqual(bound * 1000 + 1000);
        expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
        expect(r.args).not.toContain('--bind-address');
        expect(r.stderr).toMatch(
          new RegExp(
            `${host.replaceAll('.', '\\.')} does not resolve after ${bound}\\.\\d\\ds \\(1 look-up\\(s\\), 1 cut off unanswered by the DNS server\\)`,
          ),
        );
        // the look-ups did reach the (silent) DNS server, through the search path
        expect(queries).toContain(`Q ${host}.${SEARCH[0]} `);
      });
    }

    for (const timer of ['timeout', 'watchdog'] as const) {
      it.skipIf(!pre.ok)(
        `"not found", then no answer: the cut-off look-up ends the wait within 3 s + 0.2 s (${timer})${skipReason}`,
        { timeout: 20_000 },
        async () => {
          const pathEnv = timer === 'watchdog' ? { PATH: noTimeoutBin } : {};
          const { host, result } = wrapperIn(
            cmd,
            { SPARK_EXEC_SVC_WAIT_SECONDS: '3', SPARK_EXEC_SVC_WAIT_INTERVAL: NOT_FOUND_INTERVAL, FAKE_ENTRYPOINT_UPTIME: '1', ...pathEnv },
            (h) => notFoundThenSilent(h, NOT_FOUND_MS),
          );
          const r = await result;
          console.log(
            `[dns-netns] ${cmd.join(' ')} "not found" then silent, bound 3 s (${timer}): wait ${(waitMs(r, host) / 1000).toFixed(2)} s, run ${(r.ms / 1000).toFixed(2)} s; ${r.stderr.trim().split('\n').at(-1)}`,
          );
          expectCutOffWithinBound(r, host, 3);
        },
      );
    }

    it.skipIf(!pre.ok)(`fails within the bound + 1 s with SPARK_EXEC_SVC_ON_TIMEOUT=fail${skipReason}`, { timeout: 20_000 }, async () => {
      const { result } = wrapperIn(cmd, { SPARK_EXEC_SVC_WAIT_SECONDS: '3', SPARK_EXEC_SVC_ON_TIMEOUT: 'fail' });
      const r = await result;
      expect(r.code).toBe(1);
      expect(r.ms).toBeLessThanOrEqual(4000);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('failing (SPARK_EXEC_SVC_ON_TIMEOUT=fail)');
    });
  });

  // Alpine-like: busybox sh with busybox's applets only (its `timeout`, `sleep`, `sed`, ...) and getent
  const busyboxBinary = findBinary('busybox');
  const busyboxTools = busyboxBinary !== null && findBinary('getent') !== null;
  it.skipIf(!pre.ok || !busyboxTools)(
    `"not found", then no answer: within 3 s + 0.2 s under busybox sh with busybox's own tools, its whole-second timeout included${skipReason}${busyboxTools ? '' : ' (SKIPPED: no busybox)'}`,
    { timeout: 20_000 },
    async () => {
      const { host, result } = wrapperIn(
        [busyboxBinary ?? 'busybox', 'sh'],
        {
          SPARK_EXEC_SVC_WAIT_SECONDS: '3',
          SPARK_EXEC_SVC_WAIT_INTERVAL: NOT_FOUND_INTERVAL,
          FAKE_ENTRYPOINT_UPTIME: '1',
          PATH: busyboxOnlyBin,
        },
        (h) => notFoundThenSilent(h, NOT_FOUND_MS),
      );
      const r = await result;
      console.log(
        `[dns-netns] busybox sh, busybox's tools, "not found" then silent, bound 3 s: wait ${(waitMs(r, host) / 1000).toFixed(2)} s, run ${(r.ms / 1000).toFixed(2)} s; ${r.stderr.trim().split('\n').at(-1)}`,
      );
      expectCutOffWithinBound(r, host, 3);
    },
  );
});
