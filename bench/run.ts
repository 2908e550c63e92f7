/**
 * `npm run bench` — how far the function is from the minimum, against the Kubernetes API-server
 * emulator on loopback (test/kube-emulator). Scripts, not timed tests: prints tables and writes
 * .bench-results/bench.json so that runs can be compared. See docs/performance.md.
 *
 *   node bench/run.ts [--only overhead,lifecycle,burst,coldstart,memory] [--n 1000]
 *                     [--api-latency-ms 5] [--cold-runs 5] [--memory-events 10000] [--warmup 200]
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
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from './lib/procs.ts';
import { fmtMiB, fmtMs, fmtX, ratio, table } from './lib/stats.ts';
import { type ColdStartResult, runColdStart } from './sections/coldstart.ts';
import { type LifecycleResult, runLifecycle } from './sections/lifecycle.ts';
import { type MemoryResult, runMemory } from './sections/memory.ts';
import { type RunOptions, type VariantResult, runBareClient, runFunction } from './sections/throughput.ts';

const SECTIONS = ['overhead', 'lifecycle', 'burst', 'coldstart', 'memory'] as const;
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
    profile: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    entry: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (values.help) {
  console.log('usage: node bench/run.ts [--only overhead,lifecycle,burst,coldstart,memory] [--n 1000] [--api-latency-ms 5] [--cold-runs 5] [--memory-events 10000] [--warmup 200] [--profile] [--quick] [--out FILE] [--entry MAIN_TS]');
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
const loadBefore = os.loadavg();
const t0 = performance.now();

log(`spark-exec-svc bench — node ${process.version}, ${os.cpus().length} CPU(s) ${os.cpus()[0]?.model ?? ''}, load ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
log(`N=${N}, warm-up ${WARMUP}, sections: ${[...only].join(', ')}${values.entry === undefined ? '' : `, entry ${ENTRY}`}\n`);

// ---- 1. overhead ---------------------------------------------------------------------------
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
    failures.push(`${name}: the function holds ${r.openSockets} sockets after ${n} events at concurrency ${r.concurrency}: API connections are not being reused`);
  }
  if (r.apiCalls['create'] !== n) failures.push(`${name}: ${r.apiCalls['create'] ?? 0} creates, expected ${n} (all API calls: ${JSON.stringify(r.apiCalls)})`);
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
  log('1. Overhead per event: function (HTTP in → Service created) vs bare client-node createNamespacedService');
  overhead.push(await pair(1, N, 0, true, values.profile));
  overhead.push(await pair(16, N, 0, true, false));
  if (API_LATENCY_MS > 0) {
    overhead.push(await pair(1, Math.max(50, Math.round(N / 2)), API_LATENCY_MS, false, false));
    overhead.push(await pair(16, N, API_LATENCY_MS, false, false));
  }
  log('');
}

// ---- 2. lifecycle --------------------------------------------------------------------------
let lifecycle: LifecycleResult | undefined;
if (only.has('lifecycle')) {
  log('2. API calls per executor lifecycle (events as Kubernetes emits them; one executor, and apps of 20 delivered in batch and paced)');
  lifecycle = await runLifecycle({ entry: ENTRY, resultsDir: RESULTS_DIR, log });
  failures.push(...lifecycle.failures);
  log('');
}

// ---- 3. burst ------------------------------------------------------------------------------
let burst: OverheadPair | undefined;
if (only.has('burst')) {
  log(`3. Burst: ${N} executors at once, concurrency 64`);
  burst = await pair(64, N, 0, true, false);
  log('');
}

// ---- 4. cold start -------------------------------------------------------------------------
let cold: ColdStartResult | undefined;
if (only.has('coldstart')) {
  log(`4. Cold start: spawn → first event answered (median of ${COLD_RUNS})`);
  cold = await runColdStart({ runs: COLD_RUNS, resultsDir: RESULTS_DIR, log });
  failures.push(...cold.failures);
  for (const v of cold.variants) log(`  ${v.name.padEnd(52)} listening ${v.medianListeningMs} ms, first answer ${v.medianFirstAnswerMs} ms${v.error === undefined ? '' : ` (${v.error})`}`);
  log('');
}

// ---- 5. memory -----------------------------------------------------------------------------
let memory: MemoryResult | undefined;
if (only.has('memory')) {
  log(`5. Memory: RSS over ${MEMORY_EVENTS} events`);
  memory = await runMemory({ entry: ENTRY, events: MEMORY_EVENTS, resultsDir: RESULTS_DIR, log });
  failures.push(...memory.failures);
  log(`  heap after GC ${memory.samples.filter((s) => s.events % 5000 === 0 || s.events === 1000).map((s) => `${s.events / 1000}k: ${fmtMiB(s.heapUsedKiB)}`).join(', ')}`);
  log('');
}

// ---- report --------------------------------------------------------------------------------
const totalMs = performance.now() - t0;
const loadAfter = os.loadavg();
const ratioRows: string[][] = [];
const meets = (x: number, target: number): string => (x <= target ? 'yes' : 'no');
/** A call count or average: whole numbers as they are, averages to 2 decimals. */
const fmtCalls = (x: number): string => (Number.isInteger(x) ? String(x) : x.toFixed(2));
for (const p of overhead) {
  const label = `c=${p.concurrency}${p.apiLatencyMs > 0 ? `, +${p.apiLatencyMs} ms/API call` : ''}`;
  const r50 = ratio(p.fn.latency.p50Ms, p.floor.latency.p50Ms);
  const r99 = ratio(p.fn.latency.p99Ms, p.floor.latency.p99Ms);
  ratioRows.push([`per event p50, ${label}`, `${fmtMs(p.fn.latency.p50Ms)} ms`, `${fmtMs(p.floor.latency.p50Ms)} ms`, fmtX(r50), p.floorReuse === undefined ? '' : fmtX(ratio(p.fn.latency.p50Ms, p.floorReuse.latency.p50Ms)), meets(r50, TARGET_RATIO)]);
  ratioRows.push([`per event p99, ${label}`, `${fmtMs(p.fn.latency.p99Ms)} ms`, `${fmtMs(p.floor.latency.p99Ms)} ms`, fmtX(r99), p.floorReuse === undefined ? '' : fmtX(ratio(p.fn.latency.p99Ms, p.floorReuse.latency.p99Ms)), meets(r99, TARGET_RATIO)]);
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
    ratioRows.push([`cold start → first answer, ${v.name.split(':')[0]}`, `${v.medianFirstAnswerMs} ms`, `target ${TARGET_COLD_MS} ms`, fmtX(v.medianFirstAnswerMs / TARGET_COLD_MS), '', meets(v.medianFirstAnswerMs, TARGET_COLD_MS)]);
  }
}
if (memory !== undefined) {
  const first = memory.samples.find((m) => m.events === 1000);
  const last = memory.samples[memory.samples.length - 1];
  if (first !== undefined && last !== undefined && last !== first) {
    const k = `${last.events / 1000}k vs 1k events`;
    ratioRows.push([`live heap after GC, ${k}`, fmtMiB(last.heapUsedKiB), fmtMiB(first.heapUsedKiB), fmtX(last.heapUsedKiB / first.heapUsedKiB), '', '-']);
    ratioRows.push([`RSS (after GC), ${k}`, fmtMiB(last.rssKiB), fmtMiB(first.rssKiB), fmtX(last.rssKiB / first.rssKiB), '', '-']);
  }
}

log(`=== Summary (one run, ${(totalMs / 1000).toFixed(0)} s; load ${loadBefore[0]!.toFixed(2)} → ${loadAfter[0]!.toFixed(2)}) ===\n`);
log(table(['measure', 'function', 'floor / target', 'ratio', 'vs floor+reuse', `≤ target`], ratioRows));

if (overhead.length > 0 || burst !== undefined) {
  log('\nWhere the CPU goes (ms of CPU per event, per process; 10 ms clock resolution over the run):');
  const rows: string[][] = [];
  for (const p of [...overhead, ...(burst === undefined ? [] : [burst])]) {
    const label = `c=${p.concurrency}${p.apiLatencyMs > 0 ? ` +${p.apiLatencyMs}ms` : ''}`;
    for (const v of [p.floor, p.floorReuse, p.fn]) {
      if (v === undefined) continue;
      const calls = Object.entries(v.apiCalls).map(([verb, c]) => `${(c / v.latency.n).toFixed(2)} ${verb}`).join(', ');
      rows.push([label, v.variant, fmtMs(v.latency.p50Ms), fmtMs(v.latency.p99Ms), String(v.latency.perSecond), calls, String(v.cpuMsPerEvent.sender), v.cpuMsPerEvent.function === undefined ? '-' : String(v.cpuMsPerEvent.function), String(v.cpuMsPerEvent.emulator), v.openSockets === undefined ? '' : String(v.openSockets)]);
    }
  }
  log(table(['run', 'variant', 'p50 ms', 'p99 ms', 'events/s', 'API calls/event', 'CPU sender', 'CPU function', 'CPU emulator', 'fn sockets'], rows));
}
const profiled = overhead.find((p) => p.fn.profile !== undefined)?.fn.profile;
if (profiled !== undefined) {
  log(`\nCPU profile of the function, timed part only (c=1; ${profiled.totalMs} ms busy):`);
  log(table(['group (self time)', 'ms', '%'], profiled.groups.map((g) => [g.group, String(g.ms), String(g.share)])));
  log(table(['function (self time)', 'ms', '%'], profiled.functions.map((g) => [g.fn, String(g.ms), String(g.share)])));
}
if (lifecycle !== undefined) {
  const scenarios = lifecycle.scenarios;
  // Step order of the scenario with the most steps (a one-executor app has no "later executors").
  const longest = [...scenarios].sort((a, b) => b.steps.length - a.steps.length)[0];
  const stepNames = [...new Set([...(longest?.steps ?? []), ...scenarios.flatMap((s) => s.steps)].map((st) => st.step))];
  log('\nAPI calls per event, per step (emulator request log; a step of n events shows its total / n; the sweep: its calls in the scenario\'s namespace, all its events together):');
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
      ['scenario', 'add', 'updates', 'termination (3 events)', 'cool-down end (sweep)', 'driver (add, end)', 'total', `≤ ${lifecycle.target}`],
      scenarios.map((s) => {
        const p = s.perExecutor;
        return [s.scenario, fmtCalls(p.add), fmtCalls(p.update), fmtCalls(p.termination), fmtCalls(p['cool-down end']), fmtCalls(p.driver), fmtCalls(p.total), s.mode === 'resource' ? meets(p.total, lifecycle.target) : '-'];
      }),
    ),
  );
  log('\nWhat the calls were, per step (totals; replies by type):');
  const rows: string[][] = [];
  for (const s of scenarios) {
    for (const st of s.steps) {
      const calls = Object.entries(st.calls).map(([k, n]) => `${n} ${k}`).join(', ') || '0';
      const replies = Object.entries(st.replies).map(([k, n]) => (st.events > 1 ? `${n} ${k}` : k)).join(', ');
      rows.push([s.scenario, st.step, String(st.events), replies, calls, String(st.total)]);
    }
  }
  log(table(['scenario', 'step', 'events', 'replies', 'calls', 'total'], rows));
}
if (cold !== undefined) {
  log('\nCold start (median; * = informational, not what the project ships):');
  log(table(['variant', 'listening ms', 'first answer ms', 'runs (first answer)'], cold.variants.map((v) => [`${v.informational ? '* ' : ''}${v.name}`, String(v.medianListeningMs), String(v.medianFirstAnswerMs), v.error ?? v.runs.map((r) => Math.round(r.firstAnswerMs)).join(' ')])));
  if (cold.loaded !== undefined) {
    log(`Loaded before the first answer (ts entry): ${cold.loaded.modules} module files, ${cold.loaded.kiB} KiB of source, ${cold.loaded.builtins} node builtins/bindings`);
    log(table(['package', 'modules', 'KiB'], cold.loaded.byPackage.slice(0, 12).map((p) => [p.package, String(p.modules), String(p.kiB)])));
  }
  log(`Import time in a fresh process (median of ${Math.min(3, COLD_RUNS)}): ${Object.entries(cold.importMs).map(([k, v]) => `${k} ${v} ms`).join(', ')}`);
}
if (memory !== undefined) {
  log(`\nMemory (function process; full GC through the inspector at each checkpoint, RSS from /proc; ${memory.events} events over ${memory.apps} apps × ${memory.executorsPerApp} executors; start ${fmtMiB(memory.startRssKiB)}):`);
  log(table(['events', 'live heap after GC', 'external', 'RSS after GC', 'peak RSS'], memory.samples.map((s) => [String(s.events), fmtMiB(s.heapUsedKiB), fmtMiB(s.externalKiB), fmtMiB(s.rssKiB), fmtMiB(s.hwmKiB)])));
  log(table(['cache', 'capacity', 'inserted', 'size after', 'bytes/entry', 'ceiling'], memory.caches.map((c) => [c.name, String(c.capacity), String(c.inserted), String(c.sizeAfter), String(c.bytesPerEntry), `${c.ceilingMiB} MiB`])));
}

const report = {
  schema: 1,
  generatedAt: startedAt.toISOString(),
  durationMs: Math.round(totalMs),
  machine: { node: process.version, platform: `${os.platform()} ${os.release()}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, totalMemMiB: Math.round(os.totalmem() / 2 ** 20), loadavgBefore: loadBefore, loadavgAfter: loadAfter },
  options: { entry: ENTRY, n: N, warmup: WARMUP, apiLatencyMs: API_LATENCY_MS, coldRuns: COLD_RUNS, memoryEvents: MEMORY_EVENTS, profile: values.profile, quick, sections: [...only] },
  targets: { ratio: TARGET_RATIO, coldStartMs: TARGET_COLD_MS },
  summary: ratioRows.map(([measure, fn, floor, r, reuse, ok]) => ({ measure, function: fn, floor, ratio: r, vsFloorReuse: reuse, meetsTarget: ok })),
  overhead,
  lifecycle,
  burst,
  coldStart: cold,
  memory,
  failures,
};
writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
log(`\nJSON: ${OUT}`);
if (failures.length > 0) {
  log(`\nFAILED (${failures.length}):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
log('All assertions held.');
process.exit(0);
