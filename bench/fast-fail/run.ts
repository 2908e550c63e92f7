/**
 * `npm run demo:fast-fail` - why every Spark executor gets its own ClusterIP Service.
 *
 * Measures, with real TCP connects from Node, how long a client needs to give up on K lost
 * peers visited one at a time:
 *   (a) drop   - a vanished pod IP: packets silently dropped, each connect waits for T;
 *   (b) reject - a Service without endpoints: kube-proxy's REJECT, ECONNREFUSED at once;
 *   (c) closed - a plain closed port (RST), and (d) a live peer, for reference.
 * Then projects the totals to Spark's default 120 s connect timeout.
 *
 *   node bench/fast-fail/run.ts [--peers K=5] [--timeout-ms T=2000] [--mode auto|netns|loopback]
 *                               [--out .bench-results/fast-fail.json]
 *
 * netns mode (root + ip + iptables): the client runs inside a private network namespace
 * (`ip netns exec`), all addresses are 127.x inside it, the rules live and die with it.
 * loopback mode (fallback): host loopback only, case (b) skipped; see loopback.ts.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setupLoopback } from './loopback.ts';
import { setupNetns, sweepStaleNamespaces } from './netns.ts';
import {
  CASE_INFO,
  SPARK_CONNECT_TIMEOUT_MS,
  SPARK_MAX_RETRIES,
  SPARK_RETRY_WAIT_MS,
  formatMs,
  renderTable,
  skippedCase,
  sparkRetryModelMs,
  summarize,
} from './report.ts';
import type { CaseSummary } from './report.ts';
import { CleanupStack, activeCleanups, findBinary, isRoot, run } from './sys.ts';
import { RESULT_PREFIX } from './types.ts';
import type { CaseId, CasePlan, ClientPlan, ClientResult } from './types.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, '..', '..');
export const DEFAULT_OUT = path.join(REPO_ROOT, '.bench-results', 'fast-fail.json');

export type Mode = 'auto' | 'netns' | 'loopback';

export interface FastFailOptions {
  peers: number;
  timeoutMs: number;
  mode: Mode;
  /** JSON output path, or null to write nothing. */
  outFile: string | null;
  log: (line: string) => void;
}

export interface FastFailReport {
  schema: 1;
  generatedAt: string;
  mode: 'netns' | 'loopback';
  modeReason: string;
  peers: number;
  timeoutMs: number;
  sparkConnectTimeoutMs: number;
  environment: Record<string, string | null>;
  namespace: string | null;
  rules: string[];
  kernelCounters: { dropPackets: number | null; rejectPackets: number | null } | null;
  cases: CaseSummary[];
  notes: string[];
  simulated: string[];
  realClusterAdds: string[];
}

export const SIMULATED = [
  'A deleted executor pod IP is simulated by an iptables DROP rule (SYNs vanish, nothing answers); ' +
    'in loopback mode by a listener whose accept queue is full.',
  "kube-proxy's rule for a Service without endpoints is simulated by the same iptables rule it installs " +
    '(filter table, jumped to from OUTPUT: REJECT --reject-with icmp-port-unreachable), one rule per Service.',
  'All addresses are 127.x inside a private network namespace (or host loopback in fallback mode); ' +
    'the client is a Node net.Socket with its own connect timer standing in for Netty\'s connect timeout.',
];

export const REAL_CLUSTER_ADDS = [
  'DNS: a peer that connects via the Service name first resolves it (CoreDNS, search-path expansion; ndots:5 can mean several lookups).',
  "kube-proxy rule propagation: the REJECT rule appears only after kube-proxy syncs the endpoint change (typically about a second, its iptables min-sync-period; longer on big clusters); until then the Service still DNATs to the dead pod IP and a connect hangs like case (a).",
  'conntrack: connections already open to the old pod keep their NAT entry and fail through TCP retransmission / idle timeouts, not through the reject rule, which only sees new connections.',
  'proxy mode: this reproduces iptables mode. nftables mode installs its own reject for Services without endpoints; for IPVS mode the kube-proxy maintainers found no extra rule was needed (kubernetes/kubernetes#72534). What the client sees (ICMP vs RST) can differ, and kubernetes/kubernetes#78994 reports setups where the connect still hung: check the cluster in use.',
  'cross-node routing: the dropped SYN may cross a node or overlay first; some CNIs answer with ICMP host-unreachable after a failed ARP (~3 s) instead of staying silent.',
  `Spark's own retries: spark.shuffle.io.maxRetries=${SPARK_MAX_RETRIES} with spark.shuffle.io.retryWait=${SPARK_RETRY_WAIT_MS / 1000}s, so a fetch that times out is tried ${SPARK_MAX_RETRIES + 1} times before the FetchFailedException: even slower than one timeout.`,
  'concurrency: this demo visits peers strictly one after another (worst case). Spark\'s shuffle reader keeps several peers in flight (bounded by spark.reducer.maxSizeInFlight), while BlockManager tries the locations of a remote block one by one.',
];

interface ModeChoice {
  mode: 'netns' | 'loopback';
  reason: string;
  ip: string | null;
  iptables: string | null;
}

export function netnsPrerequisites(): { ok: boolean; reason: string; ip: string | null; iptables: string | null } {
  const ip = findBinary('ip');
  const iptables = findBinary('iptables');
  const missing: string[] = [];
  if (!isRoot()) missing.push('not running as root');
  if (ip === null) missing.push('`ip` (iproute2) not found');
  if (iptables === null) missing.push('`iptables` not found');
  return { ok: missing.length === 0, reason: missing.join(', '), ip, iptables };
}

function chooseMode(requested: Mode): ModeChoice {
  const pre = netnsPrerequisites();
  if (requested === 'loopback') return { mode: 'loopback', reason: 'requested with --mode loopback', ip: null, iptables: null };
  if (pre.ok) return { mode: 'netns', reason: 'root, ip and iptables available', ip: pre.ip, iptables: pre.iptables };
  if (requested === 'netns') throw new Error(`--mode netns needs root, ip and iptables: ${pre.reason}`);
  return { mode: 'loopback', reason: `fallback: ${pre.reason}`, ip: null, iptables: null };
}

function checkNodeSupportsTs(): void {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 18)) {
    throw new Error(`Node ${process.versions.node} cannot run .ts files directly; run through npm (Node 22 from node_modules)`);
  }
}

/** Spawn the client (optionally inside the namespace), bounded in time; killed by cleanup. */
function runClient(prefix: string[], plan: ClientPlan, cleanup: CleanupStack): Promise<ClientResult> {
  const argv = [...prefix, process.execPath, path.join(HERE, 'client.ts'), JSON.stringify(plan)];
  const [cmd, ...args] = argv as [string, ...string[]];
  const attempts = plan.cases.reduce((n, c) => n + c.targets.length, 0);
  const limitMs = attempts * (plan.timeoutMs + 1000) + 15_000;
  return new Promise((resolve, reject) => {
    // stdin is a pipe we never write to: the client exits when it closes (we died).
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const kill = (): void => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    };
    cleanup.add('kill client', kill);
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
    const timer = setTimeout(() => {
      kill();
      reject(new Error(`client did not finish within ${limitMs} ms`));
    }, limitMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith(RESULT_PREFIX));
      if (code !== 0 || line === undefined) {
        reject(new Error(`client failed (code ${code}, signal ${signal}): ${err.trim() || out.trim()}`));
        return;
      }
      resolve(JSON.parse(line.slice(RESULT_PREFIX.length)) as ClientResult);
    });
  });
}

/** Two significant digits: 224662 -> "220,000". */
function speedup(ratio: number): string {
  return Number(ratio.toPrecision(2)).toLocaleString('en-US');
}

function readProc(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

export async function runFastFail(options: FastFailOptions): Promise<FastFailReport> {
  const { peers, timeoutMs, log } = options;
  if (!Number.isInteger(peers) || peers < 1 || peers > 20) throw new Error('--peers must be an integer 1..20');
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 30_000) throw new Error('--timeout-ms must be an integer 100..30000');
  if (peers * timeoutMs > 120_000) throw new Error('peers x timeout-ms must stay <= 120000 ms (bounded run time)');
  checkNodeSupportsTs();
  const choice = chooseMode(options.mode);
  const cleanup = new CleanupStack();
  activeCleanups.add(cleanup);
  try {
    let plans: CasePlan[];
    let prefix: string[] = [];
    let namespace: string | null = null;
    let rules: string[] = [];
    let counters: FastFailReport['kernelCounters'] = null;
    let readCounters: (() => FastFailReport['kernelCounters']) | null = null;
    const notes: string[] = [];
    let mode = choice.mode;
    let modeReason = choice.reason;
    if (mode === 'netns' && choice.ip !== null && choice.iptables !== null) {
      sweepStaleNamespaces(choice.ip, log);
      try {
        const env = setupNetns({ ip: choice.ip, iptables: choice.iptables, peers, cleanup, log });
        plans = env.plans;
        prefix = env.execPrefix;
        namespace = env.name;
        rules = env.ruleSummary;
        readCounters = env.counters;
      } catch (err) {
        if (options.mode === 'netns') throw err;
        cleanup.runAll(log); // remove a half-built namespace before falling back
        mode = 'loopback';
        modeReason = `fallback: namespace setup failed (${err instanceof Error ? err.message : String(err)})`;
        const env = await setupLoopback({ peers, timeoutMs, cleanup, log });
        plans = env.plans;
        notes.push(...env.notes);
      }
    } else {
      const env = await setupLoopback({ peers, timeoutMs, cleanup, log });
      plans = env.plans;
      notes.push(...env.notes);
    }
    log(`mode: ${mode} (${modeReason})${namespace !== null ? `, namespace ${namespace}` : ''}`);
    log(`connecting to ${peers} peers per case, one at a time, connect timeout ${timeoutMs} ms ...`);

    const result = await runClient(prefix, { timeoutMs, cases: plans }, cleanup);
    if (readCounters !== null) counters = readCounters();

    const order: CaseId[] = ['drop', 'reject', 'closed', 'live'];
    const cases = order.map((id) => {
      const got = result.cases.find((c) => c.id === id);
      return got !== undefined
        ? summarize(id, got.attempts, timeoutMs)
        : skippedCase(id, peers, timeoutMs, mode === 'loopback' ? 'not reproducible in loopback mode' : 'not run');
    });

    const drop = cases.find((c) => c.id === 'drop');
    const reject = cases.find((c) => c.id === 'reject');
    if (drop?.projectedTotalMs != null && reject?.projectedTotalMs != null && reject.projectedTotalMs > 0) {
      notes.push(`at Spark's ${SPARK_CONNECT_TIMEOUT_MS / 1000} s timeout, ${peers} lost peers cost ` +
        `${formatMs(drop.projectedTotalMs)} behind a dropped pod IP vs ${formatMs(reject.projectedTotalMs)} behind ` +
        `a Service without endpoints (~${speedup(drop.projectedTotalMs / reject.projectedTotalMs)} times faster to fail).`);
    }
    if (drop?.p50Ms != null) {
      const rejectOrClosed = reject?.p50Ms ?? cases.find((c) => c.id === 'closed')?.p50Ms ?? null;
      notes.push(`model, not measured - with Spark's retries (${SPARK_MAX_RETRIES} retries, ${SPARK_RETRY_WAIT_MS / 1000} s wait) ` +
        `one lost peer costs ~${formatMs(sparkRetryModelMs(SPARK_CONNECT_TIMEOUT_MS))} when dropped` +
        (rejectOrClosed !== null ? ` vs ~${formatMs(sparkRetryModelMs(rejectOrClosed))} when refused (then only retryWait counts)` : '') + '.');
    }
    if (counters !== null) {
      notes.push(`kernel counters in ${namespace}: DROP chain matched ${counters.dropPackets ?? '?'} packets ` +
        `(${peers} SYNs + their retransmits), REJECT chain matched ${counters.rejectPackets ?? '?'} packets (one SYN per peer).`);
    }

    const report: FastFailReport = {
      schema: 1,
      generatedAt: new Date().toISOString(),
      mode,
      modeReason,
      peers,
      timeoutMs,
      sparkConnectTimeoutMs: SPARK_CONNECT_TIMEOUT_MS,
      environment: {
        node: result.node,
        kernel: os.release(),
        tcp_syn_retries: readProc('/proc/sys/net/ipv4/tcp_syn_retries'),
        tcp_abort_on_overflow: readProc('/proc/sys/net/ipv4/tcp_abort_on_overflow'),
        iptables: choice.iptables !== null ? run(choice.iptables, ['--version']).stdout.trim() : null,
      },
      namespace,
      rules,
      kernelCounters: counters,
      cases,
      notes,
      simulated: SIMULATED,
      realClusterAdds: REAL_CLUSTER_ADDS,
    };
    if (options.outFile !== null) {
      mkdirSync(path.dirname(options.outFile), { recursive: true });
      writeFileSync(options.outFile, `${JSON.stringify(report, null, 2)}\n`);
    }
    return report;
  } finally {
    cleanup.runAll(log);
    activeCleanups.delete(cleanup);
  }
}

export function printReport(report: FastFailReport, outFile: string | null, print: (line: string) => void): void {
  print('');
  print(`fast-fail demo - mode: ${report.mode} (${report.modeReason})`);
  print(`K=${report.peers} lost peers visited one at a time, client connect timeout T=${report.timeoutMs} ms`);
  print('');
  print(renderTable(report.cases));
  print('');
  print('What each case stands for:');
  for (const c of report.cases) print(`  ${CASE_INFO[c.id].title}: ${c.standsFor}`);
  print('');
  print('Projection: the drop case is timeout-bound - every peer costs exactly T - so its total scales linearly');
  print(`with T: projected = measured total x ${SPARK_CONNECT_TIMEOUT_MS} / T. The reject and closed cases are answered by`);
  print('the network on the first packet and do not depend on T: their projected total is the measured total.');
  for (const n of report.notes) print(`* ${n}`);
  print('');
  print('Simulated here:');
  for (const s of report.simulated) print(`  - ${s}`);
  print('A real cluster adds:');
  for (const s of report.realClusterAdds) print(`  - ${s}`);
  if (outFile !== null) print(`\nJSON: ${path.relative(process.cwd(), outFile) || outFile}`);
}

const USAGE = `usage: node bench/fast-fail/run.ts [--peers K] [--timeout-ms T] [--mode auto|netns|loopback] [--out FILE]
  --peers K        lost peers per case, 1..20 (default 5)
  --timeout-ms T   client connect timeout in ms, 100..30000 (default 2000)
  --mode M         auto (netns when root + ip + iptables, else loopback), netns, loopback
  --out FILE       JSON results (default .bench-results/fast-fail.json)`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      peers: { type: 'string', default: '5' },
      'timeout-ms': { type: 'string', default: '2000' },
      mode: { type: 'string', default: 'auto' },
      out: { type: 'string', default: DEFAULT_OUT },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const mode = values.mode;
  if (mode !== 'auto' && mode !== 'netns' && mode !== 'loopback') throw new Error(`bad --mode ${mode}\n${USAGE}`);
  const outFile = path.resolve(values.out);
  const log = (line: string): void => console.error(`[fast-fail] ${line}`);
  // Signals: undo namespaces / kill children synchronously, then exit.
  const onSignal = (signal: NodeJS.Signals): void => {
    log(`${signal}: cleaning up`);
    for (const c of activeCleanups) c.runAll(log);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGHUP', onSignal);
  process.once('exit', () => {
    for (const c of activeCleanups) c.runAll(log);
  });
  const report = await runFastFail({ peers: Number(values.peers), timeoutMs: Number(values['timeout-ms']), mode, outFile, log });
  printReport(report, outFile, (line) => console.log(line));
  return 0;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`[fast-fail] error: ${err instanceof Error ? err.message : String(err)}`);
      for (const c of activeCleanups) c.runAll((l) => console.error(`[fast-fail] ${l}`));
      process.exit(1);
    },
  );
}
