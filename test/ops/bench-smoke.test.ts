/**
 * `npm run bench` works on a fresh clone: every section runs with tiny sizes from a copy of this
 * checkout that has no .bench-results/ (gitignored, so a clone never has one), exits 0 and
 * writes its JSON and logs there. The user's own .bench-results/ is never touched.
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Not in a clone, or built/written here: node_modules is linked, the rest left out. */
const NOT_COPIED = new Set(['node_modules', '.git', '.bench-results', 'dist']);
// Generous: the suite runs test files in parallel on 2 cores, and this one alone is ~60-100 s.
const RUN_LIMIT_MS = 240_000;

const copy = mkdtempSync(join(tmpdir(), 'sxs-bench-smoke-'));
afterAll(() => rmSync(copy, { recursive: true, force: true, maxRetries: 3 }));

it('runs every bench section with tiny sizes from a fresh checkout (no .bench-results) and writes the JSON', {
  timeout: RUN_LIMIT_MS + 15_000,
}, async () => {
  cpSync(ROOT, copy, { recursive: true, filter: (source) => !NOT_COPIED.has(relative(ROOT, source).split(sep)[0]!) });
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
  expect(existsSync(join(copy, '.bench-results'))).toBe(false);

  // Two bench processes side by side, so that a 2-core machine finishes in time: the cold start
  // (mostly one busy core: tsc, rolldown, process starts) and every other section. The second
  // writes to the default --out, exactly as `npm run bench` on a fresh clone does.
  const tiny = ['--quick', '--n', '20', '--warmup', '5', '--api-latency-ms', '0', '--cold-runs', '1', '--memory-events', '200'];
  // The sequential section: two batches, one run, loopback and 20 ms per call, one paced rate of one batch.
  const tinySequential = [
    '--seq-executors',
    '12',
    '--seq-reps',
    '1',
    '--seq-latencies',
    '0,20',
    '--paced-rates',
    '10',
    '--paced-batches',
    '1',
    '--noop-events',
    '200',
    '--large-app',
    '60',
  ];
  const started = Date.now();
  const runs = await Promise.all([
    runBench([
      '--only',
      'coldstart,sequential,constrained,curve',
      ...tiny,
      ...tinySequential,
      '--lim-namespaces',
      '2',
      '--lim-executors',
      '2',
      '--curve',
      '10',
      '--curve-namespaces',
      '2x5',
      '--out',
      join('.bench-results', 'coldstart.json'),
    ]),
    runBench(['--only', 'overhead,lifecycle,burst,memory', ...tiny]),
  ]);
  const seconds = Math.round((Date.now() - started) / 1000);
  for (const run of runs)
    expect(run.code, `exit ${run.code} after ${seconds} s (limit ${RUN_LIMIT_MS / 1000} s):\n${run.output.slice(-4000)}`).toBe(0);

  const results = join(copy, '.bench-results');
  const read = (file: string): Report => JSON.parse(readFileSync(join(results, file), 'utf8')) as Report;
  const cold = read('coldstart.json');
  const report = read('bench.json');
  expect(cold.options.sections).toEqual(['coldstart', 'sequential', 'constrained', 'curve']);
  expect(cold.failures).toEqual([]);
  expect(cold.coldStart?.variants.length).toBeGreaterThan(0);
  // Sequential: both latencies measured against the floor, every step's calls counted, no-op updates free.
  const seq = cold.sequential;
  expect(seq?.latencies.map((l) => l.latencyMs)).toEqual([0, 20]);
  for (const l of seq?.latencies ?? []) {
    expect(l.median.floorCreateMs).toBeGreaterThan(0);
    // The fair floor: batch writes and the bare delivery of the same events, both measured.
    expect(l.median.batchCreateMs).toBeGreaterThan(0);
    expect(l.median.deliveryScaleUpMs).toBeGreaterThan(0);
    expect(l.median.fairTeardownRatio).toBeGreaterThan(0);
  }
  expect(seq?.steps[0]?.stats.find((s) => s.step === 'update: ready')?.callsPerEvent).toBe(0);
  expect(seq?.noop?.calls).toBe(0);
  expect(seq?.paced.length).toBe(1);
  expect(seq?.longestEvent?.ms).toBeGreaterThan(0);
  // The scale curve: one namespace and several, calls per executor counted.
  expect(cold.curve?.points.map((p) => p.executors)).toEqual([10, 10]);
  for (const p of cold.curve?.points ?? []) expect(p.scaleUpCallsPerExecutor).toBeGreaterThan(0);
  // Under the container's limits and without: every figure measured, the cgroup removed.
  expect(cold.constrained?.modes.map((m) => m.mode)).toEqual(['constrained', 'unconstrained']);
  for (const m of cold.constrained?.modes ?? []) {
    expect(m.coldStart.medianMs).toBeGreaterThan(0);
    expect(m.namespaces.podsPerSecond).toBeGreaterThan(0);
    expect(m.noop.sink.cpuMsPerEvent).toBeGreaterThanOrEqual(0);
  }
  expect(report.options.sections.sort()).toEqual(['burst', 'lifecycle', 'memory', 'overhead']);
  expect(report.failures).toEqual([]);
  expect(report.overhead.length).toBeGreaterThan(0);
  expect(report.burst).toBeDefined();
  expect(report.memory?.samples.length).toBeGreaterThan(0);
  const resource = report.lifecycle?.scenarios.filter((s) => s.mode === 'resource') ?? [];
  expect(resource.length).toBeGreaterThan(0);
  for (const s of resource) for (const step of s.steps.filter((st) => st.mustBeZero)) expect(step.total).toBe(0);
  // The function's logs went into the results folder too.
  expect(readdirSync(results).filter((f) => f.startsWith('function-') && f.endsWith('.log')).length).toBeGreaterThan(0);
  console.log(`bench smoke: every section in ${seconds} s`);
});

/** What the test reads of bench.json. */
interface Report {
  readonly options: { readonly sections: string[] };
  readonly failures: readonly string[];
  readonly overhead: readonly unknown[];
  readonly lifecycle?: {
    readonly scenarios: ReadonlyArray<{
      readonly mode: string;
      readonly steps: ReadonlyArray<{ readonly mustBeZero: boolean; readonly total: number }>;
    }>;
  };
  readonly burst?: unknown;
  readonly coldStart?: { readonly variants: readonly unknown[] };
  readonly curve?: { readonly points: ReadonlyArray<{ readonly executors: number; readonly scaleUpCallsPerExecutor: number }> };
  readonly constrained?: {
    readonly modes: ReadonlyArray<{
      readonly mode: string;
      readonly coldStart: { readonly medianMs: number };
      readonly namespaces: { readonly podsPerSecond: number };
      readonly noop: { readonly sink: { readonly cpuMsPerEvent: number } };
    }>;
  };
  readonly memory?: { readonly samples: readonly unknown[] };
  readonly sequential?: {
    readonly latencies: ReadonlyArray<{
      readonly latencyMs: number;
      readonly median: {
        readonly floorCreateMs: number;
        readonly batchCreateMs: number;
        readonly deliveryScaleUpMs: number;
        readonly fairTeardownRatio: number;
      };
    }>;
    readonly steps: ReadonlyArray<{ readonly stats: ReadonlyArray<{ readonly step: string; readonly callsPerEvent: number }> }>;
    readonly noop?: { readonly calls: number };
    readonly paced: readonly unknown[];
    readonly longestEvent?: { readonly ms: number };
  };
}

/** `node bench/run.ts …` in the copy, with the Node the npm scripts use: vitest runs on node_modules/.bin/node (the "node" devDependency), as the other tests that spawn node rely on. */
function runBench(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env['NODE_OPTIONS'];
    // Its own process group, so that on time-out the bench and the processes it started go together.
    const child = spawn(process.execPath, ['bench/run.ts', ...args], { cwd: copy, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const killGroup = (signal: NodeJS.Signals): void => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // already gone
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      out += `\n[bench-smoke: no exit within ${RUN_LIMIT_MS / 1000} s; stopped]`;
      killGroup('SIGTERM');
    }, RUN_LIMIT_MS);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      // Stopped: whatever it had started goes too, before the copy is removed.
      if (timedOut) killGroup('SIGKILL');
      setTimeout(() => resolve({ code, output: out }), timedOut ? 500 : 0);
    });
  });
}
