#!/bin/sh
# spark-exec-svc: java shim, mounted as <SPARK_EXEC_SVC_HOME>/jvm/bin/java. executor-entrypoint.sh
# points JAVA_HOME at <SPARK_EXEC_SVC_HOME>/jvm, so Spark's entrypoint runs this file as
# ${JAVA_HOME}/bin/java. It restores the real JAVA_HOME, and when the command starts Spark's
# executor backend it rewrites
#     --hostname <pod IP>   ->   --hostname <SPARK_EXEC_SVC_ADVERTISE_HOST>
# and appends
#     --bind-address <SPARK_EXEC_SVC_BIND_ADDRESS, else the replaced --hostname value>
# (KubernetesExecutorBackend / CoarseGrainedExecutorBackend bind to --hostname unless
# --bind-address is given). Every other java command runs unchanged.

real_java=${SPARK_EXEC_SVC_REAL_JAVA-}
if [ -n "${SPARK_EXEC_SVC_REAL_JAVA_HOME-}" ]; then
  JAVA_HOME=$SPARK_EXEC_SVC_REAL_JAVA_HOME
  export JAVA_HOME
else
  unset JAVA_HOME
fi
if [ -z "$real_java" ]; then
  printf '%s\n' "spark-exec-svc: java shim: SPARK_EXEC_SVC_REAL_JAVA is not set" >&2
  exit 127
fi

advertise=${SPARK_EXEC_SVC_ADVERTISE_HOST-}
is_backend=false
has_bind=false
has_hostname=false
for arg do
  case $arg in
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend | org.apache.spark.executor.CoarseGrainedExecutorBackend) is_backend=true ;;
    --bind-address) has_bind=true ;;
    --hostname) has_hostname=true ;;
  esac
done

if $is_backend && [ -n "$advertise" ] && $has_hostname; then
  bind=${SPARK_EXEC_SVC_BIND_ADDRESS-}
  first=true
  after_hostname=false
  for arg do
    if $first; then
      set --
      first=false
    fi
    if $after_hostname; then
      [ -n "$bind" ] || bind=$arg
      arg=$advertise
      after_hostname=false
    elif [ "$arg" = --hostname ]; then
      after_hostname=true
    fi
    set -- "$@" "$arg"
  done
  if $has_bind; then
    printf '%s\n' "spark-exec-svc: java shim: executor backend --hostname $advertise (--bind-address already given)" >&2
  elif [ -n "$bind" ]; then
    set -- "$@" --bind-address "$bind"
    printf '%s\n' "spark-exec-svc: java shim: executor backend --hostname $advertise --bind-address $bind" >&2
  else
    printf '%s\n' "spark-exec-svc: java shim: no address to bind; the executor would bind to $advertise, aborting" >&2
    exit 1
  fi
fi
exec "$real_java" "$@"
