/**
 * The real-Spark proof's reading of Spark's messages and its chart. The messages are Spark 3.5.9's
 * own, as its event log and executors logged them in the e2e run of 2026-12-04 (FetchFailed task
 * ends after an executor was lost); the chart is checked against the geometry it promises: one bar
 * per run from the loss to the job's end, on a common scale.
 */
import { describe, expect, test } from 'vitest';
import { causeOf } from '../../e2e/spark/fetch-loss.ts';
import { firstPeerFailure, renderChart } from '../../proof/real-spark/chart.ts';

const SVC = 'svc-spark-49500dfad0337eff57c30badb0fc3986-exec-4.spark.svc';
const REFUSED = [
  'org.apache.spark.shuffle.FetchFailedException',
  `Caused by: java.io.IOException: Failed to connect to ${SVC}/10.96.130.151:7079`,
  `Caused by: io.netty.channel.AbstractChannel$AnnotatedConnectException: Connection refused: ${SVC}/10.96.130.151:7079`,
  'Caused by: java.net.ConnectException: Connection refused',
].join('\n');
const DEAD = [
  'org.apache.spark.shuffle.FetchFailedException',
  'Caused by: org.apache.spark.ExecutorDeadException: [INTERNAL_ERROR_NETWORK] The relative remote executor(Id: 4), which maintains the block data to fetch is dead.',
].join('\n');
const TIMEOUT = [
  'org.apache.spark.shuffle.FetchFailedException',
  'Caused by: java.io.IOException: Connecting to /10.244.0.6:7079 timed out (10000 ms)',
].join('\n');
const MISSING = 'org.apache.spark.shuffle.MetadataFetchFailedException: Missing an output location for shuffle 0 partition 7';

describe('causeOf: what made a fetch fail, from Spark 3.5.9 messages', () => {
  test.each([
    ['refused connect through the Service', REFUSED, 'connection refused'],
    ['driver says the executor is dead (SPARK-27637)', DEAD, 'executor dead (driver check)'],
    ['connect to a silent pod IP timed out', TIMEOUT, 'connect timeout'],
    ['map output unregistered before the task asked', MISSING, 'map output already unregistered (no peer asked)'],
    ['anything else', 'java.lang.OutOfMemoryError: Java heap space', 'other'],
  ])('%s', (_what, message, cause) => {
    expect(causeOf(message)).toBe(cause);
  });
});

describe('renderChart', () => {
  const run = (key: string, jobEnd: number, firstFetchFailed: number) => ({
    sparkVersion: '3.5.9',
    variant: { key, title: `set-up ${key}` },
    timings: {
      firstFetchFailedSinceLossMs: firstFetchFailed,
      stageResubmittedSinceLossMs: firstFetchFailed + 300,
      jobEndSinceLossMs: jobEnd,
    },
    firstFetchFailed: { cause: 'connection refused' },
  });
  const svg = renderChart({ measuredAt: '2026-12-04T18:00:00Z', runs: [run('a', 120_000, 110_000), run('c', 20_000, 15_000)] });

  test('one bar per run, lengths proportional to loss → job end', () => {
    const widths = [...svg.matchAll(/<rect x="\d+(?:\.\d+)?" y="[\d.]+" width="([\d.]+)" height="16"/g)].map((m) => Number(m[1]));
    expect(widths).toHaveLength(2);
    expect((widths[0] ?? 0) / (widths[1] ?? 1)).toBeCloseTo(6, 1);
  });

  test('labels name each run, its job end and its first FetchFailed with the cause', () => {
    expect(svg).toContain('Spark 3.5.9 (a) set-up a');
    expect(svg).toContain('120 s');
    expect(svg).toContain('15 s: connection refused');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  });
});

describe('firstPeerFailure: the fetch path, not a task told the map output is gone', () => {
  test('a FetchFailed that names the lost executor wins over an earlier one that asked no peer', () => {
    const r = {
      sparkVersion: '4.0.5',
      variant: { key: 'a', title: 'a' },
      timings: { firstFetchFailedSinceLossMs: 14_000 },
      firstFetchFailed: { cause: 'map output already unregistered (no peer asked)' },
      fetchFailures: [
        { sinceLossMs: 14_000, host: null, cause: 'map output already unregistered (no peer asked)' },
        { sinceLossMs: 123_000, host: '10.244.0.4', cause: 'executor dead (driver check)' },
      ],
    };
    expect(firstPeerFailure(r)).toEqual({ sinceLossMs: 123_000, cause: 'executor dead (driver check)', peer: true });
  });
  test('without one, the first FetchFailed of any kind, marked as such', () => {
    expect(
      firstPeerFailure({
        sparkVersion: '4.0.5',
        variant: { key: 'a', title: 'a' },
        timings: { firstFetchFailedSinceLossMs: 14_000 },
        fetchFailures: [],
      }),
    ).toEqual({ sinceLossMs: 14_000, cause: '', peer: false });
  });
});
