/**
 * `npm run demo:fast-fail` - why every Spark executor gets its own ClusterIP Service.
 *
 * Part 1, per connect: real TCP connects from Node to K lost peers, one at a time:
 *   (a) drop   - a vanished pod IP: packets silently dropped, each connect waits for T;
 *   (b) reject - a Service without endpoints: kube-proxy's REJECT, ECONNREFUSED at once;
 *   (c) closed - a plain closed port (RST), and (d) a live peer, for reference.
 * Part 2, as Spark pays it: a reduce task that must fetch from the K lost peers, re-enacted with
 * Spark's fetch path (spark-fetch-model.ts) at scaled-down settings (T stands for 120 s), for three
 * set-ups (Spark defaults vs the pod IP, connectionCreationTimeout=10s vs the pod IP, Spark defaults
 * vs the executor's Service), with and without the driver already knowing the executor is dead.
 * Each measured row is checked against the model at the same settings, then projected with the
 * model to the real settings. One table.
 *
 *   node proof/fast-fail/run.ts [--peers K=5] [--timeout-ms T=2000] [--mode auto|netns|loopback]
 *                               [--out .bench-results/fast-fail.json]
 *
 * netns mode (root + ip + iptables): the client runs inside a private network namespace
 * (`ip netns exec`), all addresses are 127.x inside it, the rules live and die with it.
 * loopback mode (fallback): host loopback only, case (b) and the Service rows skipped; see loopback.ts.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setupLoopback } from './loopback.ts';
import { setupNetns, sweepStaleNamespaces } from './netns.ts';
import { CASE_INFO, SPARK_CONNECT_TIMEOUT_MS, describeCodes, formatMs, skippedCase, summarize } from './report.ts';
import type { CaseSummary } from './report.ts';
import { SPARK_DEFAULT_CONF, scaleConf, taskGiveUp, uniformPeers } from './spark-fetch-model.ts';
import type { FetchConf } from './spark-fetch-model.ts';
import {
  SETUPS,
  SETUP_ORDER,
  buildScenarios,
  buildSparkRow,
  formatDuration,
  renderSparkTable,
  renderSparkWhy,
  scenarioId,
} from './spark-report.ts';
import { paragraph } from '../../testkit/text-layout.ts';
import type { SparkRow } from './spark-report.ts';
import { CleanupStack, activeCleanups, findBinary, isRoot, run } from './sys.ts';
import { RESULT_PREFIX, sparkPlanBoundMs } from './types.ts';
import type { CaseId, CasePlan, ClientPlan, ClientResult, SparkScenarioResult, TargetPlan } from './types.ts';

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

export interface SparkSection {
  /** Scale of the run's settings: T / 120000 (e.g. 1/60: 120 s -> 2 s). */
  factor: number;
  /** Packets the DROP / REJECT chains matched during part 2 (netns mode). */
  kernelCounters: { dropPackets: number | null; rejectPackets: number | null } | null;
  /** Connects the Service rows made (each is one SYN through the REJECT chain). */
  serviceConnects: number;
  scaledSettings: Record<string, FetchConf>;
  rows: SparkRow[];
  /** The raw attempts of every scenario, as the client measured them. */
  raw: SparkScenarioResult[];
}

export interface FastFailReport {
  schema: 2;
  generatedAt: string;
  mode: 'netns' | 'loopback';
  modeReason: string;
  peers: number;
  timeoutMs: number;
  sparkConnectTimeoutMs: number;
  environment: Record<string, string | null>;
  namespace: string | null;
  rules: string[];
  /** Packet counters of the DROP / REJECT chains after part 1 (the per-connect cases). */
  kernelCounters: { dropPackets: number | null; rejectPackets: number | null } | null;
  cases: CaseSummary[];
  spark: SparkSection;
  notes: string[];
  simulated: string[];
  realClusterAdds: string[];
}

export const SIMULATED = [
  'A deleted executor pod IP is simulated by an iptables DROP rule (SYNs vanish, nothing answers); ' +
    'in loopback mode by a listener whose accept queue is full.',
  "kube-proxy's rule for a Service without endpoints is simulated by the same iptables rule it installs " +
    '(filter table, jumped to from OUTPUT: REJECT --reject-with icmp-port-unreachable), one rule per Service. ' +
    'It is in place from the start: no proxy programming lag.',
  'All addresses are 127.x inside a private network namespace (or host loopback in fallback mode), given as IP literals: ' +
    "no DNS. The client is a Node net.Socket with its own connect timer standing in for Netty's connect timeout.",
  "Spark's fetch path is re-enacted in Node, not run: the task's first connect to each lost peer in turn, an IsExecutorAlive " +
    'ask after every failed connect (answered by a stand-in driver listening in the client process, from a set of dead executor ids), ' +
    'retries after retryWait in the background, give-up at the first final failure. No JVM, Netty, thread pools or GC; ' +
    'live peers, local blocks and the stage retry after the FetchFailedException are left out.',
  'Settings are scaled down by T/120 s (timeouts and retryWait; maxRetries unchanged) and the model projects back to the real ones.',
];

export const REAL_CLUSTER_ADDS = [
  'kube-proxy programming lag: the REJECT rule appears only after kube-proxy syncs the endpoint change (about a second, its iptables min-sync-period; longer on big clusters). Until then the Service still DNATs to the dead pod IP, so a connect made in that window hangs like a DROP row and costs one connect timeout.',
  "DNS: executors advertise their Service's name, so a new connection first resolves it (CoreDNS, search-path expansion; ndots:5 can mean several lookups), and the JVM caches the answer (networkaddress.cache.ttl). The Service's ClusterIP does not change while the Service exists, so a cached answer stays right; a pod IP in a cache or in the driver's map-output locations is what goes stale.",
  'when the driver learns of the loss: from its pod watch usually within seconds of a pod deletion, from its API polling (spark.kubernetes.executor.apiPollingInterval, 30 s), or, for a node that vanished, from missed heartbeats (spark.network.timeout, 120 s, checked every spark.network.timeoutInterval, 60 s). Which of the two driver rows applies depends on whether the fetch starts before or after that.',
  'conntrack: connections already open to the old pod keep their NAT entry and fail through TCP retransmission / idle timeouts, not through the reject rule, which only sees new connections.',
  'proxy mode: this reproduces iptables mode. nftables mode installs its own reject for Services without endpoints; for IPVS mode the kube-proxy maintainers found no extra rule was needed (kubernetes/kubernetes#72534). What the client sees (ICMP vs RST) can differ, and kubernetes/kubernetes#78994 reports setups where the connect still hung: check the cluster in use.',
  'cross-node routing: the dropped SYN may cross a node or overlay first; some CNIs answer with ICMP host-unreachable after a failed ARP (~3 s) instead of staying silent.',
  "the real round trip of the driver ask (milliseconds, not the loopback's tenth of a millisecond), live peers' fetches in the same wave, and more than one request to one lost peer (TransportClientFactory's fast-fail window, 95 % of retryWait, then fails the later ones at once).",
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
  const limitMs = attempts * (plan.timeoutMs + 1000) + sparkPlanBoundMs(plan.spark) + 15_000;
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

/** The demo refuses settings whose expected run time exceeds this. */
export const MAX_EXPECTED_RUN_MS = 300_000;

/**
 * Expected run time (ms) of a demo: part 1 (K connects per case; the drop case waits T each) plus
 * part 2 (every Spark scenario, predicted by the model with every lost-peer connect dropped or
 * refused in no time). The default (K=5, T=2000) is about 32 s.
 */
export function expectedRunMs(peers: number, timeoutMs: number): number {
  const factor = timeoutMs / SPARK_CONNECT_TIMEOUT_MS;
  let total = peers * timeoutMs;
  for (const setup of SETUP_ORDER) {
    const conf = scaleConf(SETUPS[setup].conf, factor);
    const outcome = SETUPS[setup].target === 'drop' ? { kind: 'dropped' as const } : { kind: 'refused' as const, failMs: 0 };
    for (const knowsAt of [0, Number.POSITIVE_INFINITY]) total += taskGiveUp(uniformPeers(peers, outcome), conf, knowsAt).giveUpMs;
  }
  return total;
}

function fmtFactor(f: number): string {
  const inv = 1 / f;
  return Number.isInteger(Math.round(inv * 1000) / 1000) ? `1/${Math.round(inv)}` : f.toPrecision(3);
}

function round1(v: number): number {
  return Math.round(v * 10) / 10;
}

export async function runFastFail(options: FastFailOptions): Promise<FastFailReport> {
  const { peers, timeoutMs, log } = options;
  if (!Number.isInteger(peers) || peers < 1 || peers > 20) throw new Error('--peers must be an integer 1..20');
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 30_000) throw new Error('--timeout-ms must be an integer 100..30000');
  if (peers * timeoutMs > 120_000) throw new Error('peers x timeout-ms must stay <= 120000 ms (bounded run time)');
  const factor = timeoutMs / SPARK_CONNECT_TIMEOUT_MS;
  const expectedMs = expectedRunMs(peers, timeoutMs);
  if (expectedMs > MAX_EXPECTED_RUN_MS) {
    throw new Error(
      `--peers ${peers} --timeout-ms ${timeoutMs} would run about ${Math.round(expectedMs / 1000)} s; ` +
        `keep it under ${MAX_EXPECTED_RUN_MS / 1000} s (fewer peers or a shorter timeout)`,
    );
  }
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
        const env = await setupLoopback({ peers, timeoutMs, extraHoldMs: expectedMs * 2, cleanup, log });
        plans = env.plans;
        notes.push(...env.notes);
      }
    } else {
      const env = await setupLoopback({ peers, timeoutMs, extraHoldMs: expectedMs * 2, cleanup, log });
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
      notes.push(
        `per connect, at Spark's ${SPARK_CONNECT_TIMEOUT_MS / 1000} s timeout, ${peers} lost peers connected once each cost ` +
          `${formatMs(drop.projectedTotalMs)} behind a dropped pod IP vs ${formatMs(reject.projectedTotalMs)} behind ` +
          `a Service without endpoints (~${speedup(drop.projectedTotalMs / reject.projectedTotalMs)} times faster to fail).`,
      );
    }
    if (counters !== null) {
      notes.push(
        `kernel counters in ${namespace} after part 1: DROP chain matched ${counters.dropPackets ?? '?'} packets ` +
          `(${peers} SYNs + their retransmits), REJECT chain matched ${counters.rejectPackets ?? '?'} packets (one SYN per peer).`,
      );
    }

    // Part 2: Spark's fetch path, three set-ups x driver knows / not, at scaled settings.
    const targetsOf = (id: CaseId): TargetPlan[] | null => plans.find((p) => p.id === id)?.targets ?? null;
    const scenarios = buildScenarios(factor, { drop: targetsOf('drop'), reject: targetsOf('reject') });
    const driverHost = mode === 'netns' ? '127.0.4.2' : '127.0.0.1';
    log(
      `Spark fetch path: ${scenarios.length} scenarios, settings scaled x${fmtFactor(factor)} ` +
        `(connect timeout 120 s -> ${timeoutMs} ms, retryWait 5 s -> ${round1(SPARK_DEFAULT_CONF.retryWaitMs * factor)} ms) ...`,
    );
    const sparkResult = await runClient(prefix, { timeoutMs, cases: [], spark: { driverHost, scenarios } }, cleanup);
    let sparkCounters: { dropPackets: number | null; rejectPackets: number | null } | null = null;
    const after = readCounters !== null ? readCounters() : null;
    if (after !== null && counters !== null) {
      const delta = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : a - b);
      sparkCounters = {
        dropPackets: delta(after.dropPackets, counters.dropPackets),
        rejectPackets: delta(after.rejectPackets, counters.rejectPackets),
      };
    }
    const raw = sparkResult.spark ?? [];
    const rows: SparkRow[] = [];
    for (const setup of SETUP_ORDER) {
      for (const driverKnows of [true, false]) {
        const got = raw.find((r) => r.id === scenarioId(setup, driverKnows));
        const skipped =
          SETUPS[setup].target === 'reject' && mode === 'loopback'
            ? 'loopback mode has no REJECT rule'
            : 'its lost-peer address could not be set up';
        rows.push(buildSparkRow(setup, driverKnows, peers, factor, got, got === undefined ? skipped : undefined));
      }
    }
    const serviceRows = raw.filter((r) => SETUPS[r.id.split('/')[0] as keyof typeof SETUPS]?.target === 'reject');
    const serviceConnects = serviceRows.reduce((n, r) => n + r.attempts.filter((a) => a.outcome !== 'aborted').length, 0);
    if (sparkCounters !== null) {
      notes.push(
        `kernel counters in ${namespace} for part 2: DROP chain matched ${sparkCounters.dropPackets ?? '?'} packets, ` +
          `REJECT chain matched ${sparkCounters.rejectPackets ?? '?'} packets (the Service rows made ${serviceConnects} connects, one SYN each).`,
      );
    }
    const byId = (id: string): SparkRow | undefined => rows.find((r) => r.id === id);
    const dk = byId(scenarioId('defaults-drop', true));
    const sk = byId(scenarioId('service-reject', true));
    const su = byId(scenarioId('service-reject', false));
    if (dk?.projected != null && sk?.projected != null && su?.projected != null) {
      notes.push(
        `as Spark pays it, ${peers} lost peers: ${formatDuration(dk.projected.giveUpMs)} behind pod IPs at Spark's defaults ` +
          `vs ${formatDuration(sk.projected.giveUpMs)} behind Services once the driver knows the executor is dead, ` +
          `${formatDuration(su.projected.giveUpMs)} (${SPARK_DEFAULT_CONF.maxRetries} x retryWait) while it does not.`,
      );
    }
    const spark: SparkSection = {
      factor,
      kernelCounters: sparkCounters,
      serviceConnects,
      scaledSettings: Object.fromEntries(SETUP_ORDER.map((id) => [id, scaleConf(SETUPS[id].conf, factor)])),
      rows,
      raw,
    };

    const report: FastFailReport = {
      schema: 2,
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
      spark,
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
  const f = report.spark.factor;
  const conf = (id: keyof typeof SETUPS): FetchConf | undefined => report.spark.scaledSettings[id];
  const d = conf('defaults-drop');
  const t = conf('tuned-drop');
  // Every line fits REPORT_COLUMNS: paragraphs wrap, list items hang after their marker.
  const para = (first: string, text: string): void => {
    for (const line of paragraph(first, text)) print(line);
  };
  print('');
  para('', `fast-fail demo - mode: ${report.mode} (${report.modeReason})`);
  para(
    '',
    `A reduce task that must fetch from K=${report.peers} lost executors, re-enacted with Spark's fetch path at settings ` +
      `scaled x${fmtFactor(f)}: connect timeout 120 s -> ${round1(d?.connectTimeoutMs ?? 0)} ms, 10 s -> ${round1(t?.connectTimeoutMs ?? 0)} ms, ` +
      `retryWait 5 s -> ${round1(d?.retryWaitMs ?? 0)} ms, maxRetries ${d?.maxRetries ?? '?'}.`,
  );
  print('');
  print(renderSparkTable(report.spark.rows));
  print('');
  para('measured (scaled): ', 'when the task gave up (FetchFailedException) in this run.');
  para(
    'model (scaled): ',
    "spark-fetch-model.ts at the same settings, fed with this run's connect and driver-ask times; in brackets, how far the measurement is from it.",
  );
  para(
    'projected: ',
    'the model at the real settings. Dropped connects wait the real timeout (120 s, or 10 s); refused connects keep their measured time; retryWait is 5 s.',
  );
  para('connects per lost peer: ', 'connect attempts made to the peer whose failure the task threw, before it failed for good.');
  print('Why the task gave up:');
  for (const line of renderSparkWhy(report.spark.rows)) print(line);
  print('');
  para('', `Per connect (part 1: ${report.peers} connects per case, one at a time, timeout ${report.timeoutMs} ms, no Spark logic):`);
  for (const c of report.cases) {
    const text =
      c.skipped !== undefined
        ? `skipped (${c.skipped})`
        : `${formatMs(c.p50Ms)} per peer (p50), ${formatMs(c.totalMs)} in total; ${describeCodes(c)}`;
    para(`  ${CASE_INFO[c.id].title}: `, text);
  }
  print('');
  for (const n of report.notes) para('* ', n);
  print('');
  print('Simulated here:');
  for (const s of report.simulated) para('  - ', s);
  print('A real cluster adds:');
  for (const s of report.realClusterAdds) para('  - ', s);
  if (outFile !== null) {
    print('');
    para('JSON: ', path.relative(process.cwd(), outFile) || outFile);
  }
}

const USAGE = `usage: node proof/fast-fail/run.ts [--peers K] [--timeout-ms T] [--mode auto|netns|loopback] [--out FILE]
  --peers K        lost peers per case, 1..20 (default 5)
  --timeout-ms T   client connect timeout in ms, 100..30000 (default 2000); it stands for Spark's
                   120 s, and the Spark rows scale all their settings by T / 120 s
                   (the expected run time must stay under 300 s)
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
  const log = (line: string): void => {
    for (const l of paragraph('[fast-fail] ', line)) console.error(l);
  };
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
