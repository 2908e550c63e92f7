/**
 * Section "constrained": the figures users get from the container as the manifest sizes it. The
 * function runs as the container runs it — the bundle (`npm run bundle` output: start.cjs,
 * main.cjs, its code cache; not the .ts entry) with the env of knative/base/service.yaml — once
 * inside a cgroup with the manifest's `limits.cpu` as a CFS quota and `limits.memory` as the
 * memory limit (bench/lib/cgroup.ts, made here and removed at the end), once without, and reports:
 *
 *   cold start   spawn → first event answered (median of `coldRuns`; target ≤ 300 ms under 500m)
 *   10 namespaces sending at once, 20 ms per API call: each namespace an application of
 *                `executors` executors through its own stream (the adapter runs one reflector per
 *                namespace of its list, all feeding one HTTP client: Go's transport, 2 idle
 *                connections per host — testkit goTransportAgent); the longest single event
 *                (target ≤ 1 s), the attempts answered 503 (the event's deadline passed; target 0
 *                while the API server is healthy, as it is here) and pods/s (Σ executors / the
 *                longest namespace's scale-up busy time; target ≥ 100)
 *   no-op updates  CPU per event of the function and of a bare node:http sink (same cgroup), with
 *                the real-sized bodies (managedFields: bench/sections/sequential.ts watchedEvent);
 *                target ≤ 2× the sink's (unconstrained)
 *
 * When the machine lets the bench make no cgroup, the "constrained" figures run under `taskset -c 0`
 * and say so (an approximation: one whole CPU, no quota, no memory limit).
 */
import { join } from 'node:path';
import { goTransportAgent } from '../../testkit/apiserversource.ts';
import { appDriver, appExecutors } from '../../testkit/spark-pods.ts';
import { type LimitsCgroup, type ManifestLimits, makeLimitsCgroup, manifestLimits } from '../lib/cgroup.ts';
import { cpuMs, startEmulatorProcess, startFunctionProcess } from '../lib/procs.ts';
import { median, percentile, round } from '../lib/stats.ts';
import { BUNDLE, bundle, coldRun } from './coldstart.ts';
import {
  manifestEnv,
  medianMeasure,
  type NoopMeasure,
  noopFixture,
  noopRun,
  Section,
  startBareSink,
  TARGETS as SEQ_TARGETS,
  watchedEvent,
} from './sequential.ts';

export const TARGETS = {
  /** Under the manifest's limits. */
  coldStartMs: 300,
  longestEventMs: 1000,
  answered503: 0,
  podsPerSecond: 100,
  /** Unconstrained: no-op update CPU ≤ this × the bare sink's. */
  noopVsSink: 2,
  /** The API latency of the 10-namespace run. */
  latencyMs: SEQ_TARGETS.atLatencyMs,
} as const;

export interface ModeResult {
  readonly mode: 'constrained' | 'unconstrained';
  /** What the function ran under. */
  readonly limits: string;
  readonly coldStart: {
    readonly medianMs: number;
    readonly runsMs: readonly number[];
    /** CPU time of the process up to its first answer (median): at a quota of q CPUs the start takes at least cpu / q. */
    readonly cpuMs: number;
    readonly error?: string;
  };
  readonly namespaces: {
    readonly namespaces: number;
    readonly executorsPerNamespace: number;
    readonly events: number;
    readonly longestEventMs: number;
    readonly longestEvent: string;
    readonly eventP99Ms: number;
    /** Attempts answered with each non-2xx status (retried by the sender). */
    readonly retried: Readonly<Record<string, number>>;
    readonly answered503: number;
    readonly podsPerSecond: number;
    /** Wall time from the first event to the last answer, all namespaces. */
    readonly wallMs: number;
    readonly cpuMsPerEvent: number;
  };
  readonly noop: {
    readonly fn: Omit<NoopMeasure, 'calls'>;
    readonly sink: Omit<NoopMeasure, 'calls'>;
    readonly ratio: number;
    readonly bodyBytes: number;
  };
  readonly throttled?: { readonly periods: number; readonly throttledPeriods: number; readonly throttledMs: number } | undefined;
  readonly peakMemoryMiB?: number | undefined;
}

export interface ConstrainedResult {
  readonly manifest: ManifestLimits;
  readonly cgroup: string;
  readonly bundle: { readonly ok: boolean; readonly ms: number; readonly note?: string };
  readonly modes: readonly ModeResult[];
  readonly targets: typeof TARGETS;
  readonly failures: readonly string[];
}

export interface ConstrainedOptions {
  readonly resultsDir: string;
  readonly namespaces: number;
  readonly executors: number;
  readonly coldRuns: number;
  readonly noopEvents: number;
  readonly log: (line: string) => void;
}

async function runMode(
  mode: ModeResult['mode'],
  cgroup: LimitsCgroup | undefined,
  options: ConstrainedOptions,
  failures: string[],
): Promise<ModeResult> {
  const { log } = options;
  const launch = cgroup?.launch;
  const env = manifestEnv();
  const namespaces = Array.from({ length: options.namespaces }, (_, i) => `lim-${mode}-${i + 1}`);
  const emulator = await startEmulatorProcess();
  try {
    // Cold start: one untimed run (page cache), then the timed ones.
    const [driver] = await emulator.seed([appDriver('bench', 7)]);
    const fresh = (k: number) => emulator.seed(appExecutors(driver!, 1, { firstId: 1 + 40 * k }));
    const variant = { name: 'bundle', entry: BUNDLE, informational: false };
    const runs: number[] = [];
    const cpus: number[] = [];
    let coldError: string | undefined;
    for (let k = 0; k <= options.coldRuns; k++) {
      try {
        const r = await coldRun(variant, emulator, (await fresh(k))[0]!, [], {}, launch);
        if (k > 0) {
          runs.push(r.firstAnswerMs);
          if (r.cpuMs !== undefined) cpus.push(r.cpuMs);
        }
      } catch (error) {
        coldError = error instanceof Error ? error.message : String(error);
        failures.push(`constrained [${mode}] cold start: ${coldError}`);
        break;
      }
    }
    log(
      `  ${mode}: cold start → first answer ${runs.map((x) => Math.round(x)).join(', ')} ms, CPU used by then ${cpus.map((x) => Math.round(x)).join(', ')} ms`,
    );

    const fn = await startFunctionProcess({
      entry: BUNDLE,
      kubeconfig: emulator.kubeconfig,
      env: { ...env, WATCH_NAMESPACES: [...namespaces, 'lim-noop'].join(',') },
      logFile: join(options.resultsDir, `function-constrained-${mode}.log`),
      ...(launch === undefined ? {} : { launch }),
    });
    try {
      // Ten namespaces at once, one stream each, one client for all: as one adapter sends.
      const agent = goTransportAgent();
      const section = new Section(emulator, fn, { agent, strict: false });
      let apps: Awaited<ReturnType<Section['app']>>[];
      const t0 = performance.now();
      const cpu0 = cpuMs(fn.pid);
      try {
        await section.setLatency(TARGETS.latencyMs);
        apps = await Promise.all(namespaces.map((ns, i) => section.app(ns, 500 + i, options.executors, 1)));
      } finally {
        agent.destroy();
      }
      const wallMs = performance.now() - t0;
      const cpu = cpuMs(fn.pid) - cpu0;
      failures.push(...section.failures.map((f) => `constrained [${mode}]: ${f}`));
      const records = apps.flatMap((a) => a.records.map((r) => ({ ...r, namespace: a.namespace })));
      const longest = records.reduce((a, r) => (r.ms > a.ms ? r : a), records[0]!);
      const answered503 = section.retriedStatuses.get('503') ?? 0;
      const podsPerSecond = round((namespaces.length * options.executors) / (Math.max(...apps.map((a) => a.scaleUpMs)) / 1000), 0);
      const events = apps.reduce((a, x) => a + x.events, 0);
      // The process's CPU over all namespaces' events (each app's own figure counts the others' too).
      const cpuMsPerEvent = round(cpu / events, 3);
      log(
        `  ${mode}: ${namespaces.length} namespaces × ${options.executors} executors at ${TARGETS.latencyMs} ms/call: longest event ${Math.round(longest.ms)} ms (${longest.namespace} ${longest.step}), ` +
          `${answered503} attempts answered 503, ${podsPerSecond} pods/s, ${events} events in ${Math.round(wallMs)} ms`,
      );

      // No-op updates with real-sized bodies, function and bare sink alternately.
      await section.setLatency(0);
      const snapshots = await noopFixture(section, emulator, fn, 'lim-noop', 400, Math.min(50, options.executors));
      const sink = await startBareSink(204, launch);
      const fnRounds: NoopMeasure[] = [];
      const sinkRounds: NoopMeasure[] = [];
      try {
        for (let k = 0; k < 3; k++) {
          fnRounds.push(await noopRun(section, emulator, fn, 'lim-noop', snapshots, options.noopEvents));
          sinkRounds.push(await noopRun(section, emulator, sink, 'lim-noop', snapshots, options.noopEvents));
        }
      } finally {
        await sink.stop();
      }
      const calls = fnRounds.reduce((a, r) => a + r.calls, 0);
      if (calls !== 0) failures.push(`constrained [${mode}]: no-op updates cost ${calls} API call(s) — must be 0`);
      const fnM = medianMeasure(fnRounds);
      const sinkM = medianMeasure(sinkRounds);
      const bodyBytes = watchedEvent('update', snapshots[0]!).body.length;
      log(`  ${mode}: no-op update CPU ${fnM.cpuMsPerEvent} ms vs bare sink ${sinkM.cpuMsPerEvent} ms (${bodyBytes} B bodies)`);
      const throttled = cgroup?.throttled();
      const peak = cgroup?.peakMemoryBytes();
      return {
        mode,
        limits: cgroup?.label ?? 'none (the machine as it is)',
        coldStart: {
          medianMs: round(median(runs), 0),
          runsMs: runs.map((x) => round(x, 0)),
          cpuMs: round(median(cpus), 0),
          ...(coldError === undefined ? {} : { error: coldError }),
        },
        namespaces: {
          namespaces: namespaces.length,
          executorsPerNamespace: options.executors,
          events,
          longestEventMs: round(longest.ms, 1),
          longestEvent: `${longest.namespace} ${longest.step}`,
          eventP99Ms: round(
            percentile(
              records.map((r) => r.ms),
              99,
            ),
            1,
          ),
          retried: Object.fromEntries(section.retriedStatuses),
          answered503,
          podsPerSecond,
          wallMs: round(wallMs, 0),
          cpuMsPerEvent,
        },
        noop: { fn: fnM, sink: sinkM, ratio: round(fnM.cpuMsPerEvent / sinkM.cpuMsPerEvent, 2), bodyBytes },
        throttled,
        peakMemoryMiB: peak === undefined ? undefined : round(peak / 2 ** 20, 1),
      };
    } finally {
      await fn.stop();
    }
  } finally {
    await emulator.stop();
  }
}

export async function runConstrained(options: ConstrainedOptions): Promise<ConstrainedResult> {
  const failures: string[] = [];
  const manifest = manifestLimits();
  const built = bundle();
  options.log(`  bundle: ${built.ok ? `ok in ${built.ms} ms` : built.note}`);
  if (!built.ok) {
    failures.push(`constrained: bundle: ${built.note ?? 'failed'}`);
    return { manifest, cgroup: '-', bundle: built, modes: [], targets: TARGETS, failures };
  }
  const cgroup = await makeLimitsCgroup(manifest);
  options.log(`  limits from knative/base/service.yaml: cpu ${manifest.cpuText}, memory ${manifest.memoryText} → ${cgroup.label}`);
  const modes: ModeResult[] = [];
  try {
    modes.push(await runMode('constrained', cgroup, options, failures));
  } finally {
    await cgroup.remove();
  }
  modes.push(await runMode('unconstrained', undefined, options, failures));
  return { manifest, cgroup: cgroup.label, bundle: built, modes, targets: TARGETS, failures };
}
