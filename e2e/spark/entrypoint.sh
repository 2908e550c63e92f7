#!/bin/bash
# STAND-IN for Spark images' /opt/entrypoint.sh, which is in no registry package (it lives in
# apache/spark resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh and in
# apache/spark-docker's images; the pyspark sdist the e2e uses carries only jars/ and bin/). It does
# what that script's `executor` branch does (read at v3.5.x and master: same command), so that
# spark/executor-entrypoint.sh has the entrypoint it expects to exec:
#   SPARK_CLASSPATH = [$SPARK_CONF_DIR:]$SPARK_CLASSPATH:$SPARK_HOME/jars/*
#   SPARK_JAVA_OPT_<n> in numeric order (`sort -t_ -k4 -n`), then
#   ${JAVA_HOME}/bin/java <opts> -Xms$SPARK_EXECUTOR_MEMORY -Xmx$SPARK_EXECUTOR_MEMORY -cp ...
#     org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend --driver-url ...
#     --executor-id ... --cores ... --app-id ... --hostname $SPARK_EXECUTOR_POD_IP
#     --resourceProfileId ... --podName ...
# Left out, as the e2e has no image: the passwd entry for an anonymous uid, HADOOP_HOME/PYSPARK_*
# handling, the `driver` branch, and tini (not installed here; `tini -s` only reaps zombies — the
# process kubelet signals the container's whole process group). `set -x` as upstream: the command
# goes to the container's log.
set -ex

SPARK_CLASSPATH="$SPARK_CLASSPATH:${SPARK_HOME}/jars/*"
java_opts_file=$(mktemp)
env | grep SPARK_JAVA_OPT_ | sort -t_ -k4 -n | sed 's/[^=]*=\(.*\)/\1/g' >"$java_opts_file"
readarray -t SPARK_EXECUTOR_JAVA_OPTS <"$java_opts_file"
rm -f "$java_opts_file"

if [ -n "$SPARK_EXTRA_CLASSPATH" ]; then
  SPARK_CLASSPATH="$SPARK_CLASSPATH:$SPARK_EXTRA_CLASSPATH"
fi
if [ -n "${SPARK_CONF_DIR+x}" ]; then
  SPARK_CLASSPATH="$SPARK_CONF_DIR:$SPARK_CLASSPATH"
elif [ -n "${SPARK_HOME+x}" ]; then
  SPARK_CLASSPATH="$SPARK_HOME/conf:$SPARK_CLASSPATH"
fi

case "$1" in
  executor)
    shift 1
    CMD=(
      "${JAVA_HOME}/bin/java"
      "${SPARK_EXECUTOR_JAVA_OPTS[@]}"
      -Xms"$SPARK_EXECUTOR_MEMORY"
      -Xmx"$SPARK_EXECUTOR_MEMORY"
      -cp "$SPARK_CLASSPATH:$SPARK_DIST_CLASSPATH"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
      --podName "$SPARK_EXECUTOR_POD_NAME"
    )
    ;;
  *)
    echo "Non-spark-on-k8s command provided, proceeding in pass-through mode..."
    CMD=("$@")
    ;;
esac

exec "${CMD[@]}"
