/**
 * Sections 1 (overhead per event) and 3 (burst): N executor Services made
 *   - by the function: N executor-add CloudEvents over HTTP → the real entry point (child
 *     process, as the container runs it) → one create each;
 *   - by the floor: a bare loop of CoreV1Api.createNamespacedService (client-node) for the
 *     very same N Service bodies, in this process.
 * Each variant gets a fresh emulator process, so both do exactly the same work against an
 * identical store. Both are warmed up first (JIT) on another namespace.
 */
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { desiredExecutorService } from '../../shared/model/service-spec.ts';
import { monotonicUs, summarizeProfile, type ProfileSummary } from '../lib/cpuprofile.ts';
import { AdapterSender, podEvent, pool } from '../../testkit/apiserversource.ts';
import { type PodBody, appDriver, appExecutors } from '../../testkit/spark-pods.ts';
import { cpuMs, openSockets, ownCpuMs, startEmulatorProcess, startFunctionProcess, type EmulatorProcess } from '../lib/procs.ts';
import { type Latency, latency, round } from '../lib/stats.ts';

export const NAMESPACE = 'bench';
const WARM_NAMESPACE = 'bench-warm';

export interface VariantResult {
  readonly variant: 'function' | 'bare-client' | 'bare-client+reuse';
  readonly concurrency: number;
  readonly apiLatencyMs: number;
  readonly latency: Latency;
  /** CPU ms per event spent in each process during the timed part. */
  readonly cpuMsPerEvent: { readonly sender: number; readonly function?: number; readonly emulator: number };
  /** API requests the emulator saw during the timed part, by verb. */
  readonly apiCalls: Record<string, number>;
  readonly servicesCreated: number;
  readonly errors: number;
  /** Function only: sockets the function process holds right after the timed part. */
  readonly openSockets?: number;
  readonly profile?: ProfileSummary | undefined;
}

export interface RunOptions {
  readonly n: number;
  readonly concurrency: number;
  readonly warmup: number;
  readonly entry: string;
  /** Added by the emulator to every API request (0 = loopback only). */
  readonly apiLatencyMs?: number;
  /** Floor only: send every request through one undici dispatcher (what CoreV1KubeClient does). */
  readonly reuseConnections?: boolean;
  /** Where the function's log goes (function-<tag>.log). */
  readonly resultsDir: string;
  /** Write a CPU profile of the function process and summarize it. */
  readonly profileDir?: string | undefined;
  readonly log: (line: string) => void;
}

/** One app with n executors, seeded (driver + executor pods exist, as in a real cluster). */
async function seedApp(
  emulator: EmulatorProcess,
  namespace: string,
  seed: number,
  n: number,
): Promise<{ driver: PodBody; executors: PodBody[] }> {
  const [driver] = await emulator.seed([appDriver(namespace, seed)]);
  const executors: PodBody[] = [];
  // Bounded IPC messages: seed in chunks.
  for (let first = 1; first <= n; first += 500) {
    executors.push(...(await emulator.seed(appExecutors(driver!, Math.min(500, n - first + 1), { firstId: first }))));
  }
  return { driver: driver!, executors };
}

function serviceBodyFor(executor: PodBody, driver: PodBody) {
  const identity = {
    appId: executor.metadata.labels['spark-app-selector']!,
    execId: executor.metadata.labels['spark-exec-id']!,
    executor: { name: executor.metadata.name, uid: executor.metadata.uid! },
    owner: { name: driver.metadata.name, uid: driver.metadata.uid! },
  };
  return desiredExecutorService(executor.metadata.namespace, identity, 7079);
}

export async function runBareClient(options: RunOptions): Promise<VariantResult> {
  const emulator = await startEmulatorProcess();
  try {
    const app = await seedApp(emulator, NAMESPACE, 1, options.n);
    const warm = await seedApp(emulator, WARM_NAMESPACE, 2, options.warmup);
    await emulator.call({ op: 'latency', ms: options.apiLatencyMs ?? 0 });
    const kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromFile(emulator.kubeconfig);
    const api = kubeConfig.makeApiClient(k8s.CoreV1Api);
    const requestOptions = options.reuseConnections === true ? reuseConnectionOptions() : undefined;
    const warmBodies = warm.executors.map((e) => serviceBodyFor(e, warm.driver));
    const bodies = app.executors.map((e) => serviceBodyFor(e, app.driver));
    await pool(warmBodies.length, options.concurrency, async (i) => {
      await api.createNamespacedService({ namespace: WARM_NAMESPACE, body: warmBodies[i]! }, requestOptions);
    });
    await emulator.reset();
    const samples = new Array<number>(options.n);
    let errors = 0;
    const emulatorCpu0 = cpuMs(emulator.pid);
    const ownCpu0 = ownCpuMs();
    const started = performance.now();
    await pool(options.n, options.concurrency, async (i) => {
      const t0 = performance.now();
      try {
        await api.createNamespacedService({ namespace: NAMESPACE, body: bodies[i]! }, requestOptions);
      } catch {
        errors++;
      }
      samples[i] = performance.now() - t0;
    });
    const wallMs = performance.now() - started;
    const cpuMsPerEvent = {
      sender: round((ownCpuMs() - ownCpu0) / options.n, 3),
      emulator: round((cpuMs(emulator.pid) - emulatorCpu0) / options.n, 3),
    };
    return {
      variant: options.reuseConnections === true ? 'bare-client+reuse' : 'bare-client',
      concurrency: options.concurrency,
      apiLatencyMs: options.apiLatencyMs ?? 0,
      latency: latency(samples, wallMs),
      cpuMsPerEvent,
      apiCalls: await emulator.countByVerb(),
      servicesCreated: await emulator.countObjects('services', NAMESPACE),
      errors,
    };
  } finally {
    await emulator.stop();
  }
}

export async function runFunction(options: RunOptions): Promise<VariantResult> {
  const emulator = await startEmulatorProcess();
  let profile: ProfileSummary | undefined;
  try {
    const app = await seedApp(emulator, NAMESPACE, 1, options.n);
    const warm = await seedApp(emulator, WARM_NAMESPACE, 2, options.warmup);
    await emulator.call({ op: 'latency', ms: options.apiLatencyMs ?? 0 });
    const tag = `c${options.concurrency}-n${options.n}${options.apiLatencyMs ? `-lat${options.apiLatencyMs}` : ''}`;
    const nodeArgs =
      options.profileDir === undefined
        ? []
        : ['--cpu-prof', `--cpu-prof-dir=${options.profileDir}`, `--cpu-prof-name=function-${tag}.cpuprofile`];
    const fn = await startFunctionProcess({
      entry: options.entry,
      kubeconfig: emulator.kubeconfig,
      nodeArgs,
      logFile: join(options.resultsDir, `function-${tag}.log`),
    });
    const poster = new AdapterSender(fn.url, { concurrency: options.concurrency });
    try {
      const warmEvents = warm.executors.map((e) => podEvent('add', e));
      const events = app.executors.map((e) => podEvent('add', e));
      let errors = 0;
      // Answered with its Service made: by this event, or by the first add whose list found it
      // (the others wait for that one, then find the Service remembered: "verified").
      const record = (status: number, type: string | undefined): void => {
        if (status !== 200 || (type !== 'spark-exec-svc.service.created' && type !== 'spark-exec-svc.service.verified')) errors++;
      };
      await pool(warmEvents.length, options.concurrency, async (i) => {
        const r = await poster.post(warmEvents[i]!);
        record(r.status, r.type);
      });
      if (errors > 0) throw new Error(`warm-up: ${errors} events not answered "service.created" or "service.verified"`);
      await emulator.reset();
      const samples = new Array<number>(options.n);
      const emulatorCpu0 = cpuMs(emulator.pid);
      const fnCpu0 = cpuMs(fn.pid);
      const ownCpu0 = ownCpuMs();
      const fromUs = monotonicUs();
      const started = performance.now();
      await pool(options.n, options.concurrency, async (i) => {
        const r = await poster.post(events[i]!).catch(() => ({ status: 0, ms: Number.NaN, type: undefined }));
        samples[i] = r.ms;
        record(r.status, r.type);
      });
      const wallMs = performance.now() - started;
      const toUs = monotonicUs();
      const sockets = openSockets(fn.pid);
      const cpuMsPerEvent = {
        sender: round((ownCpuMs() - ownCpu0) / options.n, 3),
        function: round((cpuMs(fn.pid) - fnCpu0) / options.n, 3),
        emulator: round((cpuMs(emulator.pid) - emulatorCpu0) / options.n, 3),
      };
      const result: VariantResult = {
        variant: 'function',
        concurrency: options.concurrency,
        apiLatencyMs: options.apiLatencyMs ?? 0,
        latency: latency(samples, wallMs),
        cpuMsPerEvent,
        apiCalls: await emulator.countByVerb(),
        servicesCreated: await emulator.countObjects('services', NAMESPACE),
        errors,
        openSockets: sockets,
      };
      poster.close();
      await fn.stop();
      if (options.profileDir !== undefined)
        profile = summarizeProfile(join(options.profileDir, `function-${tag}.cpuprofile`), { fromUs, toUs });
      return { ...result, profile };
    } finally {
      poster.close();
      await fn.stop();
    }
  } finally {
    await emulator.stop();
  }
}

/**
 * The floor with the same connection handling as CoreV1KubeClient: client-node builds a new
 * undici Agent (so a new connection) for every request when the cluster has TLS settings; this
 * keeps the first one and sends every request through it.
 */
export function reuseConnectionOptions(
  contentType?: string,
  /** Share one pool between several option sets (e.g. plain requests and merge patches). */
  pool: { dispatcher?: ReturnType<k8s.RequestContext['getDispatcher']> } = {},
): k8s.ConfigurationOptions {
  const middleware: k8s.ObservableMiddleware = {
    pre: (context) => {
      const fresh = context.getDispatcher();
      if (pool.dispatcher === undefined) pool.dispatcher = fresh;
      else context.setDispatcher(pool.dispatcher);
      if (contentType !== undefined) context.setHeaderParam('Content-Type', contentType);
      return new k8s.Observable(Promise.resolve(context));
    },
    post: (context) => new k8s.Observable(Promise.resolve(context)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}
