import { KubeTokenReviewer } from '../functions/executor-service/sender-auth.ts';
import { startFunctionServer, type FunctionServer } from '../functions/executor-service/server.ts';
import { type Config, loadConfig } from '../shared/ops/config.ts';
import { CoreV1KubeClient } from '../shared/kube/client.ts';
import { ServerClock } from '../shared/kube/server-clock.ts';
import { type Logger, jsonLogger } from '../shared/ops/log.ts';
import { type Metrics, newMetrics } from '../shared/ops/metrics.ts';
import { type ProcessCaches, newProcessCaches } from '../shared/triggers/process-state.ts';
import { type FactCacheLimits, sizeFactCache } from '../shared/engine/memory.ts';
import { type KubeEmulator, startEmulator } from '../packages/kube-emulator/index.ts';
import { type ContentMode, type PostedReply, postPodEvent } from './apiserversource.ts';
import type { PodBody } from './spark-pods.ts';

export interface Harness {
  readonly emulator: KubeEmulator;
  readonly fn: FunctionServer;
  readonly url: string;
  readonly config: Config;
  readonly metrics: Metrics;
  /** The process's caches (for tests of their bounds only: assert on behaviour, not on these). */
  readonly caches: ProcessCaches;
  /** Log lines the function wrote, parsed. */
  readonly logs: Array<Record<string, unknown>>;
  /** Creates the pod in the emulator (as the kubelet's world would) and returns it with uid etc. */
  createPod(pod: PodBody): PodBody;
  /** Sends a Resource-mode event for the pod's current (or given) state. */
  send(verb: 'add' | 'update' | 'delete', pod: PodBody, mode?: ContentMode): Promise<PostedReply>;
  /** Sends a Reference-mode event. */
  sendRef(verb: 'add' | 'update' | 'delete', namespace: string, name: string): Promise<PostedReply>;
  services(namespace: string): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly logger?: Logger;
  /**
   * This instance's own wall clock (default: the real one). The function dates its decisions by the
   * API server's clock, which only runs on by this one between answers: a constant skew here changes
   * nothing (test/adversarial/clock-skew.test.ts). To make time pass, move the API server's clock.
   */
  readonly localClock?: () => Date;
  /** The clock of the emulator this harness starts (not with `emulator`: give that one its own `clock`). */
  readonly apiServerClock?: () => Date;
  /** Share another harness's API server (e.g. two function instances); it is then not stopped by close(). */
  readonly emulator?: KubeEmulator;
  /** The function's metrics (its own prom-client Registry); default: a new one without Node's process metrics. */
  readonly metrics?: Metrics;
  /** What the function's memory holds; default: sized from the configuration as run.ts does (no memory limit). */
  readonly factLimits?: FactCacheLimits;
}

/** Time that passes for everyone: the emulator this harness starts and the instance read the same clock (a test moves it). */
export const passingTime = (clock: () => Date): Pick<HarnessOptions, 'apiServerClock' | 'localClock'> => ({
  apiServerClock: clock,
  localClock: clock,
});

export async function startHarness(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Harness> {
  if (opts.emulator !== undefined && opts.apiServerClock !== undefined)
    throw new Error('apiServerClock is the clock of an emulator this harness starts');
  const emulator = opts.emulator ?? (await startEmulator(opts.apiServerClock === undefined ? {} : { clock: opts.apiServerClock }));
  // Tests send sweeps back to back: no coalescing (SWEEP_MIN_INTERVAL_MS) unless a test asks for it.
  // They also send bursts of 100+ events straight at the function; in a cluster Knative's
  // queue-proxy sits in front and holds in-flight requests to containerConcurrency (20), so the
  // default MAX_CONNECTIONS (64) is raised here unless a test sets it.
  const config = loadConfig(
    {
      WATCH_NAMESPACES: 'spark',
      BLOCK_MANAGER_PORT: '7079',
      LOG_LEVEL: 'debug',
      SWEEP_MIN_INTERVAL_MS: '0',
      MAX_CONNECTIONS: '10000',
      ...env,
    },
    () => undefined,
  );
  const logs: Array<Record<string, unknown>> = [];
  const log = opts.logger ?? jsonLogger('debug', (line) => logs.push(JSON.parse(line) as Record<string, unknown>));
  const metrics = opts.metrics ?? newMetrics();
  // Sized as run.ts sizes it, without a container memory limit, unless the test asks for less.
  const caches = newProcessCaches(opts.factLimits ?? sizeFactCache(config, undefined).limits);
  const localClock = opts.localClock;
  const clock = new ServerClock(localClock === undefined ? undefined : () => localClock().getTime());
  const fn = await startFunctionServer(
    {
      client: new CoreV1KubeClient(emulator.kubeConfig(), config.requestTimeoutMs, clock),
      config,
      log,
      metrics,
      caches,
      clock,
    },
    {
      port: 0,
      host: '127.0.0.1',
      // As run.ts: SENDER_AUTH=tokenreview asks this API server (the emulator's TokenReview).
      ...(config.senderAuth === undefined ? {} : { tokenReviewer: new KubeTokenReviewer(emulator.kubeConfig(), config.requestTimeoutMs) }),
    },
  );
  const url = `http://127.0.0.1:${fn.port}/`;
  return {
    emulator,
    fn,
    url,
    config,
    metrics,
    caches,
    logs,
    createPod: (pod) => emulator.seed(pod) as PodBody,
    send: (verb, pod, mode = 'binary') => postPodEvent(url, verb, pod, { content: mode }),
    sendRef: (verb, namespace, name) => postPodEvent(url, verb, { metadata: { namespace, name } }, { mode: 'ref' }),
    services: (namespace) => emulator.listObjects('services', namespace),
    async close() {
      await fn.shutdown(1000);
      if (opts.emulator === undefined) await emulator.stop();
    },
  };
}
