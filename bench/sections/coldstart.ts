/**
 * Section 4: cold start — from spawning the real entry point to the answer of its first event
 * (an executor add that creates a Service), median of several runs, for:
 *   ts     node functions/executor-service/main.ts        (npm run serve, type stripping)
 *   bundle node start.cjs: what the container runs — `npm run bundle` (scripts/bundle.ts: rolldown
 *          → main.cjs, the loader start.cjs, main.cjs's V8 code cache; no node_modules), built
 *          here with the same script into .bench-results/bundle so that dist/ is left alone
 * and, for information only (not what the project ships):
 *   bundle, no code cache   the same main.cjs and start.cjs without main.cjs.cache
 *   esm bundle              the bundle shipped before (rolldown --format esm, not minified)
 *   dist         node dist/functions/executor-service/main.js (`npm run build`, tsc output)
 *   dist+cache   the same with a warm NODE_COMPILE_CACHE (V8 code cache on disk)
 *   node floor   a bare node:http server: the least any Node process needs to answer
 * Plus what the process loads before its first answer (modules per package, bytes) and the
 * import time of each dependency in a fresh process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AdapterSender, podEvent } from '../../testkit/apiserversource.ts';
import { type PodBody, appDriver, appExecutors } from '../../testkit/spark-pods.ts';
import { REPO_ROOT, cpuMs, freePort, functionEnv, sleep, startEmulatorProcess, stopChild, type EmulatorProcess } from '../lib/procs.ts';
import { median, round } from '../lib/stats.ts';
import type { Launch } from '../lib/cgroup.ts';

export interface ColdVariant {
  readonly name: string;
  readonly entry: string;
  readonly informational: boolean;
  readonly env?: Record<string, string>;
}

export interface ColdRun {
  readonly listeningMs: number;
  readonly firstAnswerMs: number;
  /** CPU time (user + system) of the process up to its first answer. */
  readonly cpuMs?: number;
}

export interface ColdVariantResult {
  readonly name: string;
  readonly informational: boolean;
  readonly runs: readonly ColdRun[];
  readonly medianListeningMs: number;
  readonly medianFirstAnswerMs: number;
  readonly error?: string;
}

export interface PackageLoad {
  readonly package: string;
  readonly modules: number;
  readonly kiB: number;
}

export interface ColdStartResult {
  readonly build: { readonly ok: boolean; readonly ms: number; readonly note?: string };
  readonly bundle: { readonly ok: boolean; readonly ms: number; readonly kiB?: number; readonly cacheKiB?: number; readonly note?: string };
  readonly variants: readonly ColdVariantResult[];
  /** What the ts entry point loads up to its first answer. */
  readonly loaded:
    | { readonly modules: number; readonly kiB: number; readonly builtins: number; readonly byPackage: readonly PackageLoad[] }
    | undefined;
  readonly importMs: Readonly<Record<string, number>>;
  readonly failures: readonly string[];
}

/** Builds stay in this checkout whatever --out says: the compiled files resolve their packages from its node_modules. */
const BUILD_DIR = join(REPO_ROOT, '.bench-results');
const DIST = join(BUILD_DIR, 'dist');
const BUNDLE_DIR = join(BUILD_DIR, 'bundle');
/** The loader the container starts (`npm run bundle` output), once bundle() has built it. */
export const BUNDLE = join(BUNDLE_DIR, 'start.cjs');
const NO_CACHE_DIR = join(BUILD_DIR, 'bundle-no-cache');
const ESM_BUNDLE = join(BUILD_DIR, 'bundle-esm', 'main.mjs');
const COMPILE_CACHE = join(BUILD_DIR, 'compile-cache');
const NAMESPACE = 'bench';

/** Compiles shared/ and functions/ exactly as `npm run build` does, into .bench-results/dist. */
function build(): ColdStartResult['build'] {
  const started = performance.now();
  rmSync(DIST, { recursive: true, force: true });
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', DIST], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const ms = round(performance.now() - started, 0);
  const emitted = existsSync(join(DIST, 'functions', 'executor-service', 'main.js'));
  if (result.status === 0) return { ok: true, ms };
  const note = `tsc exited ${result.status}${emitted ? ' (JavaScript emitted anyway)' : ''}: ${(result.stdout + result.stderr).trim().split('\n').slice(0, 3).join(' | ')}`;
  return { ok: emitted, ms, note };
}

/** Builds exactly as `npm run bundle` (package.json → scripts/bundle.ts) does, into .bench-results/bundle. */
export function bundle(): ColdStartResult['bundle'] {
  const started = performance.now();
  rmSync(BUNDLE_DIR, { recursive: true, force: true });
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const script = pkg.scripts['bundle'] ?? '';
  if (script !== 'node scripts/bundle.ts dist') return { ok: false, ms: 0, note: `unexpected bundle script: ${script}` };
  const result = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'bundle.ts'), BUNDLE_DIR], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const ms = round(performance.now() - started, 0);
  if (result.status !== 0 || !existsSync(BUNDLE))
    return { ok: false, ms, note: `scripts/bundle.ts exited ${result.status}: ${(result.stdout + result.stderr).trim().slice(-300)}` };
  // For information: the same files without the code cache, and the ESM bundle shipped before.
  rmSync(NO_CACHE_DIR, { recursive: true, force: true });
  mkdirSync(NO_CACHE_DIR, { recursive: true });
  for (const f of ['main.cjs', 'start.cjs']) copyFileSync(join(BUNDLE_DIR, f), join(NO_CACHE_DIR, f));
  rmSync(dirname(ESM_BUNDLE), { recursive: true, force: true });
  spawnSync(
    join(REPO_ROOT, 'node_modules', '.bin', 'rolldown'),
    ['functions/executor-service/main.ts', '--platform', 'node', '--format', 'esm', '--file', ESM_BUNDLE],
    { cwd: REPO_ROOT, timeout: 120_000 },
  );
  const kiB = (f: string): number => Math.round(statSync(join(BUNDLE_DIR, f)).size / 1024);
  return { ok: true, ms, kiB: kiB('main.cjs'), cacheKiB: kiB('main.cjs.cache') };
}

const FLOOR_SCRIPT = `require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => s.end('{}')); }).listen(Number(process.env.PORT), '0.0.0.0', () => console.log('{"msg":"listening"}'));`;

/**
 * One cold start: spawn, wait for the "listening" log line, send one add event at once, time its
 * answer. `launch`: start it inside limits (bench/lib/cgroup.ts; the time includes the wrapper's exec).
 */
export async function coldRun(
  variant: ColdVariant,
  emulator: EmulatorProcess,
  executor: PodBody,
  extraArgs: readonly string[] = [],
  extraEnv: Record<string, string> = {},
  launch?: Launch,
): Promise<ColdRun> {
  const port = await freePort();
  const args = variant.entry === '<floor>' ? ['-e', FLOOR_SCRIPT] : [...extraArgs, variant.entry];
  const argv = launch === undefined ? { command: process.execPath, args } : launch(process.execPath, args);
  const started = performance.now();
  const child = spawn(argv.command, argv.args, {
    cwd: REPO_ROOT,
    env: { ...functionEnv(emulator.kubeconfig, port, { ...variant.env, ...extraEnv }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000);
  });
  try {
    const listeningMs = await new Promise<number>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`not listening within 20 s: ${stderr.slice(-300)}`)), 20_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('"msg":"listening"')) {
          clearTimeout(timer);
          resolve(performance.now() - started);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited with ${code} before listening: ${stderr.slice(-300)}`));
      });
    });
    const poster = new AdapterSender(`http://127.0.0.1:${port}/`);
    try {
      const answer = await poster.post(podEvent('add', executor), 20_000);
      const firstAnswerMs = performance.now() - started;
      if (variant.entry !== '<floor>' && (answer.status !== 200 || answer.type !== 'spark-exec-svc.service.created')) {
        throw new Error(`first event answered ${answer.status} ${answer.type ?? ''} ${answer.body.slice(0, 200)}`);
      }
      // CPU the process used up to its first answer (/proc, 10 ms resolution): under a CFS quota of
      // q CPUs it cannot answer sooner than cpu / q of wall time.
      let cpu: number | undefined;
      try {
        cpu = child.pid === undefined ? undefined : cpuMs(child.pid);
      } catch {
        cpu = undefined;
      }
      return { listeningMs: round(listeningMs, 1), firstAnswerMs: round(firstAnswerMs, 1), ...(cpu === undefined ? {} : { cpuMs: cpu }) };
    } finally {
      poster.close();
    }
  } finally {
    await stopChild(child);
  }
}

function packageOf(url: string): string {
  if (url.startsWith('node:')) return 'node: builtins';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (nm !== null) return nm[1]!;
  if (url.includes('/shared/') || url.includes('/functions/')) return 'ours (shared/, functions/)';
  return 'other';
}

function readInventory(inventory: string): ColdStartResult['loaded'] {
  if (!existsSync(inventory)) return undefined;
  const data = JSON.parse(readFileSync(inventory, 'utf8')) as { modules: Array<{ url: string; bytes: number }>; builtins: number };
  const files = data.modules.filter((m) => !m.url.startsWith('node:'));
  const byPackage = new Map<string, { modules: number; bytes: number }>();
  for (const m of files) {
    const p = packageOf(m.url);
    const entry = byPackage.get(p) ?? { modules: 0, bytes: 0 };
    entry.modules++;
    entry.bytes += m.bytes;
    byPackage.set(p, entry);
  }
  return {
    modules: files.length,
    kiB: Math.round(files.reduce((a, m) => a + m.bytes, 0) / 1024),
    builtins: data.builtins,
    byPackage: [...byPackage]
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .map(([pkg, v]) => ({ package: pkg, modules: v.modules, kiB: Math.round(v.bytes / 1024) })),
  };
}

/** Import time of one package in a fresh process (resolution from the repository root). */
function importMs(specifier: string): number {
  const code = `const t = performance.now(); await import(${JSON.stringify(specifier)}); process.stdout.write(String(performance.now() - t));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 });
  return Number(r.stdout);
}

export async function runColdStart(options: { runs: number; resultsDir: string; log: (line: string) => void }): Promise<ColdStartResult> {
  const failures: string[] = [];
  const inventory = join(options.resultsDir, 'module-inventory.json');
  mkdirSync(BUILD_DIR, { recursive: true });
  const built = build();
  options.log(
    `  build into .bench-results/dist: ${built.ok ? 'ok' : 'FAILED'} in ${built.ms} ms${built.note === undefined ? '' : ` (${built.note})`}`,
  );
  const bundled = bundle();
  options.log(
    `  bundle (what the container runs): ${bundled.ok ? `ok, main.cjs ${bundled.kiB} KiB + code cache ${bundled.cacheKiB} KiB in ${bundled.ms} ms` : bundled.note}`,
  );
  if (!bundled.ok) failures.push(`bundle: ${bundled.note ?? 'failed'}`);

  const variants: ColdVariant[] = [
    {
      name: 'ts: node functions/executor-service/main.ts',
      entry: join(REPO_ROOT, 'functions', 'executor-service', 'main.ts'),
      informational: true,
    },
  ];
  if (bundled.ok) {
    variants.push({ name: 'bundle: node start.cjs (the container)', entry: BUNDLE, informational: false });
    variants.push({ name: 'bundle without its code cache', entry: join(NO_CACHE_DIR, 'start.cjs'), informational: true });
    if (existsSync(ESM_BUNDLE))
      variants.push({ name: 'esm bundle: node main.mjs (shipped before)', entry: ESM_BUNDLE, informational: true });
  }
  if (built.ok) {
    const distMain = join(DIST, 'functions', 'executor-service', 'main.js');
    variants.push({ name: 'dist: node dist/functions/executor-service/main.js', entry: distMain, informational: true });
    variants.push({
      name: 'dist + warm NODE_COMPILE_CACHE',
      entry: distMain,
      informational: true,
      env: { NODE_COMPILE_CACHE: COMPILE_CACHE },
    });
  }
  variants.push({ name: 'node floor: bare node:http server', entry: '<floor>', informational: true });

  const emulator = await startEmulatorProcess();
  const results: ColdVariantResult[] = [];
  try {
    const [driver] = await emulator.seed([appDriver(NAMESPACE, 7)]);
    // One fresh executor per run: warm-up, timed runs, and the inventory run. Their ids lie 40
    // apart, beyond the 31 the first add of a batch lists after its own, so that each run's
    // first event creates its own Service and nothing earlier made it.
    const count = (options.runs + 1) * variants.length + 2;
    const executors = (
      await Promise.all(Array.from({ length: count }, (_, k) => emulator.seed(appExecutors(driver!, 1, { firstId: 1 + 40 * k }))))
    ).flat();
    let next = 0;
    const runs = new Map<string, ColdRun[]>(variants.map((v) => [v.name, []]));
    const errors = new Map<string, string>();
    // Warm the compile cache (and the OS page cache for every variant) with one untimed run each.
    rmSync(COMPILE_CACHE, { recursive: true, force: true });
    mkdirSync(COMPILE_CACHE, { recursive: true });
    for (const v of variants) {
      try {
        await coldRun(v, emulator, executors[next++]!);
      } catch (error) {
        errors.set(v.name, error instanceof Error ? error.message : String(error));
      }
    }
    // Round-robin, so that a noisy moment on the machine hits every variant alike.
    for (let r = 0; r < options.runs; r++) {
      for (const v of variants) {
        if (errors.has(v.name)) continue;
        try {
          runs.get(v.name)!.push(await coldRun(v, emulator, executors[next++]!));
        } catch (error) {
          errors.set(v.name, error instanceof Error ? error.message : String(error));
        }
        await sleep(50);
      }
    }
    for (const v of variants) {
      const rs = runs.get(v.name)!;
      const error = errors.get(v.name);
      if (error !== undefined && !v.informational) failures.push(`cold start [${v.name}]: ${error}`);
      results.push({
        name: v.name,
        informational: v.informational,
        runs: rs,
        medianListeningMs: round(median(rs.map((x) => x.listeningMs)), 0),
        medianFirstAnswerMs: round(median(rs.map((x) => x.firstAnswerMs)), 0),
        ...(error === undefined ? {} : { error }),
      });
    }
    // What the entry point loads before its first answer (one extra, untimed run with a load hook).
    rmSync(inventory, { force: true });
    try {
      await coldRun(
        variants[0]!,
        emulator,
        executors[next++]!,
        ['--import', pathToFileURL(join(REPO_ROOT, 'bench', 'lib', 'module-inventory.ts')).href],
        { MODULE_INVENTORY_OUT: inventory },
      );
    } catch (error) {
      options.log(`  module inventory failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  } finally {
    await emulator.stop();
  }
  // Median of 3 fresh processes each (fewer when fewer cold runs were asked for).
  const repeat = Array.from({ length: Math.min(3, options.runs) }, (_, i) => i);
  const imports: Record<string, number> = {};
  for (const specifier of ['@kubernetes/client-node', 'zod', 'cloudevents']) {
    imports[specifier] = round(median(repeat.map(() => importMs(specifier))), 0);
  }
  imports['(empty: node -e 0 startup)'] = round(median(repeat.map(() => timeEmpty())), 0);
  return { build: built, bundle: bundled, variants: results, loaded: readInventory(inventory), importMs: imports, failures };
}

function timeEmpty(): number {
  const started = performance.now();
  spawnSync(process.execPath, ['-e', '0'], { timeout: 10_000 });
  return performance.now() - started;
}
