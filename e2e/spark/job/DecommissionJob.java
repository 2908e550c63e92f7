// The e2e's decommission job (ours; compiled by e2e/build.sh with FetchLossJob, whose partitioner and
// listener it reuses). Run in client mode by spark-submit in a driver pod (e2e/spark/decommission.ts):
//
//   DecommissionJob <control dir> <executors N> <data partitions R> <records>
//
// Job 1: N partitions of `records` numbers, cached (rdd blocks for spark.storage.decommission.
// rddBlocks.enabled to move), one map task per executor (N executors of one core each, all
// registered before the job starts), keyed into R partitions; its result stage sums them. The
// driver then writes <control>/mapped ({"mapExecutors": [ids of the executors whose map task
// succeeded]}) and waits for <control>/go, with no task running anywhere. The harness deletes one
// of those executors' pods gracefully meanwhile; Spark's preStop hook decommissions it (SIGPWR):
// it migrates its shuffle and cached blocks to its peers and exits, the pod goes away.
// Job 2 (after `go`): the same shuffle read again. Its map stage is skipped when every map output
// has a live location — the lost executor's migrated to a peer — and its tasks fetch from there.
// Both jobs' answers are checked against the input (every record counted once, the sum exact);
// the listener's events (FetchLossJob.Recorder) go to <control>/result.json.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.storage.StorageLevel;
import scala.Tuple2;

public final class DecommissionJob {
  /** {records, sum} over every partition of the shuffle's output. */
  static long[] count(JavaPairRDD<Long, Long> shuffled) {
    List<long[]> parts = shuffled.mapPartitions(it -> Collections.singletonList(FetchLossJob.countAndSum(it)).iterator()).collect();
    long n = 0;
    long sum = 0;
    for (long[] p : parts) {
      n += p[0];
      sum += p[1];
    }
    return new long[] {n, sum};
  }

  public static void main(String[] args) throws Exception {
    String controlDir = args[0];
    Path control = Paths.get(controlDir);
    int executors = Integer.parseInt(args[1]);
    int data = Integer.parseInt(args[2]);
    long records = Long.parseLong(args[3]);
    long goTimeoutMs = 300_000;
    long expectedSum = records * (records - 1) / 2;

    Map<String, Object> result = new LinkedHashMap<>();
    FetchLossJob.Recorder recorder = new FetchLossJob.Recorder();
    JavaSparkContext sc = FetchLossJob.start(control, recorder, result);
    try {
      FetchLossJob.awaitExecutors(sc, executors, result);

      JavaPairRDD<Long, Long> shuffled = sc.parallelize(FetchLossJob.numbers(records), executors)
          .persist(StorageLevel.MEMORY_ONLY())
          .mapToPair(i -> new Tuple2<>(i, i))
          .partitionBy(new FetchLossJob.GatedPartitioner(0, data));

      long[] first = count(shuffled);
      result.put("firstRecords", first[0]);
      result.put("firstSum", first[1]);
      // The listener bus is asynchronous: wait for the map stage's task ends, bounded.
      TreeSet<String> mapExecutors = new TreeSet<>();
      long drain = System.currentTimeMillis() + 10_000;
      while (System.currentTimeMillis() < drain) {
        mapExecutors.clear();
        synchronized (recorder.events) {
          for (Map<String, Object> e : recorder.events) {
            if ("taskEnd".equals(e.get("kind")) && Integer.valueOf(0).equals(e.get("stageId")) && "Success".equals(e.get("reason"))) {
              mapExecutors.add(String.valueOf(e.get("executorId")));
            }
          }
        }
        if (mapExecutors.size() >= executors) break;
        Thread.sleep(20);
      }
      Map<String, Object> mapped = new LinkedHashMap<>();
      mapped.put("mapExecutors", new ArrayList<>(mapExecutors));
      mapped.put("atMs", System.currentTimeMillis());
      Path tmp = control.resolve("mapped.tmp");
      Files.writeString(tmp, new ObjectMapper().writeValueAsString(mapped));
      Files.move(tmp, control.resolve("mapped"));

      FetchLossJob.waitFor(Paths.get(controlDir, "go"), goTimeoutMs);
      result.put("goAtMs", System.currentTimeMillis());
      long[] second = count(shuffled);
      result.put("records", second[0]);
      result.put("sum", second[1]);
      result.put("expectedRecords", records);
      result.put("expectedSum", expectedSum);
      result.put("correct", first[0] == records && first[1] == expectedSum && second[0] == records && second[1] == expectedSum);
    } catch (Exception e) {
      result.put("error", e.toString());
      throw e;
    } finally {
      FetchLossJob.finish(sc, control, recorder, result, 2);
    }
  }
}
