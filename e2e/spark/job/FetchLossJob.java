// The e2e's Spark job (ours; compiled by e2e/build.sh against the jars of each pyspark sdist).
//
// A shuffle spread over N executors, then a reduce stage whose tasks fetch from all of them while
// one executor vanishes. Run in client mode by spark-submit in a driver pod (e2e/scenarios/spark.e2e.ts):
//
//   FetchLossJob <control dir> <executors N> <data partitions R> <records>
//
// Stage 0 (map): N partitions of `records` numbers, one map task per executor (N executors of one
// core each, all registered before the job starts), keyed into R "data" partitions.
// Stage 1 (reduce) has N + R partitions. Partitions 0..N-1 ("gates") get no data: each one reads
// its (empty) shuffle input — which makes its executor fetch the shuffle's map statuses from the
// driver and cache them (MapOutputTrackerWorker) — writes <control>/gate-<partition>-<executor id>
// and waits for <control>/go. With spark.shuffle.reduceLocality.enabled=false no task has a
// preferred location, so the gates, the lowest indices, are launched first, one per executor
// (one core each), and no data partition can start before the gates end. The harness makes the
// executor vanish while the gates wait and then writes `go`: the data partitions run on the
// executors left, with the map statuses cached before the loss (tasks carry the epoch of their
// stage's submission, so the cache is kept), and fetch from the lost executor with a NEW
// connection (no executor has connected to a peer before: the gates fetch nothing). What that
// connect does — refused at once through the executor's Service, or unanswered at its pod IP — is
// what the e2e measures.
//
// A listener records executors, stages, task ends (FetchFailed with its block manager address and
// message) and the job's end, with wall-clock times; <control>/result.json gets them and the
// job's answer, checked against the input (every record counted once, the sum exact).
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.FetchFailed;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskEndReason;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import scala.Tuple2;

public final class FetchLossJob {
  /** Keys go to partitions N..N+R-1 only; 0..N-1 stay empty (the gates). */
  static final class GatedPartitioner extends Partitioner {
    private final int gates;
    private final int data;

    GatedPartitioner(int gates, int data) {
      this.gates = gates;
      this.data = data;
    }

    @Override
    public int numPartitions() {
      return gates + data;
    }

    @Override
    public int getPartition(Object key) {
      return gates + Math.floorMod(((Long) key).intValue(), data);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof GatedPartitioner && ((GatedPartitioner) o).gates == gates && ((GatedPartitioner) o).data == data;
    }

    @Override
    public int hashCode() {
      return 31 * gates + data;
    }
  }

  /** Map.of without its ban on null values (a FetchFailed of missing map output has no block manager). */
  static Map<String, Object> fields(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
    return m;
  }

  static final class Recorder extends SparkListener {
    final List<Map<String, Object>> events = Collections.synchronizedList(new ArrayList<>());

    long jobEnds() {
      synchronized (events) {
        return events.stream().filter(e -> "jobEnd".equals(e.get("kind"))).count();
      }
    }

    private void add(String kind, Map<String, Object> fields) {
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("kind", kind);
      e.put("atMs", System.currentTimeMillis());
      e.putAll(fields);
      events.add(e);
    }

    @Override
    public void onExecutorAdded(SparkListenerExecutorAdded e) {
      add("executorAdded", fields("executorId", e.executorId(), "host", e.executorInfo().executorHost(), "eventTimeMs", e.time()));
    }

    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved e) {
      add("executorRemoved", fields("executorId", e.executorId(), "reason", String.valueOf(e.reason()), "eventTimeMs", e.time()));
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted e) {
      add("stageSubmitted", fields("stageId", e.stageInfo().stageId(), "attempt", e.stageInfo().attemptNumber(), "name", e.stageInfo().name()));
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted e) {
      String failure = e.stageInfo().failureReason().isDefined() ? e.stageInfo().failureReason().get() : "";
      add("stageCompleted", fields("stageId", e.stageInfo().stageId(), "attempt", e.stageInfo().attemptNumber(), "failureReason", failure));
    }

    @Override
    public void onTaskStart(SparkListenerTaskStart e) {
      add("taskStart", fields("stageId", e.stageId(), "partition", e.taskInfo().index(), "executorId", e.taskInfo().executorId(), "host", e.taskInfo().host()));
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      TaskEndReason reason = e.reason();
      Map<String, Object> f = new LinkedHashMap<>();
      f.put("stageId", e.stageId());
      f.put("stageAttempt", e.stageAttemptId());
      f.put("partition", e.taskInfo().index());
      f.put("executorId", e.taskInfo().executorId());
      f.put("reason", reason.getClass().getSimpleName().replace("$", ""));
      if (reason instanceof FetchFailed) {
        FetchFailed ff = (FetchFailed) reason;
        // null for "missing an output location" (MetadataFetchFailedException): no peer was asked
        if (ff.bmAddress() != null) {
          f.put("fetchFrom", fields("executorId", ff.bmAddress().executorId(), "host", ff.bmAddress().host(), "port", ff.bmAddress().port()));
        }
        f.put("message", ff.message());
      } else if (!"Success".equals(f.get("reason"))) {
        f.put("message", reason.toString());
      }
      // blocks and bytes this task fetched from other executors (or their shuffle services)
      if (e.taskMetrics() != null && e.taskMetrics().shuffleReadMetrics().remoteBlocksFetched() > 0) {
        f.put("remoteBlocksFetched", e.taskMetrics().shuffleReadMetrics().remoteBlocksFetched());
        f.put("remoteBytesRead", e.taskMetrics().shuffleReadMetrics().remoteBytesRead());
      }
      add("taskEnd", f);
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd e) {
      add("jobEnd", fields("jobId", e.jobId(), "result", String.valueOf(e.jobResult())));
    }
  }

  static void waitFor(Path file, long timeoutMs) throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (!Files.exists(file)) {
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no " + file + " after " + timeoutMs + " ms");
      Thread.sleep(20);
    }
  }

  public static void main(String[] args) throws Exception {
    String controlDir = args[0];
    Path control = Paths.get(controlDir);
    int executors = Integer.parseInt(args[1]);
    int data = Integer.parseInt(args[2]);
    long records = Long.parseLong(args[3]);
    long gateTimeoutMs = 300_000;

    Map<String, Object> result = new LinkedHashMap<>();
    Recorder recorder = new Recorder();
    JavaSparkContext sc = start(control, recorder, result);
    try {
      awaitExecutors(sc, executors, result);

      JavaPairRDD<Long, Long> shuffled = sc.parallelize(numbers(records), executors)
          .mapToPair(i -> new Tuple2<>(i, i))
          .partitionBy(new GatedPartitioner(executors, data));
      List<long[]> parts = shuffled
          .mapPartitionsWithIndex((index, it) -> {
            long[] counted = countAndSum(it);
            long n = counted[0];
            long sum = counted[1];
            if (index < executors) {
              String exec = SparkEnv.get().executorId();
              // a String, not the Path: the closure is serialized to the executors
              Files.writeString(Paths.get(controlDir, "gate-" + index + "-" + exec), exec);
              waitFor(Paths.get(controlDir, "go"), gateTimeoutMs);
            }
            return Collections.singletonList(new long[] {index, n, sum}).iterator();
          }, false)
          .collect();
      long n = 0;
      long sum = 0;
      for (long[] p : parts) {
        n += p[1];
        sum += p[2];
      }
      result.put("records", n);
      result.put("sum", sum);
      result.put("expectedRecords", records);
      result.put("expectedSum", records * (records - 1) / 2);
      result.put("correct", n == records && sum == records * (records - 1) / 2);
    } catch (Exception e) {
      result.put("error", e.toString());
      throw e;
    } finally {
      finish(sc, control, recorder, result, 1);
    }
  }

  /** The job's input: 0 .. records-1. */
  static List<Long> numbers(long records) {
    List<Long> numbers = new ArrayList<>();
    for (long i = 0; i < records; i++) numbers.add(i);
    return numbers;
  }

  /** {records, sum of values} of one partition's shuffle output. */
  static long[] countAndSum(java.util.Iterator<Tuple2<Long, Long>> it) {
    long n = 0;
    long sum = 0;
    while (it.hasNext()) {
      n++;
      sum += it.next()._2();
    }
    return new long[] {n, sum};
  }

  /** The context with the recorder on it; the result's first fields; <control>/app-id. */
  static JavaSparkContext start(Path control, Recorder recorder, Map<String, Object> result) throws Exception {
    result.put("startedAtMs", System.currentTimeMillis());
    JavaSparkContext sc = new JavaSparkContext(new SparkConf());
    result.put("sparkVersion", sc.version());
    sc.sc().addSparkListener(recorder);
    result.put("applicationId", sc.sc().applicationId());
    Files.writeString(control.resolve("app-id"), sc.sc().applicationId());
    return sc;
  }

  /** Waits (240 s at most) until every executor has registered. */
  static void awaitExecutors(JavaSparkContext sc, int executors, Map<String, Object> result) throws InterruptedException {
    long deadline = System.currentTimeMillis() + 240_000;
    // the driver is one of the infos
    while (sc.sc().statusTracker().getExecutorInfos().length < executors + 1) {
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("fewer than " + executors + " executors after 240 s");
      Thread.sleep(50);
    }
    result.put("executorsRegisteredAtMs", System.currentTimeMillis());
  }

  /** <control>/result.json with the recorder's events, then the context stopped. */
  static void finish(JavaSparkContext sc, Path control, Recorder recorder, Map<String, Object> result, long jobs) throws Exception {
    result.put("endedAtMs", System.currentTimeMillis());
    // The listener bus is asynchronous: collect() can return before the job's end reaches the
    // recorder (seen once: a result without its jobEnd). Wait for it, bounded.
    long drain = System.currentTimeMillis() + 10_000;
    while (System.currentTimeMillis() < drain && recorder.jobEnds() < jobs) Thread.sleep(20);
    result.put("events", new ArrayList<>(recorder.events));
    Path tmp = control.resolve("result.json.tmp");
    Files.writeString(tmp, new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(result));
    Files.move(tmp, control.resolve("result.json"));
    sc.stop();
  }
}
