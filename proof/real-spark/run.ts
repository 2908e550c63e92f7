/**
 * `npm run proof` — issue 19: the fast-fail claim measured on a real Spark, three ways.
 *
 * On the e2e harness's cluster (real kube-apiserver, KCM, scheduler, kube-proxy, CoreDNS; the process
 * kubelet running each pod as host processes in its own network namespace) with the function and the
 * real Knative ApiServerSource adapter, one Spark application per Spark line and set-up
 * (e2e/spark/fetch-loss.ts): 4 executors, a shuffle, one executor lost — its netns drops every
 * packet, its pod is deleted — while the next stage opens connections to it. Set-ups, Spark's real
 * settings (nothing scaled):
 *   (a) Spark's defaults, executors advertise their pod IPs;
 *   (b) spark.shuffle.io.connectionCreationTimeout=10s (the usual tuning), pod IPs;
 *   (c) executors advertise their Service (this project).
 * Reported per run: time from the loss to the first FetchFailed, to the stage's resubmission and to
 * the job's end; the FetchFailed's cause; each executor's registered host (Spark UI REST API).
 *
 *   node proof/real-spark/run.ts [--lines 3.5,4.0|all] [--variants a,b,c] [--out proof/real-spark/results.json]
 *
 * Writes the JSON after every run (a partial result survives an interruption) and renders the chart
 * (chart.ts, from the JSON) next to it. Needs root and the e2e build (`e2e/build.sh`); (a) takes
 * minutes by design.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { scenarioCluster } from '../../e2e/scenarios/cluster.ts';
import { startPlane } from '../../e2e/scenarios/plane.ts';
import { type FetchLossReport, runFetchLoss, sparkLines, VARIANTS, type Variant } from '../../e2e/spark/fetch-loss.ts';
import { NS } from '../../test/support/audited.ts';
import { firstPeerFailure, Results, renderChart } from './chart.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: 'all' },
    variants: { type: 'string', default: 'a,b,c' },
    out: { type: 'string', default: join(HERE, 'results.json') },
  },
});
const byKey = new Map<string, Variant>(Object.values(VARIANTS).map((v) => [v.key, v]));
const variants = (values.variants ?? '').split(',').map((k) => {
  const v = byKey.get(k.trim());
  if (v === undefined) throw new Error(`unknown set-up ${k} (a, b, c)`);
  return v;
});
const wanted = values.lines ?? 'all';
const lines = sparkLines().filter(
  (l) => wanted === 'all' || wanted.split(',').some((w) => l.version === w || l.version.startsWith(`${w}.`)),
);
if (lines.length === 0) throw new Error(`no Spark line matches ${wanted}`);
const out = values.out ?? join(HERE, 'results.json');
const svg = out.replace(/\.json$/, '.svg') === out ? `${out}.svg` : out.replace(/\.json$/, '.svg');

// Runs of the lines not run now are kept from an earlier results file (e.g. `--lines 4.0` after a
// run of both), so that the chart always shows every line's last run.
const Kept = z.looseObject({
  runs: z.array(z.looseObject({ sparkVersion: z.string(), timings: z.looseObject({ driverPodCreatedAtMs: z.number() }) })),
});
const kept: Array<z.infer<typeof Kept>['runs'][number]> = existsSync(out)
  ? Kept.parse(JSON.parse(readFileSync(out, 'utf8'))).runs.filter((r) => !lines.some((l) => l.version === r.sparkVersion))
  : [];
const runs: FetchLossReport[] = [];
const failures: string[] = [];
function save(): void {
  mkdirSync(dirname(out), { recursive: true });
  const all = [...kept, ...runs].sort((a, b) => a.sparkVersion.localeCompare(b.sparkVersion, undefined, { numeric: true }));
  const times = all.map((r) => new Date(r.timings.driverPodCreatedAtMs).toISOString().slice(0, 16).replace('T', ' '));
  const measuredAt =
    times.length === 0 ? '' : `${times.reduce((a, b) => (a < b ? a : b))} – ${times.reduce((a, b) => (a > b ? a : b))} UTC`;
  const results = { measuredAt, machine: '2 cores shared with other sessions, process kubelet (no containers)', runs: all, failures };
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(svg, renderChart(Results.parse(results)));
}

function row(r: FetchLossReport): string {
  const s = (ms: number | undefined): string => (ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`);
  const hosts = r.executors.map((e) => `${e.id}=${e.restHostPort ?? '?'}`).join(', ');
  const peer = firstPeerFailure(r);
  return `| ${r.sparkVersion} | ${r.variant.title} | ${s(peer?.sinceLossMs)} (${peer?.cause ?? '—'}) | ${s(r.timings.firstFetchFailedSinceLossMs)} (${r.firstFetchFailed?.cause ?? '—'}) | ${s(
    r.timings.stageResubmittedSinceLossMs,
  )} | ${s(r.timings.jobEndSinceLossMs)} | ${r.correct === true ? 'yes' : 'NO'} | ${hosts} |`;
}

const cluster = await scenarioCluster('proof-real-spark', { kubelet: true, dns: true });
try {
  const plane = await startPlane(cluster.endpoints, { mode: 'resource', functionPort: 19_900 + (process.pid % 90) });
  try {
    const harness = cluster.harness;
    if (harness === undefined) throw new Error('the proof needs the harness cluster (it starts its own)');
    for (const line of lines) {
      for (const variant of variants) {
        process.stderr.write(`[proof] Spark ${line.version}, (${variant.key}) ${variant.title}\n`);
        try {
          const report = await runFetchLoss({
            cluster: harness,
            admin: cluster.endpoints.admin,
            namespace: NS,
            line,
            variant,
            executors: 4,
            dataPartitions: 6,
            records: 20_000,
            logDir: cluster.endpoints.logDir,
            startTimeoutMs: 300_000,
            // (a) waits out 120 s connect timeouts, and retries, by design
            jobTimeoutMs: 15 * 60_000,
            log: (l) => process.stderr.write(`[proof] ${l}\n`),
          });
          runs.push(report);
          process.stderr.write(`${row(report)}\n`);
        } catch (error) {
          failures.push(`Spark ${line.version} (${variant.key}): ${error instanceof Error ? error.message : String(error)}`);
          process.stderr.write(`[proof] FAILED: ${failures.at(-1)}\n`);
        }
        save();
      }
    }
  } finally {
    await plane.stop();
  }
} finally {
  await cluster.stop();
}
process.stdout.write(
  [
    `Real Spark, one of 4 executors lost while the next stage fetches from it (${new Date().toISOString()})`,
    '',
    '| Spark | set-up | loss → FetchFailed from the lost executor (cause) | → first FetchFailed of any kind | → stage resubmitted | → job end | result correct | executors registered as (REST API hostPort) |',
    '|---|---|---|---|---|---|---|---|',
    ...runs.map(row),
    '',
    `JSON: ${out}`,
    `chart: ${svg}`,
    ...failures.map((f) => `FAILED: ${f}`),
    '',
  ].join('\n'),
);
process.exitCode = failures.length > 0 ? 1 : 0;
