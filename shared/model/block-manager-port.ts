import type { Pod } from './k8s-objects.ts';
import { PORT_ANNOTATION } from './labels.ts';

export type PortSource = 'annotation' | 'spark-java-opt' | 'default';

export type PortResolution =
  | { readonly ok: true; readonly port: number; readonly source: PortSource }
  | { readonly ok: false; readonly reason: string };

/**
 * Spark passes every `spark.*.port` setting to executors as an env var
 * `SPARK_JAVA_OPT_<n>=-Dspark.blockManager.port=<port>` (BasicExecutorFeatureStep: SparkConf
 * isExecutorStartupConf → isSparkPortConf); that is the port the executor JVM really uses.
 * The container port Spark names `blockmanager` is NOT read: Spark fills it with 7079 even when
 * spark.blockManager.port is unset and the executor listens on a random port
 * (docs/executor-recipe.md).
 */
const JAVA_OPT_ENV = /^SPARK_JAVA_OPT_\d+$/;
const BLOCK_MANAGER_PORT_OPT = /^-Dspark\.blockManager\.port=(\d+)$/;

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text.trim())) return undefined;
  const port = Number(text.trim());
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** Where the executor's block manager listens, in order: pod annotation, the pod's own spec, the configured default. */
export function resolveBlockManagerPort(pod: Pod, defaultPort: number | undefined): PortResolution {
  const annotated = pod.metadata.annotations?.[PORT_ANNOTATION];
  if (annotated !== undefined) {
    const port = parsePort(annotated);
    if (port === undefined) {
      return { ok: false, reason: `annotation ${PORT_ANNOTATION}=${JSON.stringify(annotated.slice(0, 40))} is not a port number 1-65535` };
    }
    return { ok: true, port, source: 'annotation' };
  }
  const fromOpts = portFromJavaOpts(pod);
  if (fromOpts === 'ambiguous') {
    return {
      ok: false,
      reason: 'the pod sets spark.blockManager.port to several different values (SPARK_JAVA_OPT_<n>); the executor keeps its pod IP',
    };
  }
  if (fromOpts !== undefined) return { ok: true, port: fromOpts, source: 'spark-java-opt' };
  if (defaultPort !== undefined) return { ok: true, port: defaultPort, source: 'default' };
  return {
    ok: false,
    reason:
      'no block-manager port: set spark.blockManager.port (Spark passes it as SPARK_JAVA_OPT_<n>), ' +
      `the pod annotation ${PORT_ANNOTATION}, or BLOCK_MANAGER_PORT`,
  };
}

/**
 * The port the pod's SPARK_JAVA_OPT_<n> say; 'ambiguous' when they say several: which one the
 * JVM keeps (the last -D) depends on the image's order — Spark's entrypoint sorts numerically,
 * the official images from 3.4 iterate `${!SPARK_JAVA_OPT_@}` lexically — and the executor
 * wrapper keeps the pod IP then (docs/executor-recipe.md), so no Service port can be right.
 */
function portFromJavaOpts(pod: Pod): number | 'ambiguous' | undefined {
  const found = new Set<number>();
  for (const container of pod.spec?.containers ?? []) {
    for (const env of container.env ?? []) {
      if (!JAVA_OPT_ENV.test(env.name) || env.value == null) continue;
      const match = BLOCK_MANAGER_PORT_OPT.exec(env.value.trim());
      // Port 0 (Spark's default: random) cannot be put in a Service, so it counts as "not said".
      const port = match?.[1] === undefined ? undefined : parsePort(match[1]);
      if (port !== undefined) found.add(port);
    }
  }
  if (found.size > 1) return 'ambiguous';
  return found.values().next().value;
}
