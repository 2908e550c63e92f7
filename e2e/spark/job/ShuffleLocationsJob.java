// The e2e's fallback job (ours; compiled by e2e/build.sh with FetchLossJob, whose start, listener
// and result file it reuses). Run in client mode by spark-submit in a driver pod
// (e2e/spark/fallbacks.ts):
//
//   ShuffleLocationsJob <control dir> <executors N> <reduce partitions R> <records>
//
// One shuffle: N partitions of `records` numbers, one map task per executor (N executors of one
// core each, all registered before the job starts), hashed into R reduce partitions. Each reduce
// task asks its executor's map output tracker where its blocks are — the same call the shuffle
// reader makes (MapOutputTracker.getMapSizesByExecutorId) — and reports those addresses
// (executor id = host:port): where its fetches went. With spark.shuffle.service.enabled that is the
// shuffle service's port on each executor's advertised host; otherwise the block manager's. The
// answer is checked against the input (every record counted once, the sum exact). The driver then
// writes <control>/shuffled and waits for <control>/go (the harness reads the UI's REST API
// meanwhile); the listener's events and the reduce tasks' reports go to <control>/result.json.
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.HashPartitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.storage.BlockManagerId;
import scala.Tuple2;

public final class ShuffleLocationsJob {
  public static void main(String[] args) throws Exception {
    java.nio.file.Path control = java.nio.file.Paths.get(args[0]);
    int executors = Integer.parseInt(args[1]);
    int reducers = Integer.parseInt(args[2]);
    long records = Long.parseLong(args[3]);
    long expectedSum = records * (records - 1) / 2;

    Map<String, Object> result = new LinkedHashMap<>();
    FetchLossJob.Recorder recorder = new FetchLossJob.Recorder();
    JavaSparkContext sc = FetchLossJob.start(control, recorder, result);
    try {
      FetchLossJob.awaitExecutors(sc, executors, result);

      JavaPairRDD<Long, Long> shuffled = sc.parallelize(FetchLossJob.numbers(records), executors)
          .mapToPair(i -> new Tuple2<>(i, i))
          .partitionBy(new HashPartitioner(reducers));
      int shuffleId = ((ShuffleDependency<?, ?, ?>) shuffled.rdd().dependencies().head()).shuffleId();
      List<String> reports = shuffled
          .mapPartitionsWithIndex((index, it) -> {
            long[] counted = FetchLossJob.countAndSum(it);
            TreeSet<String> from = new TreeSet<>();
            var locations = SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(shuffleId, index);
            while (locations.hasNext()) {
              BlockManagerId id = locations.next()._1();
              from.add(id.executorId() + "=" + id.host() + ":" + id.port());
            }
            return Collections.singletonList(index + "\t" + SparkEnv.get().executorId() + "\t" + counted[0] + "\t" + counted[1] + "\t" + String.join(",", from)).iterator();
          }, false)
          .collect();
      long n = 0;
      long sum = 0;
      List<Map<String, Object>> reduceTasks = new ArrayList<>();
      for (String r : reports) {
        String[] f = r.split("\t", -1);
        n += Long.parseLong(f[2]);
        sum += Long.parseLong(f[3]);
        reduceTasks.add(FetchLossJob.fields("partition", Integer.parseInt(f[0]), "executorId", f[1], "records", Long.parseLong(f[2]),
            "fetchFrom", f[4].isEmpty() ? List.of() : List.of(f[4].split(","))));
      }
      result.put("reduceTasks", reduceTasks);
      result.put("records", n);
      result.put("sum", sum);
      result.put("expectedRecords", records);
      result.put("expectedSum", expectedSum);
      result.put("correct", n == records && sum == expectedSum);
      java.nio.file.Files.writeString(control.resolve("shuffled"), String.valueOf(System.currentTimeMillis()));
      FetchLossJob.waitFor(control.resolve("go"), 300_000);
    } catch (Exception e) {
      result.put("error", e.toString());
      throw e;
    } finally {
      FetchLossJob.finish(sc, control, recorder, result, 1);
    }
  }
}
