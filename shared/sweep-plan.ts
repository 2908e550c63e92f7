import { resolveBlockManagerPort } from './block-manager-port.ts';
import type { Config } from './config.ts';
import { isCooldownExpired } from './cooldown.ts';
import type { Pod, Service } from './k8s-objects.ts';
import { SPARK_APP_ID_LABEL, SPARK_EXECUTOR_ID_LABEL } from './labels.ts';
import { desiredExecutorService, executorGoneAt, isOurService, serviceDriftPatch } from './service-spec.ts';
import { type PodIdentity, type SparkExecutor, classifySparkPod, hasOptIn, isPodFinished } from './spark-pod.ts';

export type SweepStep =
  /** A live, opted-in executor whose Service is missing or has drifted. */
  | { readonly kind: 'ensure'; readonly executor: SparkExecutor; readonly why: string }
  /** Our Service whose executor is gone but whose cool-down has not started. */
  | { readonly kind: 'mark-gone'; readonly service: Service }
  /** Our Service with no live owner, or whose cool-down is over. */
  | { readonly kind: 'delete'; readonly service: Service; readonly why: string };

export interface SweepSnapshot {
  readonly executors: readonly Pod[];
  readonly drivers: readonly Pod[];
  readonly services: readonly Service[];
}

/**
 * Compares one namespace's Spark pods with our Services and lists the repairs, without I/O.
 * Services that are someone else's are never in the plan.
 */
export function planSweep(snapshot: SweepSnapshot, config: Config, now: Date): SweepStep[] {
  const steps: SweepStep[] = [];
  const liveDrivers = new Map<string, Pod>();
  const liveDriversByApp = new Map<string, Pod[]>();
  for (const pod of snapshot.drivers) {
    const spark = classifySparkPod(pod);
    if (spark?.role !== 'driver' || isPodFinished(pod) || pod.metadata.uid === undefined) continue;
    liveDrivers.set(pod.metadata.uid, pod);
    liveDriversByApp.set(spark.appId, [...(liveDriversByApp.get(spark.appId) ?? []), pod]);
  }
  const servicesByName = new Map(snapshot.services.map((s) => [s.metadata.name, s]));
  const liveExecutorKeys = new Set<string>();

  for (const pod of snapshot.executors) {
    const spark = classifySparkPod(pod);
    if (spark?.role !== 'executor' || isPodFinished(pod)) continue;
    liveExecutorKeys.add(executorKey(spark.appId, spark.execId));
    const driver = driverOf(spark, liveDriversByApp);
    const driverPod = driver === undefined ? undefined : liveDrivers.get(driver.uid);
    if (driver === undefined || driverPod === undefined) continue; // no live owner: a Service would be collected at once
    if (config.optInMode === 'label' && !hasOptIn(pod) && !hasOptIn(driverPod)) continue;
    const port = resolveBlockManagerPort(pod, config.defaultBlockManagerPort);
    if (!port.ok) continue;
    const desired = desiredExecutorService({
      namespace: pod.metadata.namespace,
      appId: spark.appId,
      execId: spark.execId,
      executorPodName: pod.metadata.name,
      driver,
      port: port.port,
    });
    const existing = servicesByName.get(desired.metadata.name);
    if (existing === undefined) steps.push({ kind: 'ensure', executor: { ...spark, driver }, why: 'missing' });
    else if (isOurService(existing) && executorGoneAt(existing) === undefined && serviceDriftPatch(existing, desired) !== undefined) {
      steps.push({ kind: 'ensure', executor: { ...spark, driver }, why: 'drifted' });
    }
  }

  for (const service of snapshot.services) {
    if (!isOurService(service)) continue;
    const owners = service.metadata.ownerReferences ?? [];
    if (!owners.some((owner) => liveDrivers.has(owner.uid))) {
      steps.push({ kind: 'delete', service, why: owners.length === 0 ? 'stray: no owner' : 'driver gone' });
      continue;
    }
    const labels = service.metadata.labels ?? {};
    const key = executorKey(labels[SPARK_APP_ID_LABEL] ?? '', labels[SPARK_EXECUTOR_ID_LABEL] ?? '');
    if (liveExecutorKeys.has(key)) continue;
    if (executorGoneAt(service) === undefined) {
      if (config.cooldownSeconds > 0) steps.push({ kind: 'mark-gone', service });
    } else if (isCooldownExpired(service, now, config.cooldownSeconds)) {
      steps.push({ kind: 'delete', service, why: 'cool-down over' });
    }
  }
  return steps;
}

function executorKey(appId: string, execId: string): string {
  return `${appId}\u0000${execId}`;
}

/** The owner from the executor's ownerReference, else the app's only live driver. */
function driverOf(executor: SparkExecutor, liveDriversByApp: Map<string, Pod[]>): PodIdentity | undefined {
  if (executor.driver !== undefined) return executor.driver;
  const candidates = liveDriversByApp.get(executor.appId) ?? [];
  const only = candidates.length === 1 ? candidates[0] : undefined;
  const uid = only?.metadata.uid;
  return only === undefined || uid === undefined ? undefined : { namespace: only.metadata.namespace, name: only.metadata.name, uid };
}
