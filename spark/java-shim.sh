#!/bin/sh
# spark-exec-svc: java shim, mounted as <SPARK_EXEC_SVC_HOME>/jvm/bin/java. executor-entrypoint.sh
# points JAVA_HOME at <SPARK_EXEC_SVC_HOME>/jvm, so Spark's entrypoint runs this file as
# ${JAVA_HOME}/bin/java. It restores the real JAVA_HOME, and when the command starts Spark's
# executor backend it rewrites
#     --hostname <pod IP>   ->   --hostname <SPARK_EXEC_SVC_ADVERTISE_HOST>
# appends
#     --bind-address <SPARK_EXEC_SVC_BIND_ADDRESS, else the replaced --hostname value>
# (KubernetesExecutorBackend / CoarseGrainedExecutorBackend bind to --hostname unless
# --bind-address is given) and puts
#     -Dspark.port.maxRetries=0
# right before the backend's class name, after every other JVM option, so that it is the value the
# JVM keeps: Utils.startServiceOnPort then binds the block manager on exactly
# spark.blockManager.port or fails the executor, instead of moving to port+1, which the Service does
# not forward. On an executor that is the only port it affects (see docs/executor-recipe.md).
# If the JVM would not get spark.blockManager.port=SPARK_EXEC_SVC_PORT (the port the Service
# forwards), nothing is rewritten and the executor keeps its pod IP. Every other java command runs
# unchanged.

log() {
  printf 'spark-exec-svc: java shim: %s\n' "$*" >&2
}

real_java=${SPARK_EXEC_SVC_REAL_JAVA-}
if [ -n "${SPARK_EXEC_SVC_REAL_JAVA_HOME-}" ]; then
  JAVA_HOME=$SPARK_EXEC_SVC_REAL_JAVA_HOME
  export JAVA_HOME
else
  unset JAVA_HOME
fi
if [ -z "$real_java" ]; then
  log "SPARK_EXEC_SVC_REAL_JAVA is not set"
  exit 127
fi

advertise=${SPARK_EXEC_SVC_ADVERTISE_HOST-}
expected_port=${SPARK_EXEC_SVC_PORT-}
is_backend=false
has_bind=false
has_hostname=false
jvm_port=
for arg do
  if ! $is_backend; then
    case $arg in
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend | org.apache.spark.executor.CoarseGrainedExecutorBackend) is_backend=true ;;
      -Dspark.blockManager.port=*) jvm_port=${arg#-Dspark.blockManager.port=} ;; # a JVM option: the last one counts
    esac
    continue
  fi
  case $arg in
    --bind-address) has_bind=true ;;
    --hostname) has_hostname=true ;;
  esac
done

if $is_backend && [ -n "$advertise" ] && $has_hostname; then
  if [ -n "$expected_port" ] && [ "$jvm_port" != "$expected_port" ]; then
    log "the executor JVM gets spark.blockManager.port=${jvm_port:-<unset>} but the Service forwards $expected_port: executor keeps advertising its pod IP"
    exec "$real_java" "$@"
  fi
  bind=${SPARK_EXEC_SVC_BIND_ADDRESS-}
  first=true
  in_jvm_opts=true
  after_hostname=false
  for arg do
    if $first; then
      set --
      first=false
    fi
    if $in_jvm_opts; then
      case $arg in
        org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend | org.apache.spark.executor.CoarseGrainedExecutorBackend)
          set -- "$@" -Dspark.port.maxRetries=0
          in_jvm_opts=false
          ;;
      esac
    elif $after_hostname; then
      [ -n "$bind" ] || bind=$arg
      arg=$advertise
      after_hostname=false
    elif [ "$arg" = --hostname ]; then
      after_hostname=true
    fi
    set -- "$@" "$arg"
  done
  if $has_bind; then
    log "executor backend --hostname $advertise (--bind-address already given), -Dspark.port.maxRetries=0"
  elif [ -n "$bind" ]; then
    set -- "$@" --bind-address "$bind"
    log "executor backend --hostname $advertise --bind-address $bind, -Dspark.port.maxRetries=0"
  else
    log "no address to bind; the executor would bind to $advertise, aborting"
    exit 1
  fi
fi
exec "$real_java" "$@"
