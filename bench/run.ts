/**
 * `npm run bench` — how far the function is from the minimum, against the Kubernetes API-server
 * emulator on loopback (test/kube-emulator). Scripts, not timed tests: prints tables and writes
 * .bench-results/bench.json so that runs can be compared. See docs/performance.md.
 *
 *   node bench/run.ts [--only sequential,constrained,curve,overhead,lifecycle,burst,coldstart,memory] [--n 1000]
 *                     [--lim-namespaces 10] [--lim-executors 50] [--curve 100,1000] [--curve-namespaces 10x100]
 *                     [--api-latency-ms 5] [--cold-runs 5] [--memory-events 10000] [--warmup 200]
 *                     [--seq-executors 100] [--seq-reps 3] [--seq-latencies 0,5,20]
 *                     [--paced-rates 5,10,20] [--paced-batches 6] [--noop-events 5000] [--large-app 1000]
 *                     [--profile] [--quick] [--out .bench-results/bench.json]
 *                     [--entry path/to/functions/executor-service/main.ts]  (e.g. another checkout)
 *
 * Everything a run writes goes into the folder of --out (created first): the JSON, the function's
 * logs (function-*.log), CPU profiles (profiles/), the module inventory. The cold start's builds
 * (dist/, bundle/, compile-cache/) always go to .bench-results/ in this checkout: the compiled
 * files resolve their packages from its node_modules.
 *
 * Exit code 1 when an assertion fails (an update that changes nothing costing an API call, an
 * event not answered 200, a Service missing…); targets missed are reported, not failures.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from './lib/procs.ts';
import { fmtMiB, fmtMs, fmtX, ratio, table } from './lib/stats.ts';
import { type ColdStartResult, runColdStart } from './sections/coldstart.ts';
import { type CurveResult, runCurve } from './sections/curve.ts';
import { type ConstrainedResult, runConstrained, TARGETS as LIM_TARGETS } from './sections/constrained.ts';
import { type LifecycleResult, runLifecycle } from './sections/lifecycle.ts';
import { type MemoryResult, runMemory } from './sections/memory.ts';
import { NO_OP_STEPS, type SequentialResult, runSequential, STEPS, TARGETS as SEQ_TARGETS } from './sections/sequential.ts';
import { type RunOptions, type VariantResult, runBareClient, runFunction } from './sections/throughput.ts';

const SECTIONS = ['sequential', 'constrained', 'curve', 'overhead', 'lifecycle', 'burst', 'coldstart', 'memory'] as const;
type Section = (typeof SECTIONS)[number];

const TARGET_RATIO = 1.2;
const TARGET_COLD_MS = 300;

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    n: { type: 'string' },
    'api-latency-ms': { type: 'string' },
    'cold-runs': { type: 'string' },
    'memory-events': { type: 'string' },
    warmup: { type: 'string' },
    'seq-executors': { type: 'string' },
    'seq-reps': { type: 'string' },
    'seq-latencies': { type: 'string' },
    'paced-rates': { type: 'string' },
    'paced-batches': { type: 'string' },
    'noop-events': { type: 'string' },
    'large-app': { type: 'string' },
    'lim-namespaces': { type: 'string' },
    'lim-executors': { type: 'string' },
    curve: { type: 'string' },
    'curve-namespaces': { type: 'string' },
    'curve-latency-ms': { type: 'string' },
    profile: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    entry: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (values.help) {
  console.log(
    'usage: node bench/run.ts [--only sequential,overhead,lifecycle,burst,coldstart,memory] [--n 1000] [--api-latency-ms 5] [--cold-runs 5] [--memory-events 10000] [--warmup 200]\n' +
      '                         [--seq-executors 100] [--seq-reps 3] [--seq-latencies 0,5,20] [--paced-rates 5,10,20] [--paced-batches 6] [--noop-events 5000] [--large-app 1000]\n' +
      '                         [--lim-namespaces 10] [--lim-executors 50] [--curve 100,1000] [--curve-namespaces 10x100] [--curve-latency-ms 0]\n' +
      '                         [--profile] [--quick] [--out FILE] [--entry MAIN_TS]',
  );
  process.exit(0);
}
const int = (text: string | undefined, fallback: number, name: string): number => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 1_000_000) {
    console.error(`bench: --${name} must be a whole number 0..1000000`);
    process.exit(2);
  }
  return n;
};
const quick = values.quick;
const N = int(values.n, quick ? 200 : 1000, 'n');
const API_LATENCY_MS = int(values['api-latency-ms'], 5, 'api-latency-ms');
const COLD_RUNS = Math.max(1, int(values['cold-runs'], quick ? 3 : 5, 'cold-runs'));
const MEMORY_EVENTS = int(values['memory-events'], quick ? 2000 : 10_000, 'memory-events');
const WARMUP = int(values.warmup, quick ? 50 : 200, 'warmup');
const SEQ_EXECUTORS = Math.max(1, int(values['seq-executors'], quick ? 20 : 100, 'seq-executors'));
const SEQ_REPS = Math.max(1, int(values['seq-reps'], quick ? 1 : 3, 'seq-reps'));
const list = (text: string | undefined, fallback: readonly number[], name: string): number[] =>
  text === undefined ? [...fallback] : text.split(',').map((x) => int(x.trim(), 0, name));
const SEQ_LATENCIES = list(values['seq-latencies'], [0, 5, 20], 'seq-latencies');
const PACED_RATES = list(values['paced-rates'], [5, 10, 20], 'paced-rates').filter((r) => r > 0);
const PACED_BATCHES = int(values['paced-batches'], quick ? 2 : 6, 'paced-batches');
const NOOP_EVENTS = Math.max(1, int(values['noop-events'], quick ? 1000 : 5000, 'noop-events'));
const LARGE_APP = int(values['large-app'], quick ? 200 : 1000, 'large-app');
const LIM_NAMESPACES = Math.max(1, int(values['lim-namespaces'], 10, 'lim-namespaces'));
const LIM_EXECUTORS = Math.max(1, int(values['lim-executors'], quick ? 10 : 50, 'lim-executors'));
const CURVE_SIZES = list(values.curve, quick ? [100, 300] : [100, 1000], 'curve').filter((x) => x > 0);
const CURVE_NS = (() => {
  const text = values['curve-namespaces'] ?? (quick ? '10x20' : '10x100');
  const m = /^(\d+)x(\d+)$/.exec(text);
  if (m === null) {
    console.error('bench: --curve-namespaces must be <namespaces>x<executors>, e.g. 10x500');
    process.exit(2);
  }
  return { namespaces: Number(m[1]), perNamespace: Number(m[2]) };
})();
const CURVE_LATENCY_MS = int(values['curve-latency-ms'], 0, 'curve-latency-ms');
const only = new Set<Section>(
  values.only === undefined
    ? SECTIONS
    : values.only.split(',').map((s) => {
        const name = s.trim() as Section;
        if (!SECTIONS.includes(name)) {
          console.error(`bench: unknown section ${JSON.stringify(s)} (sections: ${SECTIONS.join(', ')})`);
          process.exit(2);
        }
        return name;
      }),
);
const OUT = resolve(values.out ?? join(REPO_ROOT, '.bench-results', 'bench.json'));
const ENTRY = values.entry ?? join(REPO_ROOT, 'functions', 'executor-service', 'main.ts');
/** Where this run's files go; created before anything writes into it (a fresh clone has no .bench-results). */
const RESULTS_DIR = dirname(OUT);
const PROFILE_DIR = join(RESULTS_DIR, 'profiles');
mkdirSync(RESULTS_DIR, { recursive: true });

const log = (line: string): void => console.log(line);
const failures: string[] = [];
const startedAt = new Date();
/** The commit measured (and whether the tree had changes on top of it). */
const commit = (() => {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout.trim() || 'unknown';
  const dirty =
    spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout.trim() !== '';
  return dirty ? `${head} + uncommitted changes` : head;
})();
const loadBefore = os.loadavg();
const t0 = performance.now();

log(
  `spark-exec-svc bench — code of ${commit}, ${startedAt.toISOString()}, node ${process.version}, ${os.cpus().length} CPU(s) ${os.cpus()[0]?.model ?? ''}, load ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
);
log(`N=${N}, warm-up ${WARMUP}, sections: ${[...only].join(', ')}${values.entry === undefined ? '' : `, entry ${ENTRY}`}\n`);

// ---- 1. sequential ----------------------------------------------------------------------------
let sequential: SequentialResult | undefined;
if (only.has('sequential')) {
  log(
    `1. Sequential, as users see it: the adapter's one-at-a-time sender, apps of ${SEQ_EXECUTORS} executors at ${SEQ_LATENCIES.join('/')} ms per API call (${SEQ_REPS} run(s) each), vs a sequential client-node floor`,
  );
  sequential = await runSequential({
    entry: ENTRY,
    resultsDir: RESULTS_DIR,
    profileDir: PROFILE_DIR,
    latenciesMs: SEQ_LATENCIES,
    executors: SEQ_EXECUTORS,
    reps: SEQ_REPS,
    pacedRates: PACED_RATES,
    pacedBatches: PACED_BATCHES,
    noopEvents: NOOP_EVENTS,
    largeApp: LARGE_APP,
    profile: values.profile,
    log,
  });
  failures.push(...sequential.failures);
  log('');
}

// ---- 1b. under the container's limits --------------------------------------------------------
let constrained: ConstrainedResult | undefined;
if (only.has('constrained')) {
  log(
    `1b. Under the container's limits: the bundle inside the manifest's CPU quota and memory limit, and without; ${LIM_NAMESPACES} namespaces × ${LIM_EXECUTORS} executors at once`,
  );
  constrained = await runConstrained({
    resultsDir: RESULTS_DIR,
    namespaces: LIM_NAMESPACES,
    executors: LIM_EXECUTORS,
    coldRuns: COLD_RUNS,
    noopEvents: NOOP_EVENTS,
    log,
  });
  failures.push(...constrained.failures);
  log('');
}

// ---- 1c. the scale curve ---------------------------------------------------------------------
let curve: CurveResult | undefined;
if (only.has('curve')) {
  log(
    `1c. Scale curve: API calls and ms per executor at ${CURVE_SIZES.join(' / ')} executors in one namespace and ${CURVE_NS.namespaces} × ${CURVE_NS.perNamespace}, ${CURVE_LATENCY_MS} ms per call`,
  );
  curve = await runCurve({
    entry: ENTRY,
    resultsDir: RESULTS_DIR,
    sizes: CURVE_SIZES,
    namespaces: CURVE_NS.namespaces,
    perNamespace: CURVE_NS.perNamespace,
    latencyMs: CURVE_LATENCY_MS,
    log,
  });
  failures.push(...curve.failures);
  log('');
}

// ---- 2. overhead ---------------------------------------------------------------------------
interface OverheadPair {
  readonly concurrency: number;
  readonly apiLatencyMs: number;
  readonly floor: VariantResult;
  readonly floorReuse: VariantResult | undefined;
  readonly fn: VariantResult;
}
const overhead: OverheadPair[] = [];
function checkVariant(name: string, r: VariantResult, n: number): void {
  if (r.errors > 0) failures.push(`${name}: ${r.errors} of ${n} not answered as expected`);
  if (r.servicesCreated !== n) failures.push(`${name}: ${r.servicesCreated} Services exist, expected ${n}`);
  // Inbound keep-alive connections (≤ c) + pooled API connections (≤ 2c: a busy one is only freed
  // once its body is read) + a few. Without reuse they pile up: one per API call for ~4 s.
  if (r.openSockets !== undefined && r.openSockets > 4 * r.concurrency + 16) {
    failures.push(
      `${name}: the function holds ${r.openSockets} sockets after ${n} events at concurrency ${r.concurrency}: API connections are not being reused`,
    );
  }
  if (r.apiCalls['create'] !== n)
    failures.push(`${name}: ${r.apiCalls['create'] ?? 0} creates, expected ${n} (all API calls: ${JSON.stringify(r.apiCalls)})`);
}
async function pair(concurrency: number, n: number, apiLatencyMs: number, withReuse: boolean, profile: boolean): Promise<OverheadPair> {
  const base: RunOptions = { n, concurrency, warmup: WARMUP, entry: ENTRY, apiLatencyMs, resultsDir: RESULTS_DIR, log };
  const label = `c=${concurrency}${apiLatencyMs > 0 ? `, +${apiLatencyMs} ms API latency` : ''}`;
  const floor = await runBareClient(base);
  checkVariant(`floor (${label})`, floor, n);
  const fn = await runFunction({ ...base, profileDir: profile ? PROFILE_DIR : undefined });
  checkVariant(`function (${label})`, fn, n);
  const floorReuse = withReuse ? await runBareClient({ ...base, reuseConnections: true }) : undefined;
  if (floorReuse !== undefined) checkVariant(`floor+reuse (${label})`, floorReuse, n);
  log(
    `  ${label.padEnd(28)} p50 ${fmtMs(fn.latency.p50Ms)} vs ${fmtMs(floor.latency.p50Ms)} ms (${fmtX(ratio(fn.latency.p50Ms, floor.latency.p50Ms))}), ` +
      `p99 ${fmtMs(fn.latency.p99Ms)} vs ${fmtMs(floor.latency.p99Ms)} ms, ${fn.latency.perSecond} vs ${floor.latency.perSecond} /s`,
  );
  return { concurrency, apiLatencyMs, floor, floorReuse, fn };
}

if (only.has('overhead')) {
  log('2. Overhead per event: function (HTTP in → Service created) vs bare client-node createNamespacedService');
  overhead.push(await pair(1, N, 0, true, values.profile));
  overhead.push(await pair(16, N, 0, true, false));
  if (API_LATENCY_MS > 0) {
    overhead.push(await pair(1, Math.max(50, Math.round(N / 2)), API_LATENCY_MS, false, false));
    overhead.push(await pair(16, N, API_LATENCY_MS, false, false));
  }
  log('');
}

// ---- 3. lifecycle --------------------------------------------------------------------------
let lifecycle: LifecycleResult | undefined;
if (only.has('lifecycle')) {
  log('3. API calls per executor lifecycle (events as Kubernetes emits them; one executor, and apps of 20 delivered in batch and paced)');
  lifecycle = await runLifecycle({ entry: ENTRY, resultsDir: RESULTS_DIR, log });
  failures.push(...lifecycle.failures);
  log('');
}

// ---- 4. burst ------------------------------------------------------------------------------
let burst: OverheadPair | undefined;
if (only.has('burst')) {
  log(`4. Burst: ${N} executors at once, concurrency 64`);
  burst = await pair(64, N, 0, true, false);
  log('');
}

// ---- 5. cold start -------------------------------------------------------------------------
let cold: ColdStartResult | undefined;
if (only.has('coldstart')) {
  log(`5. Cold start: spawn → first event answered (median of ${COLD_RUNS})`);
  cold = await runColdStart({ runs: COLD_RUNS, resultsDir: RESULTS_DIR, log });
  failures.push(...cold.failures);
  for (const v of cold.variants)
    log(
      `  ${v.name.padEnd(52)} listening ${v.medianListeningMs} ms, first answer ${v.medianFirstAnswerMs} ms${v.error === undefined ? '' : ` (${v.error})`}`,
    );
  log('');
}

// ---- 6. memory -----------------------------------------------------------------------------
let memory: MemoryResult | undefined;
if (only.has('memory')) {
  log(`6. Memory: RSS over ${MEMORY_EVENTS} events`);
  memory = await runMemory({ entry: ENTRY, events: MEMORY_EVENTS, resultsDir: RESULTS_DIR, log });
  failures.push(...memory.failures);
  log(
    `  heap after GC ${memory.samples
      .filter((s) => s.events % 5000 === 0 || s.events === 1000)
      .map((s) => `${s.events / 1000}k: ${fmtMiB(s.heapUsedKiB)}`)
      .join(', ')}`,
  );
  log('');
}

// ---- report --------------------------------------------------------------------------------
const totalMs = performance.now() - t0;
const loadAfter = os.loadavg();
const ratioRows: string[][] = [];
const meets = (x: number, target: number): string => (x <= target ? 'yes' : 'no');
/** A call count or average: whole numbers as they are, averages to 2 decimals. */
const fmtCalls = (x: number): string => (Number.isInteger(x) ? String(x) : x.toFixed(2));
if (sequential !== undefined) {
  const n = sequential.executors;
  const atTarget = (lat: number): boolean => lat === SEQ_TARGETS.atLatencyMs;
  const fairTarget = (lat: number): boolean => (SEQ_TARGETS.fairRatioAtLatenciesMs as readonly number[]).includes(lat);
  for (const part of ['scale-up', 'teardown'] as const) {
    for (const r of sequential.latencies) {
      const m = r.median;
      const [fn, fair, x, seqX] =
        part === 'scale-up'
          ? [m.scaleUpMs, m.fairScaleUpMs, m.fairScaleUpRatio, m.scaleUpRatio]
          : [m.teardownMs, m.fairTeardownMs, m.fairTeardownRatio, m.teardownRatio];
      ratioRows.push([
        `${part} vs fair floor, ${n} executors, ${r.latencyMs} ms/call${fairTarget(r.latencyMs) ? ` (≤ ${SEQ_TARGETS.fairRatio}×)` : ''}`,
        `${fmtMs(fn)} ms`,
        `${fmtMs(fair)} ms`,
        fmtX(x),
        `sequential floor ${fmtX(seqX)}`,
        fairTarget(r.latencyMs) ? meets(x, SEQ_TARGETS.fairRatio) : '-',
      ]);
    }
  }
  for (const r of sequential.latencies) {
    const m = r.median;
    ratioRows.push([
      `(secondary) scale-up vs sequential floor, ${n} executors × 5 events, ${r.latencyMs} ms/call${atTarget(r.latencyMs) ? ` (≤ ${SEQ_TARGETS.scaleUpRatio}×)` : ''}`,
      `${fmtMs(m.scaleUpMs)} ms`,
      `${fmtMs(m.floorCreateMs)} ms`,
      fmtX(m.scaleUpRatio),
      '',
      atTarget(r.latencyMs) ? meets(m.scaleUpRatio, SEQ_TARGETS.scaleUpRatio) : '-',
    ]);
  }
  for (const r of sequential.latencies) {
    const m = r.median;
    ratioRows.push([
      `(secondary) teardown vs sequential floor, ${n} executors, ${r.latencyMs} ms/call${atTarget(r.latencyMs) ? ` (≤ ${SEQ_TARGETS.teardownRatio}×)` : ''}`,
      `${fmtMs(m.teardownMs)} ms`,
      `${fmtMs(m.floorDeleteMs)} ms`,
      fmtX(m.teardownRatio),
      '',
      atTarget(r.latencyMs) ? meets(m.teardownRatio, SEQ_TARGETS.teardownRatio) : '-',
    ]);
  }
  for (const p of sequential.perExecutor) {
    ratioRows.push([
      `API calls per executor, three-event termination, ${p.latencyMs} ms/call`,
      fmtCalls(p.termination),
      `target ${SEQ_TARGETS.terminationCalls}`,
      '',
      '',
      meets(p.termination, SEQ_TARGETS.terminationCalls),
    ]);
  }
  if (sequential.longestEvent !== undefined) {
    ratioRows.push([
      `longest single event, ${SEQ_TARGETS.atLatencyMs} ms/call`,
      `${fmtMs(sequential.longestEvent.ms)} ms`,
      `target ${SEQ_TARGETS.maxEventMs} ms`,
      fmtX(sequential.longestEvent.ms / SEQ_TARGETS.maxEventMs),
      '',
      meets(sequential.longestEvent.ms, SEQ_TARGETS.maxEventMs),
    ]);
  }
  if (sequential.noop !== undefined) {
    ratioRows.push([
      `no-op update: API calls (${sequential.noop.events} events)`,
      String(sequential.noop.calls),
      'target 0',
      '',
      '',
      sequential.noop.calls === 0 ? 'yes' : 'no',
    ]);
    ratioRows.push([
      `no-op update: function CPU per event`,
      `${sequential.noop.cpuMsPerEvent} ms`,
      `target ${SEQ_TARGETS.noopCpuMs} ms`,
      fmtX(sequential.noop.cpuMsPerEvent / SEQ_TARGETS.noopCpuMs),
      '',
      meets(sequential.noop.cpuMsPerEvent, SEQ_TARGETS.noopCpuMs),
    ]);
  }
  for (const p of sequential.paced) {
    ratioRows.push([
      `paced ${p.podsPerSecond} pods/s, ${p.latencyMs} ms/call: pod created → Service, p99`,
      `${fmtMs(p.lagMs.p99)} ms`,
      '-',
      '',
      '',
      '-',
    ]);
  }
}
if (constrained !== undefined) {
  for (const m of constrained.modes) {
    const lim = m.mode === 'constrained';
    const tag = lim ? `under ${constrained.manifest.cpuText}` : 'unconstrained';
    const judge = (ok: boolean): string => (lim ? (ok ? 'yes' : 'no') : '-');
    ratioRows.push([
      `${tag}: cold start → first answer (bundle)${lim ? ` (≤ ${LIM_TARGETS.coldStartMs} ms)` : ''}`,
      `${m.coldStart.medianMs} ms`,
      lim ? `target ${LIM_TARGETS.coldStartMs} ms` : '-',
      lim ? fmtX(m.coldStart.medianMs / LIM_TARGETS.coldStartMs) : '',
      '',
      judge(m.coldStart.medianMs <= LIM_TARGETS.coldStartMs),
    ]);
    const n = m.namespaces;
    ratioRows.push([
      `${tag}: longest event, ${n.namespaces} namespaces at once, ${LIM_TARGETS.latencyMs} ms/call${lim ? ` (≤ ${LIM_TARGETS.longestEventMs} ms)` : ''}`,
      `${fmtMs(n.longestEventMs)} ms`,
      lim ? `target ${LIM_TARGETS.longestEventMs} ms` : '-',
      lim ? fmtX(n.longestEventMs / LIM_TARGETS.longestEventMs) : '',
      '',
      judge(n.longestEventMs <= LIM_TARGETS.longestEventMs),
    ]);
    ratioRows.push([
      `${tag}: attempts answered 503 (API server healthy), ${n.events} events${lim ? ' (0)' : ''}`,
      String(n.answered503),
      lim ? 'target 0' : '-',
      '',
      '',
      judge(n.answered503 === 0),
    ]);
    ratioRows.push([
      `${tag}: pods/s, ${n.namespaces} namespaces, ${LIM_TARGETS.latencyMs} ms/call${lim ? ` (≥ ${LIM_TARGETS.podsPerSecond})` : ''}`,
      String(n.podsPerSecond),
      lim ? `target ${LIM_TARGETS.podsPerSecond}` : '-',
      '',
      '',
      judge(n.podsPerSecond >= LIM_TARGETS.podsPerSecond),
    ]);
    ratioRows.push([
      `${tag}: no-op update CPU vs bare sink, ${m.noop.bodyBytes} B bodies${lim ? '' : ` (≤ ${LIM_TARGETS.noopVsSink}×)`}`,
      `${m.noop.fn.cpuMsPerEvent} ms`,
      `${m.noop.sink.cpuMsPerEvent} ms`,
      fmtX(m.noop.ratio),
      '',
      lim ? '-' : meets(m.noop.ratio, LIM_TARGETS.noopVsSink),
    ]);
  }
}
for (const p of overhead) {
  const label = `c=${p.concurrency}${p.apiLatencyMs > 0 ? `, +${p.apiLatencyMs} ms/API call` : ''}`;
  const r50 = ratio(p.fn.latency.p50Ms, p.floor.latency.p50Ms);
  const r99 = ratio(p.fn.latency.p99Ms, p.floor.latency.p99Ms);
  ratioRows.push([
    `per event p50, ${label}`,
    `${fmtMs(p.fn.latency.p50Ms)} ms`,
    `${fmtMs(p.floor.latency.p50Ms)} ms`,
    fmtX(r50),
    p.floorReuse === undefined ? '' : fmtX(ratio(p.fn.latency.p50Ms, p.floorReuse.latency.p50Ms)),
    meets(r50, TARGET_RATIO),
  ]);
  ratioRows.push([
    `per event p99, ${label}`,
    `${fmtMs(p.fn.latency.p99Ms)} ms`,
    `${fmtMs(p.floor.latency.p99Ms)} ms`,
    fmtX(r99),
    p.floorReuse === undefined ? '' : fmtX(ratio(p.fn.latency.p99Ms, p.floorReuse.latency.p99Ms)),
    meets(r99, TARGET_RATIO),
  ]);
}
if (burst !== undefined) {
  const r = ratio(burst.fn.latency.wallMs, burst.floor.latency.wallMs);
  ratioRows.push([
    `burst: ${N} Services exist (c=64)`,
    `${fmtMs(burst.fn.latency.wallMs)} ms`,
    `${fmtMs(burst.floor.latency.wallMs)} ms`,
    fmtX(r),
    burst.floorReuse === undefined ? '' : fmtX(ratio(burst.fn.latency.wallMs, burst.floorReuse.latency.wallMs)),
    meets(r, TARGET_RATIO),
  ]);
}
if (lifecycle !== undefined) {
  for (const s of lifecycle.scenarios) {
    const perExecutor = s.perExecutor.total;
    const resource = s.mode === 'resource';
    ratioRows.push([
      `API calls per executor lifecycle (${s.scenario})`,
      fmtCalls(perExecutor),
      resource ? `target ${lifecycle.target}` : '-',
      resource ? fmtX(perExecutor / lifecycle.target) : '',
      '',
      resource ? meets(perExecutor, lifecycle.target) : '-',
    ]);
  }
}
if (cold !== undefined) {
  for (const v of cold.variants.filter((x) => !x.informational)) {
    ratioRows.push([
      `cold start → first answer, ${v.name.split(':')[0]}`,
      `${v.medianFirstAnswerMs} ms`,
      `target ${TARGET_COLD_MS} ms`,
      fmtX(v.medianFirstAnswerMs / TARGET_COLD_MS),
      '',
      meets(v.medianFirstAnswerMs, TARGET_COLD_MS),
    ]);
  }
}
if (memory !== undefined) {
  const first = memory.samples.find((m) => m.events === 1000);
  const last = memory.samples[memory.samples.length - 1];
  if (first !== undefined && last !== undefined && last !== first) {
    const k = `${last.events / 1000}k vs 1k events`;
    ratioRows.push([
      `live heap after GC, ${k}`,
      fmtMiB(last.heapUsedKiB),
      fmtMiB(first.heapUsedKiB),
      fmtX(last.heapUsedKiB / first.heapUsedKiB),
      '',
      '-',
    ]);
    ratioRows.push([`RSS (after GC), ${k}`, fmtMiB(last.rssKiB), fmtMiB(first.rssKiB), fmtX(last.rssKiB / first.rssKiB), '', '-']);
  }
}

log(`=== Summary (one run, ${(totalMs / 1000).toFixed(0)} s; load ${loadBefore[0]!.toFixed(2)} → ${loadAfter[0]!.toFixed(2)}) ===\n`);
log(table(['measure', 'function', 'floor / target', 'ratio', 'vs floor+reuse', `≤ target`], ratioRows));

if (sequential !== undefined) printSequential(sequential);
if (curve !== undefined && curve.points.length > 0) {
  const base = curve.points[0]!;
  const vs = (x: number, b: number): string => (b > 0 ? fmtX(x / b) : '-');
  log(
    `\nScale curve (${curve.latencyMs} ms per API call; code of ${commit}; a fresh function per row, WATCH_NAMESPACES = the row's namespaces; per executor: scale-up = its add and 4 updates, teardown = its 3 termination events and its share of the driver's; "×" against the first row):`,
  );
  log(
    table(
      [
        'executors',
        'scale-up calls',
        'scale-up ms',
        'teardown calls',
        'teardown ms',
        'longest event',
        'longest teardown',
        'retried attempts',
        'Services left after driver end',
        'MAX_SERVICES_PER_NAMESPACE',
      ],
      curve.points.map((p) => [
        p.label,
        `${p.scaleUpCallsPerExecutor} (${vs(p.scaleUpCallsPerExecutor, base.scaleUpCallsPerExecutor)})`,
        `${p.scaleUpMsPerExecutor} (${vs(p.scaleUpMsPerExecutor, base.scaleUpMsPerExecutor)})`,
        `${p.teardownCallsPerExecutor} (${vs(p.teardownCallsPerExecutor, base.teardownCallsPerExecutor)})`,
        `${p.teardownMsPerExecutor} (${vs(p.teardownMsPerExecutor, base.teardownMsPerExecutor)})`,
        `${fmtMs(p.longestEventMs)} ms`,
        `${(p.teardownMs / 1000).toFixed(1)} s`,
        Object.entries(p.retried)
          .map(([k, v]) => `${v}× ${k}`)
          .join(', ') || '0',
        String(p.servicesLeft),
        p.maxServicesPerNamespace,
      ]),
    ),
  );
}
if (constrained !== undefined) {
  log(
    `\nUnder the container's limits (knative/base/service.yaml: limits.cpu ${constrained.manifest.cpuText}, limits.memory ${constrained.manifest.memoryText}; the bundle, start.cjs; ${constrained.cgroup}):`,
  );
  log(
    table(
      [
        'mode',
        'cold start ms (runs)',
        `longest event (${constrained.modes[0]?.namespaces.namespaces ?? 0} ns at once)`,
        'event p99',
        'retried attempts',
        'pods/s',
        'fn CPU ms/event',
        'no-op CPU fn / sink',
        'throttled',
        'peak memory',
      ],
      constrained.modes.map((m) => [
        m.mode,
        `${m.coldStart.medianMs} (${m.coldStart.runsMs.join(' ')}); CPU ${m.coldStart.cpuMs}`,
        `${fmtMs(m.namespaces.longestEventMs)} ms (${m.namespaces.longestEvent})`,
        `${fmtMs(m.namespaces.eventP99Ms)} ms`,
        Object.entries(m.namespaces.retried)
          .map(([k, v]) => `${v}× ${k}`)
          .join(', ') || '0',
        String(m.namespaces.podsPerSecond),
        String(m.namespaces.cpuMsPerEvent),
        `${m.noop.fn.cpuMsPerEvent} / ${m.noop.sink.cpuMsPerEvent} ms (${fmtX(m.noop.ratio)})`,
        m.throttled === undefined ? '-' : `${m.throttled.throttledPeriods}/${m.throttled.periods} periods, ${m.throttled.throttledMs} ms`,
        m.peakMemoryMiB === undefined ? '-' : `${m.peakMemoryMiB} MiB`,
      ]),
    ),
  );
}
if (overhead.length > 0 || burst !== undefined) {
  log('\nWhere the CPU goes (ms of CPU per event, per process; 10 ms clock resolution over the run):');
  const rows: string[][] = [];
  for (const p of [...overhead, ...(burst === undefined ? [] : [burst])]) {
    const label = `c=${p.concurrency}${p.apiLatencyMs > 0 ? ` +${p.apiLatencyMs}ms` : ''}`;
    for (const v of [p.floor, p.floorReuse, p.fn]) {
      if (v === undefined) continue;
      const calls = Object.entries(v.apiCalls)
        .map(([verb, c]) => `${(c / v.latency.n).toFixed(2)} ${verb}`)
        .join(', ');
      rows.push([
        label,
        v.variant,
        fmtMs(v.latency.p50Ms),
        fmtMs(v.latency.p99Ms),
        String(v.latency.perSecond),
        calls,
        String(v.cpuMsPerEvent.sender),
        v.cpuMsPerEvent.function === undefined ? '-' : String(v.cpuMsPerEvent.function),
        String(v.cpuMsPerEvent.emulator),
        v.openSockets === undefined ? '' : String(v.openSockets),
      ]);
    }
  }
  log(
    table(
      ['run', 'variant', 'p50 ms', 'p99 ms', 'events/s', 'API calls/event', 'CPU sender', 'CPU function', 'CPU emulator', 'fn sockets'],
      rows,
    ),
  );
}
const profiled = overhead.find((p) => p.fn.profile !== undefined)?.fn.profile;
if (profiled !== undefined) {
  log(`\nCPU profile of the function, timed part only (c=1; ${profiled.totalMs} ms busy):`);
  log(
    table(
      ['group (self time)', 'ms', '%'],
      profiled.groups.map((g) => [g.group, String(g.ms), String(g.share)]),
    ),
  );
  log(
    table(
      ['function (self time)', 'ms', '%'],
      profiled.functions.map((g) => [g.fn, String(g.ms), String(g.share)]),
    ),
  );
}
if (lifecycle !== undefined) {
  const scenarios = lifecycle.scenarios;
  // Step order of the scenario with the most steps (a one-executor app has no "later executors").
  const longest = [...scenarios].sort((a, b) => b.steps.length - a.steps.length)[0];
  const stepNames = [...new Set([...(longest?.steps ?? []), ...scenarios.flatMap((s) => s.steps)].map((st) => st.step))];
  log(
    "\nAPI calls per event, per step (emulator request log; a step of n events shows its total / n; the sweep: its calls in the scenario's namespace, all its events together):",
  );
  log(
    table(
      ['step', ...scenarios.map((s) => s.scenario)],
      stepNames.map((name) => [
        name,
        ...scenarios.map((s) => {
          const st = s.steps.find((x) => x.step === name);
          if (st === undefined) return '-';
          const per = st.total / st.events;
          const check = st.mustBeZero ? (st.total === 0 ? ' ✓0' : ' FAILED') : '';
          // The sweep's events are shared by every scenario: its whole step is shown.
          if (st.part === 'cool-down end') return fmtCalls(st.total);
          return `${fmtCalls(per)}${st.events > 1 ? ` (${st.total}/${st.events})` : ''}${check}`;
        }),
      ]),
    ),
  );
  log('\nPer executor lifecycle (step totals / executors; ✓0 = asserted zero):');
  log(
    table(
      [
        'scenario',
        'add',
        'updates',
        'termination (3 events)',
        'cool-down end (sweep)',
        'driver (add, end)',
        'total',
        `≤ ${lifecycle.target}`,
      ],
      scenarios.map((s) => {
        const p = s.perExecutor;
        return [
          s.scenario,
          fmtCalls(p.add),
          fmtCalls(p.update),
          fmtCalls(p.termination),
          fmtCalls(p['cool-down end']),
          fmtCalls(p.driver),
          fmtCalls(p.total),
          s.mode === 'resource' ? meets(p.total, lifecycle.target) : '-',
        ];
      }),
    ),
  );
  log('\nWhat the calls were, per step (totals; replies by type):');
  const rows: string[][] = [];
  for (const s of scenarios) {
    for (const st of s.steps) {
      const calls =
        Object.entries(st.calls)
          .map(([k, n]) => `${n} ${k}`)
          .join(', ') || '0';
      const replies = Object.entries(st.replies)
        .map(([k, n]) => (st.events > 1 ? `${n} ${k}` : k))
        .join(', ');
      rows.push([s.scenario, st.step, String(st.events), replies, calls, String(st.total)]);
    }
  }
  log(table(['scenario', 'step', 'events', 'replies', 'calls', 'total'], rows));
}
if (cold !== undefined) {
  log('\nCold start (median; * = informational, not what the project ships):');
  log(
    table(
      ['variant', 'listening ms', 'first answer ms', 'runs (first answer)'],
      cold.variants.map((v) => [
        `${v.informational ? '* ' : ''}${v.name}`,
        String(v.medianListeningMs),
        String(v.medianFirstAnswerMs),
        v.error ?? v.runs.map((r) => Math.round(r.firstAnswerMs)).join(' '),
      ]),
    ),
  );
  if (cold.loaded !== undefined) {
    log(
      `Loaded before the first answer (ts entry): ${cold.loaded.modules} module files, ${cold.loaded.kiB} KiB of source, ${cold.loaded.builtins} node builtins/bindings`,
    );
    log(
      table(
        ['package', 'modules', 'KiB'],
        cold.loaded.byPackage.slice(0, 12).map((p) => [p.package, String(p.modules), String(p.kiB)]),
      ),
    );
  }
  log(
    `Import time in a fresh process (median of ${Math.min(3, COLD_RUNS)}): ${Object.entries(cold.importMs)
      .map(([k, v]) => `${k} ${v} ms`)
      .join(', ')}`,
  );
}
if (memory !== undefined) {
  log(
    `\nMemory (function process; full GC through the inspector at each checkpoint, RSS from /proc; ${memory.events} events over ${memory.apps} apps × ${memory.executorsPerApp} executors; start ${fmtMiB(memory.startRssKiB)}):`,
  );
  log(
    table(
      ['events', 'live heap after GC', 'external', 'RSS after GC', 'peak RSS'],
      memory.samples.map((s) => [String(s.events), fmtMiB(s.heapUsedKiB), fmtMiB(s.externalKiB), fmtMiB(s.rssKiB), fmtMiB(s.hwmKiB)]),
    ),
  );
  log(
    table(
      ['cache', 'capacity', 'inserted', 'size after', 'bytes/entry', 'ceiling'],
      memory.caches.map((c) => [
        c.name,
        String(c.capacity),
        String(c.inserted),
        String(c.sizeAfter),
        String(c.bytesPerEntry),
        `${c.ceilingMiB} MiB`,
      ]),
    ),
  );
}

function printSequential(seq: SequentialResult): void {
  const n = seq.executors;
  const pps = (count: number, ms: number): string => (ms > 0 ? String(Math.round((count / ms) * 1000)) : '-');
  log(
    `\nFair floor (median of ${seq.reps}; the least an event-driven design can take for the same application): the writes — batch after batch, the list of the batch's pods, then its ${seq.batchSize} creates with ${seq.concurrency} in flight (the function's own concurrency, shared/engine/observe.ts); for the teardown one list of the ended executors and every Service's cool-down mark, then one list of the app's Services and every delete, ${seq.concurrency} at a time — plus the delivery of the same events (same bodies, same sender, one at a time) to a bare node:http server answering 200. Old sequential floor (one write after another) for comparison:`,
  );
  log(
    table(
      [
        'ms/call',
        'part',
        'function',
        'batch writes',
        'bare delivery',
        'fair floor',
        `ratio (≤ ${SEQ_TARGETS.fairRatio} at ${SEQ_TARGETS.fairRatioAtLatenciesMs.join('/')} ms)`,
        'ratios per run',
        'sequential floor, ratio',
      ],
      seq.latencies.flatMap((r) => {
        const m = r.median;
        return [
          [
            String(r.latencyMs),
            `scale-up (${n * 5} events)`,
            `${fmtMs(m.scaleUpMs)} ms`,
            `${fmtMs(m.batchCreateMs)} ms`,
            `${fmtMs(m.deliveryScaleUpMs)} ms`,
            `${fmtMs(m.fairScaleUpMs)} ms`,
            fmtX(m.fairScaleUpRatio),
            r.apps.map((a, i) => (a.scaleUpMs / (r.floors[i]!.batchCreateMs + r.floors[i]!.deliveryScaleUpMs)).toFixed(2)).join(' '),
            `${fmtMs(m.floorCreateMs)} ms, ${fmtX(m.scaleUpRatio)}`,
          ],
          [
            String(r.latencyMs),
            `teardown (${n * 3 + 2} events)`,
            `${fmtMs(m.teardownMs)} ms`,
            `${fmtMs(m.batchDeleteMs)} ms`,
            `${fmtMs(m.deliveryTeardownMs)} ms`,
            `${fmtMs(m.fairTeardownMs)} ms`,
            fmtX(m.fairTeardownRatio),
            r.apps.map((a, i) => (a.teardownMs / (r.floors[i]!.batchDeleteMs + r.floors[i]!.deliveryTeardownMs)).toFixed(2)).join(' '),
            `${fmtMs(m.floorDeleteMs)} ms, ${fmtX(m.teardownRatio)}`,
          ],
        ];
      }),
    ),
  );
  log(
    `\nSequential scale-up (median of ${seq.reps}; ${n} executors in batches of ${seq.batchSize}, each batch: adds, then scheduled, creating, running, ready updates; busy time of the namespace's stream; floor: ${n} createNamespacedService one after another):`,
  );
  log(
    table(
      [
        'ms/call',
        'scale-up, 5 events/executor',
        'last Service exists',
        'floor: creates',
        'ratio scale-up',
        'ratio last Service',
        'pods/s (fn / floor)',
        'events/s',
        'fn CPU ms/event',
        'ratios per run',
        '(floor+reuse, ratio)',
      ],
      seq.latencies.map((r) => {
        const m = r.median;
        const events = n * 5;
        return [
          String(r.latencyMs),
          `${fmtMs(m.scaleUpMs)} ms`,
          `${fmtMs(m.lastServiceMs)} ms`,
          `${fmtMs(m.floorCreateMs)} ms`,
          fmtX(m.scaleUpRatio),
          fmtX(m.lastServiceRatio),
          `${pps(n, m.scaleUpMs)} / ${pps(n, m.floorCreateMs)}`,
          pps(events, m.scaleUpMs),
          String(m.scaleUpCpuMsPerEvent),
          r.apps.map((a, i) => (a.scaleUpMs / r.floors[i]!.createMs).toFixed(2)).join(' '),
          `${fmtMs(m.reuseCreateMs)} ms, ${fmtX(m.scaleUpMs / m.reuseCreateMs)}`,
        ];
      }),
    ),
  );
  log(
    `\nSequential teardown (median of ${seq.reps}; deletionTimestamp, phase Failed and delete for every executor, then the driver's Succeeded and delete; floor: ${n} deleteNamespacedService one after another):`,
  );
  log(
    table(
      [
        'ms/call',
        'teardown',
        'Services gone (after driver Succeeded)',
        'floor: deletes',
        'ratio teardown',
        'events/s',
        'fn CPU ms/event',
        'ratios per run',
        '(floor+reuse, ratio)',
      ],
      seq.latencies.map((r) => {
        const m = r.median;
        return [
          String(r.latencyMs),
          `${fmtMs(m.teardownMs)} ms`,
          `${fmtMs(m.servicesGoneMs)} ms`,
          `${fmtMs(m.floorDeleteMs)} ms`,
          fmtX(m.teardownRatio),
          pps(n * 3 + 2, m.teardownMs),
          String(m.teardownCpuMsPerEvent),
          r.apps.map((a, i) => (a.teardownMs / r.floors[i]!.deleteMs).toFixed(2)).join(' '),
          `${fmtMs(m.reuseDeleteMs)} ms, ${fmtX(m.teardownMs / m.reuseDeleteMs)}`,
        ];
      }),
    ),
  );
  log("\nWhere the stream's time goes: mean ms per executor by group of steps (all runs), against the floor's one write per executor:");
  const groups = Object.keys(seq.latencies[0]?.timePerExecutor ?? {});
  log(
    table(
      ['group of steps', ...seq.latencies.map((r) => `${r.latencyMs} ms/call`)],
      [
        ...groups.map((g) => [g, ...seq.latencies.map((r) => fmtMs(r.timePerExecutor[g] ?? 0))]),
        ['floor: one create', ...seq.latencies.map((r) => fmtMs(r.median.floorCreateMs / n))],
        ['floor: one delete', ...seq.latencies.map((r) => fmtMs(r.median.floorDeleteMs / n))],
        ['(floor+reuse: one create)', ...seq.latencies.map((r) => fmtMs(r.median.reuseCreateMs / n))],
        ['(floor+reuse: one delete)', ...seq.latencies.map((r) => fmtMs(r.median.reuseDeleteMs / n))],
      ],
    ),
  );
  log("\nAPI calls per event, by step of an executor's life (all runs; ✓0 = asserted zero):");
  // The steps the section asserts cost no call (one list, in sequential.ts).
  const noOp: ReadonlySet<string> = NO_OP_STEPS;
  const at = (lat: number, step: string) => seq.steps.find((s) => s.latencyMs === lat)?.stats.find((x) => x.step === step);
  const lats = seq.steps.map((s) => s.latencyMs);
  const top = lats[lats.length - 1];
  log(
    table(
      ['step', 'events/run', ...lats.map((l) => `${l} ms/call`), `calls (${top} ms/call, all runs)`],
      STEPS.flatMap((step) => {
        const last = top === undefined ? undefined : at(top, step);
        if (last === undefined) return [];
        return [
          [
            step,
            String(last.events / seq.reps),
            ...lats.map((l) => {
              const st = at(l, step);
              return st === undefined
                ? '-'
                : `${fmtCalls(st.callsPerEvent)}${noOp.has(step) ? (st.callsPerEvent === 0 ? ' ✓0' : ' FAILED') : ''}`;
            }),
            Object.entries(last.calls)
              .map(([k, v]) => `${v} ${k}`)
              .join(', ') || '0',
          ],
        ];
      }),
    ),
  );
  log(
    table(
      [
        'ms/call',
        'scale-up (add + 4 updates)',
        `termination (3 events, ≤ ${SEQ_TARGETS.terminationCalls})`,
        'driver (4 events, shared)',
        'total per executor',
      ],
      seq.perExecutor.map((p) => [
        String(p.latencyMs),
        fmtCalls(p.scaleUp),
        fmtCalls(p.termination),
        fmtCalls(p.driver),
        fmtCalls(p.total),
      ]),
    ),
  );
  log('\nPer-event latency by kind, p50 / p99 / max ms (the time the event holds its namespace; all runs):');
  log(
    table(
      ['step', ...lats.map((l) => `${l} ms/call`)],
      STEPS.flatMap((step) => {
        if (lats.every((l) => at(l, step) === undefined)) return [];
        return [
          [
            step,
            ...lats.map((l) => {
              const st = at(l, step);
              return st === undefined ? '-' : `${fmtMs(st.p50Ms)} / ${fmtMs(st.p99Ms)} / ${fmtMs(st.maxMs)}`;
            }),
          ],
        ];
      }),
    ),
  );
  if (seq.paced.length > 0) {
    log(
      `\nPaced scale-up at Spark's allocation rates (one batch a second; updates as the pods start: scheduled +20 ms, creating +300 ms, running +2 s, ready +2.1 s):`,
    );
    log(
      table(
        ['pods/s', 'ms/call', 'pods', 'events', 'lag p50', 'lag p99', 'lag max', 'max queued', 'stream busy', 'API calls/pod'],
        seq.paced.map((p) => [
          String(p.podsPerSecond),
          String(p.latencyMs),
          String(p.pods),
          String(p.events),
          `${fmtMs(p.lagMs.p50)} ms`,
          `${fmtMs(p.lagMs.p99)} ms`,
          `${fmtMs(p.lagMs.max)} ms`,
          String(p.maxQueued),
          `${Math.round(p.busy * 100)} %`,
          (p.calls / p.pods).toFixed(2),
        ]),
      ),
    );
  }
  if (seq.noop !== undefined) {
    const o = seq.noop;
    log(
      `\nNo-op updates: ${o.rounds} × ${o.events} sequential status updates of running executors (${seq.podBytes.ready} B each), medians; CPU from /proc over each round; the HTTP floor is a bare node:http server that reads the body, parses its JSON and answers 204, fed the same way in between:`,
    );
    const rows = [
      [
        'function',
        String(o.calls),
        String(o.cpuMsPerEvent),
        String(o.userMsPerEvent),
        String(o.systemMsPerEvent),
        fmtMs(o.p50Ms),
        fmtMs(o.p99Ms),
        o.perRound.join(' '),
      ],
    ];
    if (o.httpFloor !== undefined)
      rows.push([
        'HTTP floor',
        '-',
        String(o.httpFloor.cpuMsPerEvent),
        String(o.httpFloor.userMsPerEvent),
        String(o.httpFloor.systemMsPerEvent),
        fmtMs(o.httpFloor.p50Ms),
        fmtMs(o.httpFloor.p99Ms),
        o.httpFloorPerRound.join(' '),
      ]);
    log(
      table(
        [
          'process',
          'API calls',
          `CPU ms/event (≤ ${SEQ_TARGETS.noopCpuMs})`,
          'user',
          'system',
          'round trip p50 ms',
          'p99 ms',
          'CPU per round',
        ],
        rows,
      ),
    );
    if (o.profile !== undefined) {
      // The sampler counts wall time: right after the function writes its answer, the kernel wakes
      // the sender and, on few cores, often runs it first; those samples land in the write
      // (writeLatin1String) while the function is off the CPU (its system time stays small).
      const WRITE = 'native: writeLatin1String';
      const write = o.profile.groups.find((g) => g.group === WRITE)?.ms ?? 0;
      const rest = o.profile.totalMs - write;
      const us = (ms: number): string => String(Math.round((ms * 1000) / o.events));
      log(
        `CPU profile of those updates (second process, sampled through the inspector, ${o.events} events; ${o.profile.totalMs} ms busy; ${o.profileFile}). "% w/o write": share without ${WRITE}, mostly time off the CPU after the answer is written:`,
      );
      log(
        table(
          ['group (self time)', 'ms', 'µs/event', '%', '% w/o write'],
          o.profile.groups.map((g) => [
            g.group,
            String(g.ms),
            us(g.ms),
            String(g.share),
            g.group === WRITE ? '-' : ((g.ms / rest) * 100).toFixed(1),
          ]),
        ),
      );
      log(
        table(
          ['function (self time)', 'ms', 'µs/event', '%'],
          o.profile.functions.map((g) => [g.fn, String(g.ms), us(g.ms), String(g.share)]),
        ),
      );
    }
  }
  if (seq.largeApp !== undefined) {
    log(
      `\nAn application of ${seq.largeApp.executors} executors ends, ${seq.largeApp.latencyMs} ms/call (one event each; target ≤ ${SEQ_TARGETS.maxEventMs} ms):`,
    );
    log(
      table(
        ['event', 'ms', 'Services before → after', 'API calls'],
        seq.largeApp.events.map((e) => [
          e.what,
          fmtMs(e.ms),
          `${e.servicesBefore} → ${e.servicesAfter}`,
          Object.entries(e.calls)
            .map(([k, v]) => `${v} ${k}`)
            .join(', '),
        ]),
      ),
    );
  }
  if (seq.longestEvent !== undefined)
    log(`Longest single event at ${SEQ_TARGETS.atLatencyMs} ms/call: ${fmtMs(seq.longestEvent.ms)} ms (${seq.longestEvent.what}).`);
  log(
    `Pod bodies as sent: add ${seq.podBytes.add} B, ready ${seq.podBytes.ready} B, Failed ${seq.podBytes.failed} B. Function env from knative/base/service.yaml: ${Object.entries(
      seq.functionEnv,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
}

const report = {
  schema: 1,
  generatedAt: startedAt.toISOString(),
  commit,
  durationMs: Math.round(totalMs),
  machine: {
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    totalMemMiB: Math.round(os.totalmem() / 2 ** 20),
    loadavgBefore: loadBefore,
    loadavgAfter: loadAfter,
  },
  options: {
    entry: ENTRY,
    n: N,
    warmup: WARMUP,
    apiLatencyMs: API_LATENCY_MS,
    coldRuns: COLD_RUNS,
    memoryEvents: MEMORY_EVENTS,
    seqExecutors: SEQ_EXECUTORS,
    seqReps: SEQ_REPS,
    seqLatencies: SEQ_LATENCIES,
    pacedRates: PACED_RATES,
    pacedBatches: PACED_BATCHES,
    noopEvents: NOOP_EVENTS,
    largeApp: LARGE_APP,
    limNamespaces: LIM_NAMESPACES,
    limExecutors: LIM_EXECUTORS,
    curveSizes: CURVE_SIZES,
    curveNamespaces: CURVE_NS,
    curveLatencyMs: CURVE_LATENCY_MS,
    profile: values.profile,
    quick,
    sections: [...only],
  },
  targets: { ratio: TARGET_RATIO, coldStartMs: TARGET_COLD_MS, sequential: SEQ_TARGETS },
  summary: ratioRows.map(([measure, fn, floor, r, reuse, ok]) => ({
    measure,
    function: fn,
    floor,
    ratio: r,
    vsFloorReuse: reuse,
    meetsTarget: ok,
  })),
  // Every event of the sequential apps goes to sequential-events.jsonl beside this file; here only the aggregates.
  sequential:
    sequential === undefined
      ? undefined
      : { ...sequential, latencies: sequential.latencies.map((l) => ({ ...l, apps: l.apps.map(({ records: _, ...app }) => app) })) },
  overhead,
  lifecycle,
  burst,
  coldStart: cold,
  constrained,
  curve,
  memory,
  failures,
};
writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
if (sequential !== undefined) {
  const lines = sequential.latencies.flatMap((l) =>
    l.apps.flatMap((a) => a.records.map((r) => JSON.stringify({ namespace: a.namespace, latencyMs: a.latencyMs, rep: a.rep, ...r }))),
  );
  writeFileSync(join(RESULTS_DIR, 'sequential-events.jsonl'), `${lines.join('\n')}\n`);
}
log(`\nJSON: ${OUT}`);
if (failures.length > 0) {
  log(`\nFAILED (${failures.length}):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
log('All assertions held.');
process.exit(0);
