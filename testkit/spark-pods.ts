import { createHash } from 'node:crypto';

/**
 * Pods shaped as Apache Spark creates them on Kubernetes (labels from Constants.scala, env and
 * ownerReference from BasicDriverFeatureStep / BasicExecutorFeatureStep), in two variants: minimal
 * (driverPod, executorPod: what the function reads, for tests) and realistic (realisticDriverPod,
 * realisticExecutorPod: 4–6 KB as the watch shows them, for the bench's timings).
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
  spec: {
    containers: Array<{ name: string; image: string; env?: Array<{ name: string; value?: string; valueFrom?: unknown }>; args?: string[] }>;
  };
  status: { phase: string; podIP?: string };
}

export const OPT_IN = { 'spark-exec-svc/enabled': 'true' };

/** Spark derives pod names from the app name, lower-cased and cleaned (KubernetesConf.getResourceNamePrefix). */
const podNamePart = (appId: string): string =>
  appId
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');

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
      containers: [
        { name: 'spark-kubernetes-driver', image: 'apache/spark:4.0.0', args: ['driver', '--class', 'org.apache.spark.examples.SparkPi'] },
      ],
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
  if (opts.blockManagerPort !== undefined)
    env.push({ name: 'SPARK_JAVA_OPT_1', value: `-Dspark.blockManager.port=${opts.blockManagerPort}` });
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

// ---- An application's pods, minimal --------------------------------------------------------------

/** A driver pod body for an app (not yet seeded: the API server gives it its uid). */
export function appDriver(namespace: string, seed: number): PodBody {
  return driverPod({ namespace, appId: sparkAppId(seed), name: `bench-${seed}-driver` });
}

/** Executor pods of a seeded driver, as Spark creates them (ownerReference, port via SPARK_JAVA_OPT). */
export function appExecutors(driver: PodBody, count: number, options: { optIn?: boolean; firstId?: number } = {}): PodBody[] {
  const { namespace, name, uid, labels } = driver.metadata;
  if (uid === undefined) throw new Error('seed the driver first: executors need its uid');
  const appId = labels['spark-app-selector']!;
  const first = options.firstId ?? 1;
  return Array.from({ length: count }, (_, i) =>
    executorPod({
      namespace,
      appId,
      execId: String(first + i),
      driver: { name, uid },
      blockManagerPort: 7079,
      optIn: options.optIn ?? true,
      name: `${name.replace(/-driver$/, '')}-exec-${first + i}`,
    }),
  );
}

// ---- Realistic Spark pods (4–6 KB as the watch shows them) --------------------------------

/** A short random-looking suffix, stable per input (Kubernetes' generated name parts, token volume names). */
function suffix(text: string, length = 5): string {
  let x = 2166136261;
  for (let i = 0; i < text.length; i++) x = Math.imul(x ^ text.charCodeAt(i), 16777619) >>> 0;
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let out = '';
  for (let i = 0; i < length; i++) {
    out += alphabet[x % alphabet.length];
    x = Math.imul(x ^ (x >>> 13), 2246822519) >>> 0;
  }
  return out;
}

/** The service-account token volume every pod gets (admission adds it), with its mount. */
function apiAccessVolume(podName: string) {
  const name = `kube-api-access-${suffix(podName)}`;
  return {
    volume: {
      name,
      projected: {
        defaultMode: 420,
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
        ],
      },
    },
    mount: { name, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
  };
}

const TOLERATIONS = [
  { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
  { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
];
const SPARK_IMAGE = 'apache/spark:4.0.0-scala2.13-java17-python3-ubuntu';

/** The rest of a Spark pod's spec, the same for driver and executors: Spark's settings and the API server's defaults. */
const SPARK_POD_SPEC_REST = {
  restartPolicy: 'Never',
  terminationGracePeriodSeconds: 30,
  dnsPolicy: 'ClusterFirst',
  serviceAccountName: 'spark',
  serviceAccount: 'spark',
  securityContext: {},
  schedulerName: 'default-scheduler',
  tolerations: TOLERATIONS,
  priority: 0,
  enableServiceLinks: true,
  preemptionPolicy: 'PreemptLowerPriority',
};

const TERMINATION_MESSAGE = { terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' };

/** Spark's local dir and conf map volumes, and the token volume admission adds. */
function sparkVolumes(confVolume: string, configMap: string, key: string, tokenVolume: object): object[] {
  return [
    { name: 'spark-local-dir-1', emptyDir: {} },
    { name: confVolume, configMap: { name: configMap, defaultMode: 420, items: [{ key, path: key, mode: 420 }] } },
    tokenVolume,
  ];
}

/**
 * A Spark 4.0 driver pod as spark-submit creates it in cluster mode (BasicDriverFeatureStep,
 * DriverServiceFeatureStep, MountVolumes…), opted in by label. Not yet seeded: no uid.
 */
export function realisticDriverPod(namespace: string, seed: number): PodBody {
  const appId = sparkAppId(seed);
  const name = `bench-${seed}-driver`;
  const api = apiAccessVolume(name);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      labels: { 'spark-app-selector': appId, 'spark-app-name': 'nightly-etl', 'spark-role': 'driver', 'spark-version': '4.0.0', ...OPT_IN },
    },
    spec: {
      containers: [
        {
          name: 'spark-kubernetes-driver',
          image: SPARK_IMAGE,
          imagePullPolicy: 'IfNotPresent',
          args: [
            'driver',
            '--properties-file',
            '/opt/spark/conf/spark.properties',
            '--class',
            'com.example.NightlyEtl',
            'local:///opt/spark/jars/nightly-etl.jar',
          ],
          env: [
            { name: 'SPARK_USER', value: 'spark' },
            { name: 'SPARK_APPLICATION_ID', value: appId },
            { name: 'SPARK_DRIVER_BIND_ADDRESS', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
            { name: 'SPARK_LOCAL_DIRS', value: '/var/data/spark-0f8b1c2e-3d4a-4b5c-9d6e-7f8091a2b3c4' },
            { name: 'SPARK_CONF_DIR', value: '/opt/spark/conf' },
          ],
          ports: [
            { name: 'driver-rpc-port', containerPort: 7078, protocol: 'TCP' },
            { name: 'blockmanager', containerPort: 7079, protocol: 'TCP' },
            { name: 'spark-ui', containerPort: 4040, protocol: 'TCP' },
          ],
          resources: { limits: { memory: '2432Mi' }, requests: { cpu: '1', memory: '2432Mi' } },
          volumeMounts: [
            { name: 'spark-local-dir-1', mountPath: '/var/data/spark-0f8b1c2e-3d4a-4b5c-9d6e-7f8091a2b3c4' },
            { name: 'spark-conf-volume-driver', mountPath: '/opt/spark/conf' },
            api.mount,
          ],
          ...TERMINATION_MESSAGE,
        },
      ],
      volumes: sparkVolumes('spark-conf-volume-driver', `spark-drv-${suffix(appId, 16)}-conf-map`, 'spark.properties', api.volume),
      ...SPARK_POD_SPEC_REST,
    },
    status: { phase: 'Pending' },
  } as unknown as PodBody;
}

/**
 * A Spark 4.0 executor pod as KubernetesExecutorBuilder makes it (BasicExecutorFeatureStep:
 * labels, env with the SPARK_JAVA_OPT_<n> startup confs, resources, the driver as controller
 * owner; LocalDirsFeatureStep; the conf volume; admission's token volume and tolerations),
 * Pending, with a finalizer standing in for the kubelet's graceful termination (the bench
 * removes it when the pod "stops"). About 4.5 KB as JSON; the updates add conditions and
 * containerStatuses.
 */
export function realisticExecutorPod(driver: PodBody, execId: number, finalizer?: string): PodBody {
  const { namespace, name: driverName, uid } = driver.metadata;
  if (uid === undefined) throw new Error('seed the driver first: executors need its uid');
  const appId = driver.metadata.labels['spark-app-selector']!;
  const name = `${driverName.replace(/-driver$/, '')}-exec-${execId}`;
  const api = apiAccessVolume(name);
  const localDir = '/var/data/spark-5c1d2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5';
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      labels: {
        'spark-app-selector': appId,
        'spark-exec-id': String(execId),
        'spark-role': 'executor',
        'spark-exec-resourceprofile-id': '0',
        'spark-app-name': 'nightly-etl',
        'spark-version': '4.0.0',
        ...OPT_IN,
      },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: driverName, uid, controller: true }],
      ...(finalizer === undefined ? {} : { finalizers: [finalizer] }),
    },
    spec: {
      hostname: name,
      nodeSelector: { 'kubernetes.io/os': 'linux', 'workload-class': 'spark-batch' },
      containers: [
        {
          name: 'spark-kubernetes-executor',
          image: SPARK_IMAGE,
          imagePullPolicy: 'IfNotPresent',
          args: ['executor'],
          env: [
            { name: 'SPARK_USER', value: 'spark' },
            { name: 'SPARK_DRIVER_URL', value: `spark://CoarseGrainedScheduler@${driverName}-svc.${namespace}.svc:7078` },
            { name: 'SPARK_EXECUTOR_CORES', value: '2' },
            { name: 'SPARK_EXECUTOR_MEMORY', value: '4g' },
            { name: 'SPARK_APPLICATION_ID', value: appId },
            { name: 'SPARK_CONF_DIR', value: '/opt/spark/conf' },
            { name: 'SPARK_EXECUTOR_ID', value: String(execId) },
            { name: 'SPARK_RESOURCE_PROFILE_ID', value: '0' },
            { name: 'SPARK_EXECUTOR_POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
            { name: 'SPARK_EXECUTOR_POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
            { name: 'SPARK_JAVA_OPT_0', value: '-Dspark.driver.port=7078' },
            { name: 'SPARK_JAVA_OPT_1', value: '-Dspark.blockManager.port=7079' },
            { name: 'SPARK_JAVA_OPT_2', value: '-Dspark.network.timeout=300s' },
            { name: 'SPARK_JAVA_OPT_3', value: '-Dspark.shuffle.io.connectionCreationTimeout=10s' },
            { name: 'SPARK_LOCAL_DIRS', value: localDir },
            // From the application's pod template (spark.kubernetes.executor.podTemplateFile).
            { name: 'JAVA_TOOL_OPTIONS', value: '-XX:+UseG1GC -XX:MaxGCPauseMillis=200 -XX:+ExitOnOutOfMemoryError' },
            { name: 'AWS_REGION', value: 'eu-west-1' },
            { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:role/spark-nightly-etl' },
            { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
          ],
          ports: [{ name: 'blockmanager', containerPort: 7079, protocol: 'TCP' }],
          resources: { limits: { memory: '4505Mi' }, requests: { cpu: '2', memory: '4505Mi' } },
          volumeMounts: [
            { name: 'spark-local-dir-1', mountPath: localDir },
            { name: 'spark-conf-volume-exec', mountPath: '/opt/spark/conf' },
            api.mount,
          ],
          ...TERMINATION_MESSAGE,
        },
      ],
      volumes: sparkVolumes('spark-conf-volume-exec', `spark-exec-${suffix(appId, 16)}-conf-map`, 'spark-env.sh', api.volume),
      ...SPARK_POD_SPEC_REST,
    },
    status: { phase: 'Pending' },
  } as unknown as PodBody;
}
