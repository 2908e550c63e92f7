import { createHash } from 'node:crypto';

/**
 * Pods shaped as Apache Spark creates them on Kubernetes (labels from Constants.scala,
 * env and ownerReference from BasicDriverFeatureStep / BasicExecutorFeatureStep).
 */
export interface PodBody {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
    deletionTimestamp?: string;
  };
  spec: { containers: Array<{ name: string; image: string; env?: Array<{ name: string; value?: string; valueFrom?: unknown }>; args?: string[] }> };
  status: { phase: string; podIP?: string };
}

export const OPT_IN = { 'spark-exec-svc/enabled': 'true' };

/** Spark derives pod names from the app name, lower-cased and cleaned (KubernetesConf.getResourceNamePrefix). */
const podNamePart = (appId: string): string => appId.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '');

export function driverPod(opts: { namespace: string; appId: string; name?: string; optIn?: boolean; phase?: string }): PodBody {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: opts.name ?? `${podNamePart(opts.appId).slice(0, 40)}-driver`,
      namespace: opts.namespace,
      labels: {
        'spark-app-selector': opts.appId,
        'spark-role': 'driver',
        'spark-app-name': 'spark-pi',
        'spark-version': '4.0.0',
        ...(opts.optIn === false ? {} : OPT_IN),
      },
    },
    spec: {
      containers: [{ name: 'spark-kubernetes-driver', image: 'apache/spark:4.0.0', args: ['driver', '--class', 'org.apache.spark.examples.SparkPi'] }],
    },
    status: { phase: opts.phase ?? 'Running' },
  };
}

export function executorPod(opts: {
  namespace: string;
  appId: string;
  execId: string;
  driver?: { name: string; uid: string } | undefined;
  blockManagerPort?: number | undefined;
  optIn?: boolean;
  phase?: string;
  name?: string;
}): PodBody {
  const env: Array<{ name: string; value?: string; valueFrom?: unknown }> = [
    { name: 'SPARK_USER', value: 'spark' },
    { name: 'SPARK_DRIVER_URL', value: 'spark://CoarseGrainedScheduler@spark-pi-driver-svc.spark.svc:7078' },
    { name: 'SPARK_EXECUTOR_CORES', value: '1' },
    { name: 'SPARK_EXECUTOR_MEMORY', value: '1g' },
    { name: 'SPARK_APPLICATION_ID', value: opts.appId },
    { name: 'SPARK_CONF_DIR', value: '/opt/spark/conf' },
    { name: 'SPARK_EXECUTOR_ID', value: opts.execId },
    { name: 'SPARK_RESOURCE_PROFILE_ID', value: '0' },
    { name: 'SPARK_EXECUTOR_POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
    { name: 'SPARK_JAVA_OPT_0', value: '-Dspark.driver.port=7078' },
  ];
  if (opts.blockManagerPort !== undefined) env.push({ name: 'SPARK_JAVA_OPT_1', value: `-Dspark.blockManager.port=${opts.blockManagerPort}` });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: opts.name ?? `spark-pi-${createHash('sha256').update(opts.appId).digest('hex').slice(0, 8)}-exec-${opts.execId}`,
      namespace: opts.namespace,
      labels: {
        'spark-app-selector': opts.appId,
        'spark-exec-id': opts.execId,
        'spark-role': 'executor',
        'spark-exec-resourceprofile-id': '0',
        'spark-app-name': 'spark-pi',
        'spark-version': '4.0.0',
        ...(opts.optIn === true ? OPT_IN : {}),
      },
      ownerReferences:
        opts.driver === undefined
          ? undefined
          : [{ apiVersion: 'v1', kind: 'Pod', name: opts.driver.name, uid: opts.driver.uid, controller: true }],
    },
    spec: { containers: [{ name: 'spark-kubernetes-executor', image: 'apache/spark:4.0.0', env, args: ['executor'] }] },
    status: { phase: opts.phase ?? 'Running', podIP: '10.244.1.7' },
  };
}

/** A Spark default application id: "spark-" + 32 hex digits. */
export function sparkAppId(seed: number): string {
  let hex = '';
  let x = seed >>> 0 || 1;
  for (let i = 0; i < 32; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    hex += ((x >>> 0) % 16).toString(16);
  }
  return `spark-${hex}`;
}

export function nonSparkPod(namespace: string, name: string): PodBody {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: 'nginx' } },
    spec: { containers: [{ name: 'nginx', image: 'nginx:1.27' }] },
    status: { phase: 'Running' },
  };
}
