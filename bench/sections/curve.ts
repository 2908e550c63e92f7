/**
 * Section "curve": does the cost per executor stay flat as a function process holds more of them?
 * (issue 18: a cliff where the remembered facts stop covering the live executors.) Applications of
 * `sizes` executors in one namespace, and `namespaces` × `perNamespace` at once (one stream per
 * namespace, one client for all: testkit goTransportAgent), each through the adapter's sequential
 * sender exactly as section sequential sends one (driver start, batches of 10 with their status
 * updates, teardown, driver end), against a fresh function per size with the manifest's env,
 * WATCH_NAMESPACES set to the namespaces used (the memory is sized from them, as in a deployment)
 * and MAX_SERVICES_PER_NAMESPACE raised to the size where the manifest's cap is lower (a user with
 * 5,000 executors in one namespace must raise it too). Reports API calls and ms per executor for the
 * scale-up and the teardown, and each against the smallest size's.
 */
import { join } from 'node:path';
import { goTransportAgent } from '../../testkit/apiserversource.ts';
import { startEmulatorProcess, startFunctionProcess } from '../lib/procs.ts';
import { round } from '../lib/stats.ts';
import { type AppRun, callsPerExecutor, manifestEnv, Section } from './sequential.ts';

export interface CurvePoint {
  readonly label: string;
  readonly namespaces: number;
  readonly executorsPerNamespace: number;
  readonly executors: number;
  readonly scaleUpCallsPerExecutor: number;
  readonly teardownCallsPerExecutor: number;
  readonly scaleUpMsPerExecutor: number;
  readonly teardownMsPerExecutor: number;
  /** The longest single event and the namespace stream's longest teardown (ms). */
  readonly longestEventMs: number;
  readonly teardownMs: number;
  readonly wallMs: number;
  /** Attempts answered with a non-2xx status (retried), by status. */
  readonly retried: Readonly<Record<string, number>>;
  /** Services left after the driver's Succeeded was answered, all namespaces (its deadline cut the deletes short). */
  readonly servicesLeft: number;
  readonly maxServicesPerNamespace: string;
}

export interface CurveResult {
  readonly latencyMs: number;
  readonly points: readonly CurvePoint[];
  readonly failures: readonly string[];
}

export interface CurveOptions {
  readonly entry: string;
  readonly resultsDir: string;
  readonly sizes: readonly number[];
  /** Several namespaces at once: `namespaces` × `perNamespace` (0 namespaces: none). */
  readonly namespaces: number;
  readonly perNamespace: number;
  readonly latencyMs: number;
  readonly log: (line: string) => void;
}

async function point(options: CurveOptions, namespaces: number, perNamespace: number, failures: string[]): Promise<CurvePoint> {
  const label = namespaces === 1 ? `${perNamespace} in one namespace` : `${namespaces} namespaces × ${perNamespace}`;
  const env = manifestEnv();
  const names = Array.from({ length: namespaces }, (_, i) => `curve-${namespaces}x${perNamespace}-${i + 1}`);
  const manifestCap = Number(env['MAX_SERVICES_PER_NAMESPACE'] ?? '0');
  const cap = manifestCap >= perNamespace ? env['MAX_SERVICES_PER_NAMESPACE']! : String(perNamespace);
  const emulator = await startEmulatorProcess();
  try {
    const fn = await startFunctionProcess({
      entry: options.entry,
      kubeconfig: emulator.kubeconfig,
      // One application per namespace: its own cap (MAX_SERVICES_PER_APPLICATION, half the namespace's
      // by default) is raised with the namespace's, as a user running one application that large would.
      env: {
        ...env,
        WATCH_NAMESPACES: [...names, 'curve-warm'].join(','),
        MAX_SERVICES_PER_NAMESPACE: cap,
        MAX_SERVICES_PER_APPLICATION: cap,
      },
      logFile: join(options.resultsDir, `function-curve-${namespaces}x${perNamespace}.log`),
    });
    const agent = goTransportAgent();
    try {
      const section = new Section(emulator, fn, { agent, strict: false });
      await section.setLatency(0);
      await section.app('curve-warm', 90, 20, 0);
      await section.setLatency(options.latencyMs);
      const t0 = performance.now();
      const apps: AppRun[] = await Promise.all(names.map((ns, i) => section.app(ns, 700 + i, perNamespace, 1)));
      const wallMs = performance.now() - t0;
      failures.push(...section.failures.map((f) => `curve [${label}]: ${f}`));
      const executors = namespaces * perNamespace;
      const calls = apps.map((a) => callsPerExecutor(a));
      const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
      const records = apps.flatMap((a) => a.records);
      const result: CurvePoint = {
        label,
        namespaces,
        executorsPerNamespace: perNamespace,
        executors,
        scaleUpCallsPerExecutor: round(mean(calls.map((c) => c.scaleUp)), 2),
        teardownCallsPerExecutor: round(mean(calls.map((c) => c.termination + c.driver)), 2),
        // The process's time per executor: the longest namespace's busy time over every executor
        // of the row (one namespace: its stream's busy time per executor).
        scaleUpMsPerExecutor: round(Math.max(...apps.map((a) => a.scaleUpMs)) / executors, 2),
        teardownMsPerExecutor: round(Math.max(...apps.map((a) => a.teardownMs)) / executors, 2),
        longestEventMs: round(Math.max(...records.map((r) => r.ms)), 1),
        teardownMs: round(Math.max(...apps.map((a) => a.teardownMs)), 0),
        wallMs: round(wallMs, 0),
        retried: Object.fromEntries(section.retriedStatuses),
        servicesLeft: apps.reduce((a, x) => a + x.servicesLeft, 0),
        maxServicesPerNamespace: cap,
      };
      options.log(
        `  ${label}, ${options.latencyMs} ms/call: scale-up ${result.scaleUpCallsPerExecutor} calls, ${result.scaleUpMsPerExecutor} ms per executor; ` +
          `teardown ${result.teardownCallsPerExecutor} calls, ${result.teardownMsPerExecutor} ms per executor; longest event ${Math.round(result.longestEventMs)} ms (${Math.round(wallMs / 1000)} s)`,
      );
      return result;
    } finally {
      agent.destroy();
      await fn.stop();
    }
  } finally {
    await emulator.stop();
  }
}

export async function runCurve(options: CurveOptions): Promise<CurveResult> {
  const failures: string[] = [];
  const points: CurvePoint[] = [];
  for (const size of options.sizes) points.push(await point(options, 1, size, failures));
  if (options.namespaces > 0 && options.perNamespace > 0)
    points.push(await point(options, options.namespaces, options.perNamespace, failures));
  return { latencyMs: options.latencyMs, points, failures };
}
