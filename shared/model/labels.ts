/**
 * Label and annotation keys: Spark's own (read from apache/spark
 * resource-managers/kubernetes Constants.scala) and the ones this project owns.
 */

/** Spark's pod labels. */
export const SPARK_ROLE_LABEL = 'spark-role';
export const SPARK_APP_ID_LABEL = 'spark-app-selector';
export const SPARK_EXECUTOR_ID_LABEL = 'spark-exec-id';
export const SPARK_ROLE_EXECUTOR = 'executor';
export const SPARK_ROLE_DRIVER = 'driver';

/** Port name used by Spark's own per-executor Service (SPARK-52505). */
export const BLOCK_MANAGER_PORT_NAME = 'spark-block-manager';

/** Prefix of every label/annotation key this project owns. */
export const OWN_PREFIX = 'spark-exec-svc';

/** Marks a Service as ours; every list and every write checks it. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'spark-exec-svc';

/** Opt-in: label or annotation, on the executor pod or its driver pod, value "true". */
export const OPT_IN_KEY = `${OWN_PREFIX}/enabled`;

/** Pod annotation that sets the block-manager port explicitly (highest precedence). */
export const PORT_ANNOTATION = `${OWN_PREFIX}/block-manager-port`;

/**
 * Service annotations: which executor incarnation the Service is for (with the owner reference,
 * its identity), and when that executor was verified gone (starts the cool-down).
 */
export const EXECUTOR_POD_ANNOTATION = `${OWN_PREFIX}/executor-pod`;
export const EXECUTOR_UID_ANNOTATION = `${OWN_PREFIX}/executor-uid`;
export const DRIVER_POD_ANNOTATION = `${OWN_PREFIX}/driver-pod`;
export const EXECUTOR_GONE_AT_ANNOTATION = `${OWN_PREFIX}/executor-gone-at`;
