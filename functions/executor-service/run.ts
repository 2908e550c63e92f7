import * as k8s from '@kubernetes/client-node';
import { ConfigError, loadConfig } from '../../shared/ops/config.ts';
import { CoreV1KubeClient } from '../../shared/kube/client.ts';
import { ServerClock } from '../../shared/kube/server-clock.ts';
import { jsonLogger } from '../../shared/ops/log.ts';
import { newMetrics } from '../../shared/ops/metrics.ts';
import { newProcessCaches } from '../../shared/triggers/process-state.ts';
import { sizeFactCache } from '../../shared/engine/memory.ts';
import { containerMemoryLimitBytes } from '../../shared/ops/memory-limit.ts';
import { KubeTokenReviewer } from './sender-auth.ts';
import { startFunctionServer } from './server.ts';

/**
 * The function's process: config from env, in-cluster credentials, serve until SIGTERM. Called by
 * main.ts and, in the container, by start.ts through the bundle (bundle.ts).
 */
export async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`spark-exec-svc: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const log = jsonLogger(config.logLevel);
  const kubeConfig = new k8s.KubeConfig();
  kubeConfig.loadFromDefault();
  // Node's process metrics too (CPU, memory, event loop, GC): served at /metrics with the function's own.
  const metrics = newMetrics({ processMetrics: true });
  const memory = sizeFactCache(config, containerMemoryLimitBytes());
  if (memory.held < memory.wanted) {
    log.warn('memory limit too small to remember every executor the Service cap allows: their events will cost reads', {
      wantedExecutors: memory.wanted,
      rememberedExecutors: memory.held,
      factBudgetBytes: memory.budgetBytes,
    });
  }
  // Decisions are dated by the API server's clock (its answers' Date), not this process's.
  const clock = new ServerClock();
  const server = await startFunctionServer(
    {
      client: new CoreV1KubeClient(kubeConfig, config.requestTimeoutMs, clock),
      config,
      log,
      metrics,
      caches: newProcessCaches(memory.limits),
      clock,
    },
    {
      port: config.port,
      ...(config.senderAuth === undefined ? {} : { tokenReviewer: new KubeTokenReviewer(kubeConfig, config.requestTimeoutMs) }),
    },
  );
  if (config.senderAuth === undefined) {
    log.warn(
      "sender authentication is off: any pod that can reach this function can send it events (set SENDER_AUTH=tokenreview with Knative's authentication-oidc; docs/deploy.md)",
      {},
    );
  } else {
    log.info('sender authentication on', { audience: config.senderAuth.audience, users: config.senderAuth.users });
  }
  log.info('listening', {
    port: server.port,
    namespaces: config.namespaces,
    optInMode: config.optInMode,
    cooldownSeconds: config.cooldownSeconds,
    rememberedExecutors: memory.held,
    apiServer: kubeConfig.getCurrentCluster()?.server,
  });
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal, inFlight: server.inFlight() });
    void server.shutdown().then(() => {
      log.info('stopped', metrics.summary());
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
