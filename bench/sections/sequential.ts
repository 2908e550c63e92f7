/**
 * Section "sequential": performance as users see it. The ApiServerSource adapter sends one event
 * at a time per namespace and waits for each answer (testkit/apiserversource.ts), so the function's
 * time per event and its API calls *are* the namespace's event throughput. This section drives
 * realistic Spark applications through that sender, against the function's real entry point
 * running with its production settings (the env of knative/base/service.yaml: REPLY_MODE=none,
 * EVENT_DEADLINE_MS=1500, COOLDOWN_SECONDS=300 …), with every API request delayed by 0, 5 and
 * 20 ms in the emulator:
 *
 *   driver     add (Pending), update (Running)
 *   scale-up   batch after batch (spark.kubernetes.allocation.batch.size = 10, Spark 4.x's
 *              default): the batch's pods are created, then the watch delivers their adds, then
 *              each status step of the batch — scheduled, creating, running, ready — and its
 *              updates (the pods change in the emulator before their events are sent)
 *   teardown   the driver deletes its executors (deletionTimestamp, still Running), they stop
 *              (phase Failed, exit 143), the kubelet removes them (delete); the driver finishes
 *              (phase Succeeded: its Services are deleted) and is deleted
 *
 * against a sequential floor in the same run: @kubernetes/client-node's CoreV1Api doing only the
 * necessary writes, one after another, at the same latency — one create per executor for the
 * scale-up, one delete per executor for the teardown. Times are the namespace stream's busy time:
 * the sum, over the phases, of first send → last answer (the pod changes the bench makes in the
 * emulator between phases are not counted). Each (latency, floor, function) triple is run `reps`
 * times, interleaved; medians are reported.
 *
 * Also: a paced run at Spark's allocation rates (5, 10, 20 pods/s: one batch per second) with
 * the updates arriving as the pods start, reporting the lag from a pod's creation to its
 * Service; the function's CPU per no-op update over a long run of them (from /proc), profiled
 * through the inspector when over target; and an application of 1,000 executors whose driver
 * finishes, for the longest single event.
 *
 * API calls are attributed to the event that caused them by time: the emulator stamps each
 * request on CLOCK_MONOTONIC as it arrives, the sender stamps each event's first send and final
 * answer on the same clock, and events never overlap.
 */
import { spawn } from 'node:child_process';
import type { Agent } from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { EXECUTOR_GONE_AT_ANNOTATION } from '../../shared/model/labels.ts';
import { desiredExecutorService } from '../../shared/model/service-spec.ts';
import { CONCURRENCY } from '../../shared/engine/observe.ts';
import {
  type AdapterEvent,
  AdapterSender,
  type Delivery,
  EventStream,
  nowUs,
  podEvent,
  pool,
  type Verb,
} from '../../testkit/apiserversource.ts';
import { withManagedFields } from '../../testkit/managed-fields.ts';
import {
  DRIVER_RUNNING_PATCH,
  DRIVER_SUCCEEDED_PATCH,
  GRACEFUL_FINALIZER,
  RELEASE_PATCH,
  RUNNING_STATUS_STEPS,
  STATUS_STEPS,
  executorStatusPatch,
} from '../../testkit/spark-lifecycle.ts';
import { type ProfileSummary, summarizeProfile } from '../lib/cpuprofile.ts';
import type { EmulatorCommand } from '../lib/emulator-child.ts';
import { connectInspector } from '../lib/inspector.ts';
import { type PodBody, realisticDriverPod, realisticExecutorPod } from '../../testkit/spark-pods.ts';
import {
  type EmulatorProcess,
  type FunctionProcess,
  REPO_ROOT,
  cpuMs,
  cpuTimes,
  freePort,
  sleep,
  startEmulatorProcess,
  startFunctionProcess,
  stopChild,
} from '../lib/procs.ts';
import { waitForHttpOk } from '../../testkit/process.ts';
import { median, percentile, round } from '../lib/stats.ts';
import { callKind } from '../lib/api-calls.ts';
import { reuseConnectionOptions } from './throughput.ts';

export const TARGETS = {
  /** Whole sequential scale-up (all five events per executor) at 20 ms per call vs the floor's create loop. */
  scaleUpRatio: 1.25,
  /** Teardown at 20 ms per call vs the floor's delete loop. */
  teardownRatio: 1.5,
  /** API calls of the three-event termination, per executor. */
  terminationCalls: 2,
  /** Longest time one event holds its namespace, at 20 ms per call. */
  maxEventMs: 2000,
  /** Function CPU per no-op update. */
  noopCpuMs: 0.5,
  /** The latency the ratio targets are taken at. */
  atLatencyMs: 20,
  /** Scale-up and teardown vs the fair floor (batch writes + bare delivery), at each of these latencies. */
  fairRatio: 1.3,
  fairRatioAtLatenciesMs: [5, 20],
} as const;

/** Spark 4.x's spark.kubernetes.allocation.batch.size default. */
const BATCH_SIZE = 10;
/** Paced run: when each status step reaches a pod, after its batch was created (ms). */
const PACED_OFFSETS_MS = { scheduled: 20, creating: 300, running: 2000, ready: 2100 } as const;

export type Step =
  | 'driver: add (Pending)'
  | 'driver: update Running'
  | 'add: first executor of the app'
  | 'add: first of a later batch'
  | 'add: rest of a batch'
  | 'update: scheduled'
  | 'update: creating'
  | 'update: running'
  | 'update: ready'
  | 'update: deletionTimestamp (still Running)'
  | 'update: phase Failed'
  | 'delete'
  | 'driver: update Succeeded'
  | 'driver: delete';

export const STEPS: readonly Step[] = [
  'driver: add (Pending)',
  'driver: update Running',
  'add: first executor of the app',
  'add: first of a later batch',
  'add: rest of a batch',
  'update: scheduled',
  'update: creating',
  'update: running',
  'update: ready',
  'update: deletionTimestamp (still Running)',
  'update: phase Failed',
  'delete',
  'driver: update Succeeded',
  'driver: delete',
];
type Part = 'driver start' | 'scale-up' | 'termination' | 'driver end';
const PART_OF: Readonly<Record<Step, Part>> = {
  'driver: add (Pending)': 'driver start',
  'driver: update Running': 'driver start',
  'add: first executor of the app': 'scale-up',
  'add: first of a later batch': 'scale-up',
  'add: rest of a batch': 'scale-up',
  'update: scheduled': 'scale-up',
  'update: creating': 'scale-up',
  'update: running': 'scale-up',
  'update: ready': 'scale-up',
  'update: deletionTimestamp (still Running)': 'termination',
  'update: phase Failed': 'termination',
  delete: 'termination',
  'driver: update Succeeded': 'driver end',
  'driver: delete': 'driver end',
};
/** Steps that change nothing the function reads: they must cost no API call (asserted). */
// Issue 17: 'update: running' makes the Services (only a running executor claims its slot) and
// 'driver: update Running' may be a late opt-in (its executors are looked at): neither is a no-op.
export const NO_OP_STEPS: ReadonlySet<Step> = new Set([
  'driver: add (Pending)',
  'update: scheduled',
  'update: creating',
  'update: ready',
  'update: deletionTimestamp (still Running)',
]);

export interface EventRecord {
  readonly step: Step;
  readonly ms: number;
  readonly attempts: number;
  /** API requests this event caused, by kind (see callKind). */
  readonly calls: Record<string, number>;
}

export interface AppRun {
  readonly namespace: string;
  readonly latencyMs: number;
  readonly rep: number;
  readonly executors: number;
  readonly events: number;
  /** Busy time of the namespace's stream (ms): executor adds and updates, batch after batch. */
  readonly scaleUpMs: number;
  /** …until the last executor's add was answered: every Service exists. */
  readonly lastServiceMs: number;
  /** Termination events of every executor, the driver's Succeeded and delete. */
  readonly teardownMs: number;
  /** …until the driver's Succeeded was answered: no Service left. */
  readonly servicesGoneMs: number;
  /** Function CPU (ms, /proc) per event: the whole app, the scale-up's events, the teardown's events. */
  readonly functionCpuMsPerEvent: number;
  readonly scaleUpCpuMsPerEvent: number;
  readonly teardownCpuMsPerEvent: number;
  readonly records: readonly EventRecord[];
  /** API requests in the namespace that no event's window holds (work done after an answer). */
  readonly unattributed: number;
  /** Services still there after the driver's Succeeded was answered (0 unless its deadline cut the deletes short). */
  readonly servicesLeft: number;
}

export interface FloorRun {
  readonly namespace: string;
  readonly latencyMs: number;
  readonly rep: number;
  /** The floor: plain CoreV1Api (client-node opens a connection per request). */
  readonly createMs: number;
  readonly deleteMs: number;
  /** For information: the same loops through one connection pool (what the function's client does). */
  readonly reuseCreateMs: number;
  readonly reuseDeleteMs: number;
  /**
   * The fair floor's writes: batch after batch of the app (BATCH_SIZE pods, created as Spark
   * does), the list the function makes of the batch's pods, then the batch's creates with
   * CONCURRENCY in flight (shared/engine/observe.ts: what the function runs at once). Teardown:
   * what the specification asks of any design — each ended executor's Service marked gone (its
   * cool-down), then deleted when the driver ends —, each step one list and then every write
   * CONCURRENCY at once (the least: every executor ends at once here). One connection pool.
   */
  readonly batchCreateMs: number;
  readonly batchDeleteMs: number;
  /** The same events as the function's run (same bodies, same sender), delivered to a bare node:http server answering 200. */
  readonly deliveryScaleUpMs: number;
  readonly deliveryTeardownMs: number;
}

export interface LatencyResult {
  readonly latencyMs: number;
  readonly apps: readonly AppRun[];
  readonly floors: readonly FloorRun[];
  /** Medians over the reps; ratios: median of the per-rep ratios (each pair measured back to back). */
  readonly median: {
    readonly scaleUpMs: number;
    readonly lastServiceMs: number;
    readonly teardownMs: number;
    readonly servicesGoneMs: number;
    readonly floorCreateMs: number;
    readonly floorDeleteMs: number;
    readonly reuseCreateMs: number;
    readonly reuseDeleteMs: number;
    readonly scaleUpRatio: number;
    readonly lastServiceRatio: number;
    readonly teardownRatio: number;
    readonly batchCreateMs: number;
    readonly batchDeleteMs: number;
    readonly deliveryScaleUpMs: number;
    readonly deliveryTeardownMs: number;
    /** Fair floor = batch writes + bare delivery; ratios: median of the per-rep ratios. */
    readonly fairScaleUpMs: number;
    readonly fairTeardownMs: number;
    readonly fairScaleUpRatio: number;
    readonly fairTeardownRatio: number;
    readonly functionCpuMsPerEvent: number;
    readonly scaleUpCpuMsPerEvent: number;
    readonly teardownCpuMsPerEvent: number;
  };
  /** Mean ms per executor spent in each group of steps (all runs pooled): where the stream's time goes. */
  readonly timePerExecutor: Readonly<Record<string, number>>;
}

export interface StepStats {
  readonly step: Step;
  readonly events: number;
  readonly callsPerEvent: number;
  readonly calls: Record<string, number>;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface PacedResult {
  readonly podsPerSecond: number;
  readonly latencyMs: number;
  readonly pods: number;
  readonly events: number;
  readonly lagMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly maxQueued: number;
  /** Share of the run the stream was busy sending. */
  readonly busy: number;
  readonly calls: number;
}

export interface NoopResult extends NoopMeasure {
  readonly events: number;
  /** Rounds of `events` each (interleaved with the floor's); the figures are medians. */
  readonly rounds: number;
  readonly perRound: readonly number[];
  /** The same events sent the same way to a bare node:http server that parses the body and answers 204. */
  readonly httpFloor: Omit<NoopMeasure, 'calls'> | undefined;
  readonly httpFloorPerRound: readonly number[];
  readonly profile?: ProfileSummary | undefined;
  readonly profileFile?: string | undefined;
}

export interface LargeAppEvent {
  readonly what: string;
  readonly ms: number;
  readonly calls: Record<string, number>;
  readonly servicesBefore: number;
  readonly servicesAfter: number;
}

export interface SequentialResult {
  readonly executors: number;
  readonly batchSize: number;
  /** API requests the function runs at once (shared/engine/observe.ts), which the fair floor uses too. */
  readonly concurrency: number;
  readonly reps: number;
  readonly functionEnv: Record<string, string>;
  readonly podBytes: { readonly add: number; readonly ready: number; readonly failed: number };
  readonly latencies: readonly LatencyResult[];
  /** Per latency: every rep's events together, step by step. */
  readonly steps: ReadonlyArray<{ readonly latencyMs: number; readonly stats: readonly StepStats[] }>;
  /** Per latency: API calls per executor by part of its life (median app). */
  readonly perExecutor: ReadonlyArray<{
    readonly latencyMs: number;
    readonly scaleUp: number;
    readonly termination: number;
    readonly driver: number;
    readonly total: number;
  }>;
  readonly paced: readonly PacedResult[];
  readonly noop: NoopResult | undefined;
  readonly largeApp: { readonly executors: number; readonly latencyMs: number; readonly events: readonly LargeAppEvent[] } | undefined;
  /** Longest single event at TARGETS.atLatencyMs, over every run of this section, and which step. */
  readonly longestEvent: { readonly ms: number; readonly what: string } | undefined;
  readonly targets: typeof TARGETS;
  readonly failures: readonly string[];
}

export interface SequentialOptions {
  readonly entry: string;
  readonly resultsDir: string;
  readonly profileDir: string;
  readonly latenciesMs: readonly number[];
  readonly executors: number;
  readonly reps: number;
  readonly pacedRates: readonly number[];
  readonly pacedBatches: number;
  readonly noopEvents: number;
  readonly largeApp: number;
  /** Profile the no-op updates even when within target. */
  readonly profile: boolean;
  readonly log: (line: string) => void;
}

/** The function's environment as knative/base/service.yaml sets it (the container's env list). */
export function manifestEnv(): Record<string, string> {
  const text = readFileSync(join(REPO_ROOT, 'knative', 'base', 'service.yaml'), 'utf8');
  const manifest = k8s.loadYaml<{ spec: { template: { spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } } } }>(
    text,
  );
  const env: Record<string, string> = {};
  for (const e of manifest.spec.template.spec.containers[0]?.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  return env;
}

// ---- pod changes as Kubernetes makes them ----------------------------------------------------

/** The adapter's event for a pod as a real API server's watch shows it: the whole object, managedFields included. */
export const watchedEvent = (verb: Verb, pod: PodBody): AdapterEvent => podEvent(verb, withManagedFields(pod));

const iso = (): string => new Date().toISOString();
const patchCmd = (namespace: string, name: string, patch: object): EmulatorCommand => ({
  op: 'patch',
  resource: 'pods',
  namespace,
  name,
  patch,
});
const getCmd = (namespace: string, name: string): EmulatorCommand => ({ op: 'get', resource: 'pods', namespace, name });

/** Runs emulator commands in chunks (bounded IPC messages); their results in order. */
async function batch<T>(emulator: EmulatorProcess, commands: readonly EmulatorCommand[]): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < commands.length; i += 250)
    out.push(...(await emulator.call<T[]>({ op: 'batch', commands: commands.slice(i, i + 250) })));
  return out;
}

// ---- one application through the sequential sender -----------------------------------------

export interface SectionOptions {
  /** One client for every namespace's stream, as one adapter process has (testkit goTransportAgent); default: a connection per stream. */
  readonly agent?: Agent;
  /**
   * A retried event, a Service left after the driver's Succeeded (its event's deadline cut the
   * deletes short; the sweep takes the rest) or an API request after its event's answer fails the
   * run (default); false: they are counted (retriedStatuses, AppRun.servicesLeft, unattributed)
   * and reported against a target.
   */
  readonly strict?: boolean;
}

interface Sent {
  readonly step: Step;
  readonly delivery: Delivery;
  readonly event: AdapterEvent;
}

export class Section {
  readonly failures: string[] = [];
  /** Every event sent at TARGETS.atLatencyMs: the longest one. */
  longest: { ms: number; what: string } | undefined;
  /** Every attempt's status that was not 2xx, counted (e.g. 503: the event's deadline passed). */
  readonly retriedStatuses = new Map<string, number>();
  /** Events delivered so far. */
  delivered = 0;
  private readonly emulator: EmulatorProcess;
  private readonly fn: FunctionProcess;
  private readonly options: SectionOptions;
  private latencyMs = 0;

  constructor(emulator: EmulatorProcess, fn: FunctionProcess, options: SectionOptions = {}) {
    this.emulator = emulator;
    this.fn = fn;
    this.options = options;
  }

  private newSender(): AdapterSender {
    return new AdapterSender(this.fn.url, this.options.agent === undefined ? {} : { agent: this.options.agent });
  }

  async setLatency(ms: number): Promise<void> {
    this.latencyMs = ms;
    await this.emulator.call({ op: 'latency', ms });
  }

  note(what: string, delivery: Delivery): void {
    this.delivered++;
    for (const status of delivery.statuses.slice(0, -1))
      this.retriedStatuses.set(String(status), (this.retriedStatuses.get(String(status)) ?? 0) + 1);
    if (!delivery.delivered || (delivery.statuses.length > 1 && this.options.strict !== false))
      this.failures.push(
        `sequential: ${what}: answered ${delivery.statuses.join(' → ')}${delivery.delivered ? '' : ` (dropped) ${delivery.body.slice(0, 200)}`}`,
      );
    if (this.latencyMs === TARGETS.atLatencyMs && (this.longest === undefined || delivery.ms > this.longest.ms))
      this.longest = { ms: delivery.ms, what };
  }

  /** Sends events one after another; returns what was sent and the phase's wall time (first send → last answer). */
  async phase(
    sender: AdapterSender,
    namespace: string,
    events: ReadonlyArray<{ step: Step; event: AdapterEvent }>,
    sent: Sent[],
  ): Promise<number> {
    if (events.length === 0) return 0;
    const first = nowUs();
    for (const { step, event } of events) {
      const delivery = await sender.send(event);
      this.note(`${namespace} ${step}`, delivery);
      sent.push({ step, delivery, event });
    }
    return (nowUs() - first) / 1000;
  }

  /** A whole application: driver start, scale-up batch by batch, teardown. */
  async app(namespace: string, seed: number, executors: number, rep: number): Promise<AppRun & { readonly sentEvents: PartEvents }> {
    const { emulator } = this;
    const sender = this.newSender();
    const sent: Sent[] = [];
    const cpu0 = cpuMs(this.fn.pid);
    try {
      // Driver: created Pending, then running; Spark asks for executors once it runs.
      const [created] = await emulator.seed([realisticDriverPod(namespace, seed)]);
      let driver = created!;
      await this.phase(sender, namespace, [{ step: 'driver: add (Pending)', event: watchedEvent('add', driver) }], sent);
      driver = await emulator.call<PodBody>({
        op: 'patch',
        resource: 'pods',
        namespace,
        name: driver.metadata.name,
        patch: DRIVER_RUNNING_PATCH,
      });
      await this.phase(sender, namespace, [{ step: 'driver: update Running', event: watchedEvent('update', driver) }], sent);

      const cpuScaleUp0 = cpuMs(this.fn.pid);
      let scaleUpMs = 0;
      let lastServiceMs = 0;
      const names: string[] = [];
      for (let first = 1; first <= executors; first += BATCH_SIZE) {
        const ids = Array.from({ length: Math.min(BATCH_SIZE, executors - first + 1) }, (_, k) => first + k);
        const pods = await emulator.seed(ids.map((id) => realisticExecutorPod(driver, id, GRACEFUL_FINALIZER)));
        names.push(...pods.map((p) => p.metadata.name));
        const addStep = (k: number): Step =>
          k > 0 ? 'add: rest of a batch' : first === 1 ? 'add: first executor of the app' : 'add: first of a later batch';
        scaleUpMs += await this.phase(
          sender,
          namespace,
          pods.map((p, k) => ({ step: addStep(k), event: watchedEvent('add', p) })),
          sent,
        );
        lastServiceMs = scaleUpMs;
        for (const s of STATUS_STEPS) {
          const changed = await batch<PodBody>(
            emulator,
            pods.map((p, k) => patchCmd(namespace, p.metadata.name, executorStatusPatch(s, p.metadata.name, first + k))),
          );
          scaleUpMs += await this.phase(
            sender,
            namespace,
            changed.map((p) => ({ step: `update: ${s}` as Step, event: watchedEvent('update', p) })),
            sent,
          );
        }
      }

      const cpuScaleUp = cpuMs(this.fn.pid) - cpuScaleUp0;
      // Teardown: the driver deletes its executors (held by the finalizer: deletionTimestamp set,
      // still Running), they stop (Failed, 143), the kubelet removes them.
      const cpuTeardown0 = cpuMs(this.fn.pid);
      let teardownMs = 0;
      const deleting = await batch<PodBody | null>(
        emulator,
        names.flatMap((name) => [{ op: 'delete', resource: 'pods', namespace, name } as EmulatorCommand, getCmd(namespace, name)]),
      );
      teardownMs += await this.phase(
        sender,
        namespace,
        deleting
          .filter((_, k) => k % 2 === 1)
          .map((p) => ({ step: 'update: deletionTimestamp (still Running)' as Step, event: watchedEvent('update', p!) })),
        sent,
      );
      const failed = await batch<PodBody>(
        emulator,
        names.map((name, k) => patchCmd(namespace, name, executorStatusPatch('failed', name, k + 1))),
      );
      teardownMs += await this.phase(
        sender,
        namespace,
        failed.map((p) => ({ step: 'update: phase Failed' as Step, event: watchedEvent('update', p) })),
        sent,
      );
      const removed = await batch<PodBody | null>(
        emulator,
        names.flatMap((name) => [getCmd(namespace, name), patchCmd(namespace, name, RELEASE_PATCH)]),
      );
      teardownMs += await this.phase(
        sender,
        namespace,
        removed.filter((_, k) => k % 2 === 0).map((p) => ({ step: 'delete' as Step, event: watchedEvent('delete', p!) })),
        sent,
      );
      const left = await emulator.countObjects('pods', namespace, 'spark-role=executor');
      if (left !== 0)
        this.failures.push(`sequential [${namespace}]: ${left} executor pod(s) still exist after their finalizers were removed`);
      const servicesBeforeDriverEnd = await emulator.countObjects('services', namespace);
      if (servicesBeforeDriverEnd !== executors)
        this.failures.push(`sequential [${namespace}]: ${servicesBeforeDriverEnd} Service(s) during the cool-down, expected ${executors}`);
      // The application ends: the driver finishes, then is deleted.
      driver = await emulator.call<PodBody>({
        op: 'patch',
        resource: 'pods',
        namespace,
        name: driver.metadata.name,
        patch: DRIVER_SUCCEEDED_PATCH,
      });
      teardownMs += await this.phase(
        sender,
        namespace,
        [{ step: 'driver: update Succeeded', event: watchedEvent('update', driver) }],
        sent,
      );
      const servicesGoneMs = teardownMs;
      const servicesLeft = await emulator.countObjects('services', namespace);
      if (servicesLeft !== 0 && this.options.strict !== false)
        this.failures.push(`sequential [${namespace}]: ${servicesLeft} Service(s) left after the driver finished`);
      const last = await emulator.call<PodBody>({ op: 'get', resource: 'pods', namespace, name: driver.metadata.name });
      await emulator.call({ op: 'delete', resource: 'pods', namespace, name: driver.metadata.name });
      teardownMs += await this.phase(sender, namespace, [{ step: 'driver: delete', event: watchedEvent('delete', last) }], sent);
      const cpuTeardown = cpuMs(this.fn.pid) - cpuTeardown0;
      const cpu = cpuMs(this.fn.pid) - cpu0;

      const { records, unattributed } = await this.attribute(namespace, driver.metadata.name, sent);
      // Not strict: an event answered 503 after its deadline may still finish its work after the answer.
      if (unattributed > 0 && this.options.strict !== false)
        this.failures.push(`sequential [${namespace}]: ${unattributed} API request(s) outside every event's send → answer window`);
      for (const r of records) {
        if (NO_OP_STEPS.has(r.step) && Object.keys(r.calls).length > 0)
          this.failures.push(`sequential [${namespace}] ${r.step}: a no-op event cost API calls ${JSON.stringify(r.calls)} — must be 0`);
      }
      return {
        namespace,
        latencyMs: this.latencyMs,
        rep,
        executors,
        events: records.length,
        scaleUpMs: round(scaleUpMs, 1),
        lastServiceMs: round(lastServiceMs, 1),
        teardownMs: round(teardownMs, 1),
        servicesGoneMs: round(servicesGoneMs, 1),
        functionCpuMsPerEvent: round(cpu / records.length, 3),
        scaleUpCpuMsPerEvent: round(cpuScaleUp / (executors * 5), 3),
        teardownCpuMsPerEvent: round(cpuTeardown / (executors * 3 + 2), 3),
        records,
        unattributed,
        servicesLeft,
        sentEvents: {
          scaleUp: sent.filter((x) => PART_OF[x.step] === 'scale-up').map((x) => x.event),
          teardown: sent.filter((x) => PART_OF[x.step] === 'termination' || PART_OF[x.step] === 'driver end').map((x) => x.event),
        },
      };
    } finally {
      sender.close();
    }
  }

  /** Each API request of the namespace put down to the event whose send → answer window holds it. */
  async attribute(namespace: string, driverName: string, sent: readonly Sent[]): Promise<{ records: EventRecord[]; unattributed: number }> {
    const requests = await this.emulator.requests(namespace);
    const from = sent[0]?.delivery.sentUs ?? 0;
    const to = sent[sent.length - 1]?.delivery.answeredUs ?? 0;
    const calls = sent.map(() => ({}) as Record<string, number>);
    let unattributed = 0;
    let j = 0;
    for (const r of [...requests].filter((q) => q.at >= from - 1_000_000 && q.at <= to + 1_000_000).sort((a, b) => a.at - b.at)) {
      while (j < sent.length && sent[j]!.delivery.answeredUs < r.at) j++;
      const s = sent[j];
      if (s === undefined || r.at < s.delivery.sentUs) {
        unattributed++;
        continue;
      }
      const kind = callKind(r, driverName);
      calls[j]![kind] = (calls[j]![kind] ?? 0) + 1;
    }
    return {
      records: sent.map((s, k) => ({ step: s.step, ms: round(s.delivery.ms, 3), attempts: s.delivery.statuses.length, calls: calls[k]! })),
      unattributed,
    };
  }
}

// ---- the floor: only the necessary writes, one after another --------------------------------

/**
 * The same Service bodies the function creates, for an application whose driver exists (the
 * emulator, like Kubernetes, garbage-collects a Service whose owner does not).
 */
async function floorBodies(emulator: EmulatorProcess, namespace: string, n: number, seed: number) {
  const [driver] = await emulator.seed([{ ...realisticDriverPod(namespace, seed), status: { phase: 'Running', podIP: '10.244.0.5' } }]);
  const appId = driver!.metadata.labels['spark-app-selector']!;
  const owner = { name: driver!.metadata.name, uid: driver!.metadata.uid! };
  return Array.from({ length: n }, (_, i) =>
    desiredExecutorService(
      namespace,
      { appId, execId: String(i + 1), executor: { name: `bench-${seed}-exec-${i + 1}`, uid: `exec-uid-${seed}-${i + 1}` }, owner },
      7079,
    ),
  );
}

/** N creates, then N deletes, one after another; `reuse`: every request through one connection pool, as the function's client does. */
async function floorLoops(
  emulator: EmulatorProcess,
  api: k8s.CoreV1Api,
  namespace: string,
  n: number,
  seed: number,
  reuse: boolean,
): Promise<{ createMs: number; deleteMs: number }> {
  const bodies = await floorBodies(emulator, namespace, n, seed);
  const options = reuse ? reuseConnectionOptions() : undefined;
  let t = performance.now();
  for (const body of bodies) await api.createNamespacedService({ namespace, body }, options);
  const createMs = performance.now() - t;
  t = performance.now();
  for (const body of bodies) await api.deleteNamespacedService({ namespace, name: body.metadata.name }, options);
  const deleteMs = performance.now() - t;
  return { createMs: round(createMs, 1), deleteMs: round(deleteMs, 1) };
}

/** The events of an app's run by part, to be sent again to the bare sink. */
export interface PartEvents {
  readonly scaleUp: readonly AdapterEvent[];
  readonly teardown: readonly AdapterEvent[];
}

/**
 * The fair floor's writes (see FloorRun.batchCreateMs): what an event-driven design must at least
 * do against the API server for an application arriving as Spark creates it.
 */
export async function batchFloorLoops(
  emulator: EmulatorProcess,
  api: k8s.CoreV1Api,
  namespace: string,
  n: number,
  seed: number,
): Promise<{ createMs: number; deleteMs: number }> {
  const [driver] = await emulator.seed([{ ...realisticDriverPod(namespace, seed), status: { phase: 'Running', podIP: '10.244.0.5' } }]);
  const appId = driver!.metadata.labels['spark-app-selector']!;
  const owner = { name: driver!.metadata.name, uid: driver!.metadata.uid! };
  const connections = {};
  const options = reuseConnectionOptions(undefined, connections);
  const mergePatch = reuseConnectionOptions(k8s.PatchStrategy.MergePatch, connections);
  const names: string[] = [];
  let createMs = 0;
  for (let first = 1; first <= n; first += BATCH_SIZE) {
    const ids = Array.from({ length: Math.min(BATCH_SIZE, n - first + 1) }, (_, k) => first + k);
    const pods = await emulator.seed(ids.map((id) => realisticExecutorPod(driver!, id)));
    const bodies = pods.map((p, k) =>
      desiredExecutorService(
        namespace,
        { appId, execId: String(ids[k]), executor: { name: p.metadata.name, uid: p.metadata.uid! }, owner },
        7079,
      ),
    );
    const t = performance.now();
    // The function's list of the batch's claimants (shared/engine/observe.ts listClaimantIds).
    await api.listNamespacedPod(
      { namespace, labelSelector: `spark-app-selector=${appId},spark-role=executor,spark-exec-id in (${ids.join(',')})` },
      options,
    );
    await pool(bodies.length, CONCURRENCY, async (k) => {
      await api.createNamespacedService({ namespace, body: bodies[k]! }, options);
    });
    createMs += performance.now() - t;
    names.push(...bodies.map((b) => b.metadata.name));
  }
  // The executors end: one list of the app's executors (which ended), every Service marked gone
  // (the cool-down mark the specification asks for; the function's patch body), CONCURRENCY at
  // once. Then the driver ends: one list of the app's Services, every delete CONCURRENCY at once.
  const marked = new Date().toISOString();
  const t = performance.now();
  await api.listNamespacedPod({ namespace, labelSelector: `spark-app-selector=${appId},spark-role=executor` }, options);
  await pool(names.length, CONCURRENCY, async (k) => {
    await api.patchNamespacedService(
      { namespace, name: names[k]!, body: { metadata: { annotations: { [EXECUTOR_GONE_AT_ANNOTATION]: marked } } } },
      mergePatch,
    );
  });
  const markMs = performance.now() - t;
  const t2 = performance.now();
  await api.listNamespacedService({ namespace, labelSelector: `spark-app-selector=${appId}` }, options);
  await pool(names.length, CONCURRENCY, async (k) => {
    await api.deleteNamespacedService({ namespace, name: names[k]! }, options);
  });
  const deleteMs = markMs + (performance.now() - t2);
  return { createMs: round(createMs, 1), deleteMs: round(deleteMs, 1) };
}

/** The same events sent the same way (one at a time, the adapter's sender) to the bare sink: the delivery part of the fair floor. */
async function deliveryFloor(section: Section, sinkUrl: string, events: PartEvents): Promise<{ scaleUpMs: number; teardownMs: number }> {
  const sender = new AdapterSender(sinkUrl);
  try {
    const time = async (list: readonly AdapterEvent[]): Promise<number> => {
      const t = nowUs();
      for (const event of list) section.note('bare sink delivery', await sender.send(event));
      return (nowUs() - t) / 1000;
    };
    return { scaleUpMs: round(await time(events.scaleUp), 1), teardownMs: round(await time(events.teardown), 1) };
  } finally {
    sender.close();
  }
}

async function floorRun(
  emulator: EmulatorProcess,
  api: k8s.CoreV1Api,
  namespace: string,
  n: number,
  seed: number,
  latencyMs: number,
  rep: number,
): Promise<Omit<FloorRun, 'deliveryScaleUpMs' | 'deliveryTeardownMs'>> {
  const plain = await floorLoops(emulator, api, namespace, n, seed, false);
  const reuse = await floorLoops(emulator, api, `${namespace}-r`, n, seed + 5000, true);
  const batched = await batchFloorLoops(emulator, api, `${namespace}-b`, n, seed + 7000);
  return {
    namespace,
    latencyMs,
    rep,
    ...plain,
    reuseCreateMs: reuse.createMs,
    reuseDeleteMs: reuse.deleteMs,
    batchCreateMs: batched.createMs,
    batchDeleteMs: batched.deleteMs,
  };
}

// ---- paced scale-up: Spark's allocation rate, events as they come ----------------------------

interface PacedMeta {
  readonly kind: 'add' | 'update';
  readonly createdUs: number;
}

async function pacedRun(
  section: Section,
  emulator: EmulatorProcess,
  fn: FunctionProcess,
  namespace: string,
  seed: number,
  rate: number,
  batches: number,
  latencyMs: number,
): Promise<PacedResult> {
  const sender = new AdapterSender(fn.url);
  const lags: number[] = [];
  let busyMs = 0;
  let events = 0;
  const stream = new EventStream<PacedMeta>(sender, (meta, delivery) => {
    section.note(`${namespace} paced ${meta.kind}`, delivery);
    busyMs += delivery.ms;
    events++;
    if (meta.kind === 'add') lags.push((delivery.answeredUs - meta.createdUs) / 1000);
  });
  try {
    const [created] = await emulator.seed([realisticDriverPod(namespace, seed)]);
    const driver = await emulator.call<PodBody>({
      op: 'patch',
      resource: 'pods',
      namespace,
      name: created!.metadata.name,
      patch: { status: { phase: 'Running', podIP: '10.244.0.5' } },
    });
    stream.push(watchedEvent('add', created!), { kind: 'update', createdUs: 0 });
    stream.push(watchedEvent('update', driver), { kind: 'update', createdUs: 0 });
    await stream.drained();
    const requestsBefore = (await emulator.requests(namespace)).length;
    const startedUs = nowUs();
    const t0 = performance.now();
    const at = async (ms: number, work: () => Promise<void>): Promise<void> => {
      const wait = t0 + ms - performance.now();
      if (wait > 0) await sleep(wait);
      await work();
    };
    const tasks: Array<Promise<void>> = [];
    for (let k = 0; k < batches; k++) {
      const ids = Array.from({ length: rate }, (_, j) => k * rate + j + 1);
      tasks.push(
        at(k * 1000, async () => {
          const pods = await emulator.seed(ids.map((id) => realisticExecutorPod(driver, id)));
          const createdUs = nowUs();
          for (const p of pods) stream.push(watchedEvent('add', p), { kind: 'add', createdUs });
          for (const s of STATUS_STEPS) {
            tasks.push(
              at(k * 1000 + PACED_OFFSETS_MS[s], async () => {
                const changed = await batch<PodBody>(
                  emulator,
                  pods.map((p, j) => patchCmd(namespace, p.metadata.name, executorStatusPatch(s, p.metadata.name, ids[j]!))),
                );
                for (const p of changed) stream.push(watchedEvent('update', p), { kind: 'update', createdUs });
              }),
            );
          }
        }),
      );
    }
    // Tasks add tasks: wait until none is left, then for the stream.
    for (let done = 0; done < tasks.length; ) {
      const n = tasks.length;
      await Promise.all(tasks.slice(done, n));
      done = n;
    }
    await stream.drained();
    const elapsedMs = (nowUs() - startedUs) / 1000;
    const services = await emulator.countObjects('services', namespace);
    if (services !== rate * batches)
      section.failures.push(`sequential paced ${rate}/s: ${services} Service(s), expected ${rate * batches}`);
    const calls = (await emulator.requests(namespace)).length - requestsBefore;
    return {
      podsPerSecond: rate,
      latencyMs,
      pods: rate * batches,
      events,
      lagMs: { p50: round(percentile(lags, 50), 1), p99: round(percentile(lags, 99), 1), max: round(Math.max(...lags), 1) },
      maxQueued: stream.maxQueued,
      busy: round(busyMs / elapsedMs, 2),
      calls,
    };
  } finally {
    sender.close();
  }
}

// ---- no-op updates: the function's CPU per event --------------------------------------------

/** Running executors with their Services, and the snapshots of their status updates (which change nothing the function reads). */
export async function noopFixture(
  section: Section,
  emulator: EmulatorProcess,
  fn: FunctionProcess,
  namespace: string,
  seed: number,
  executors: number,
): Promise<PodBody[]> {
  const sender = new AdapterSender(fn.url);
  try {
    const [created] = await emulator.seed([realisticDriverPod(namespace, seed)]);
    const driver = await emulator.call<PodBody>({
      op: 'patch',
      resource: 'pods',
      namespace,
      name: created!.metadata.name,
      patch: { status: { phase: 'Running', podIP: '10.244.0.5' } },
    });
    const seeded = await emulator.seed(Array.from({ length: executors }, (_, i) => realisticExecutorPod(driver, i + 1)));
    // Running before their adds: only a running executor claims its slot (issue 17), and the
    // snapshots replayed below are its running states (a Pending one replayed after it runs is stale).
    const pods = await batch<PodBody>(
      emulator,
      seeded.map((p, i) => patchCmd(namespace, p.metadata.name, executorStatusPatch('running', p.metadata.name, i + 1))),
    );
    for (const p of pods) section.note(`${namespace} add`, await sender.send(watchedEvent('add', p)));
    const snapshots: PodBody[] = [];
    for (const s of RUNNING_STATUS_STEPS)
      snapshots.push(
        ...(await batch<PodBody>(
          emulator,
          pods.map((p, i) => patchCmd(namespace, p.metadata.name, executorStatusPatch(s, p.metadata.name, i + 1))),
        )),
      );
    return snapshots;
  } finally {
    sender.close();
  }
}

export interface NoopMeasure {
  readonly cpuMsPerEvent: number;
  readonly userMsPerEvent: number;
  /** Kernel time: mostly the socket reads and writes of the HTTP exchange (and the log's writes). */
  readonly systemMsPerEvent: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly calls: number;
}

export async function noopRun(
  section: Section,
  emulator: EmulatorProcess,
  target: { readonly url: string; readonly pid: number },
  namespace: string,
  snapshots: readonly PodBody[],
  n: number,
  during?: (run: () => Promise<void>) => Promise<void>,
): Promise<NoopMeasure> {
  const sender = new AdapterSender(target.url);
  try {
    // Warm: every snapshot once (JIT; the function has seen each pod already).
    for (const p of snapshots) section.note(`${namespace} no-op update (warm-up)`, await sender.send(watchedEvent('update', p)));
    const events = Array.from({ length: n }, (_, i) => watchedEvent('update', snapshots[i % snapshots.length]!));
    const before = (await emulator.requests(namespace)).length;
    const samples: number[] = [];
    let user = 0;
    let system = 0;
    const run = async (): Promise<void> => {
      const cpu0 = cpuTimes(target.pid);
      for (const event of events) {
        const d = await sender.send(event);
        section.note(`${namespace} no-op update`, d);
        samples.push(d.ms);
      }
      const cpu1 = cpuTimes(target.pid);
      user = cpu1.userMs - cpu0.userMs;
      system = cpu1.systemMs - cpu0.systemMs;
    };
    if (during === undefined) await run();
    else await during(run);
    const calls = (await emulator.requests(namespace)).length - before;
    return {
      cpuMsPerEvent: round((user + system) / n, 3),
      userMsPerEvent: round(user / n, 3),
      systemMsPerEvent: round(system / n, 3),
      p50Ms: round(median(samples), 3),
      p99Ms: round(percentile(samples, 99), 3),
      calls,
    };
  } finally {
    sender.close();
  }
}

/** Each figure's median over the rounds. */
export function medianMeasure(rounds: readonly NoopMeasure[]): Omit<NoopMeasure, 'calls'> {
  const m = (f: (r: NoopMeasure) => number): number => round(median(rounds.map(f)), 3);
  return {
    cpuMsPerEvent: m((r) => r.cpuMsPerEvent),
    userMsPerEvent: m((r) => r.userMsPerEvent),
    systemMsPerEvent: m((r) => r.systemMsPerEvent),
    p50Ms: m((r) => r.p50Ms),
    p99Ms: m((r) => r.p99Ms),
  };
}

/**
 * The least any Node HTTP sink of these events does: read the body, parse its JSON, answer 204
 * (no CloudEvents SDK, no validation, no log). Its CPU per event is what the function's can be
 * compared with on this machine.
 */
const SINK_SCRIPT = `const status = Number(process.env.STATUS); require('node:http').createServer((q, s) => { const c = []; q.on('data', (d) => c.push(d)); q.on('end', () => { if (c.length > 0) JSON.parse(Buffer.concat(c).toString('utf8')); s.writeHead(status); s.end(); }); }).listen(Number(process.env.PORT), '127.0.0.1');`;

/** The bare sink in a process of its own; `status`: 204 as the function answers with REPLY_MODE=none, or 200. */
export async function startBareSink(
  status = 204,
  launch?: (command: string, args: readonly string[]) => { command: string; args: string[] },
): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const argv =
    launch === undefined ? { command: process.execPath, args: ['-e', SINK_SCRIPT] } : launch(process.execPath, ['-e', SINK_SCRIPT]);
  const child = spawn(argv.command, argv.args, {
    env: { PATH: process.env['PATH'] ?? '', PORT: String(port), STATUS: String(status) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}/`;
  try {
    await waitForHttpOk(url, { child, timeoutMs: 10_000 });
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  return { url, pid: child.pid!, stop: () => stopChild(child) };
}

// ---- an application of many executors: the longest single event -----------------------------

async function largeApp(
  section: Section,
  emulator: EmulatorProcess,
  fn: FunctionProcess,
  namespace: string,
  executors: number,
): Promise<LargeAppEvent[]> {
  const sender = new AdapterSender(fn.url);
  const out: LargeAppEvent[] = [];
  const one = async (what: string, step: Step, event: AdapterEvent, driverName: string): Promise<void> => {
    const servicesBefore = await emulator.countObjects('services', namespace);
    const sent: Sent[] = [];
    await section.phase(sender, namespace, [{ step, event }], sent);
    const { records } = await section.attribute(namespace, driverName, sent);
    out.push({
      what,
      ms: records[0]!.ms,
      calls: records[0]!.calls,
      servicesBefore,
      servicesAfter: await emulator.countObjects('services', namespace),
    });
  };
  try {
    // The application ran `executors` executors; they are gone, their Services in their cool-down.
    const [created] = await emulator.seed([{ ...realisticDriverPod(namespace, 900), status: { phase: 'Running', podIP: '10.244.0.5' } }]);
    const driver = created!;
    const appId = driver.metadata.labels['spark-app-selector']!;
    const markedAt = iso();
    const services = Array.from({ length: executors }, (_, i) => {
      const body = desiredExecutorService(
        namespace,
        {
          appId,
          execId: String(i + 1),
          executor: { name: `bench-900-exec-${i + 1}`, uid: `gone-${i + 1}` },
          owner: { name: driver.metadata.name, uid: driver.metadata.uid! },
        },
        7079,
      );
      return {
        ...body,
        metadata: { ...body.metadata, annotations: { ...body.metadata.annotations, [EXECUTOR_GONE_AT_ANNOTATION]: markedAt } },
      };
    });
    for (let i = 0; i < services.length; i += 250) await emulator.seed(services.slice(i, i + 250));
    // Another application starts in the same namespace: its first executor's add counts our Services.
    const [other] = await emulator.seed([{ ...realisticDriverPod(namespace, 901), status: { phase: 'Running', podIP: '10.244.0.6' } }]);
    const [exec] = await emulator.seed([realisticExecutorPod(other!, 1)]);
    await one(
      `first add of another app (namespace holds ${executors} Services)`,
      'add: first executor of the app',
      watchedEvent('add', exec!),
      other!.metadata.name,
    );
    const finished = await emulator.call<PodBody>({
      op: 'patch',
      resource: 'pods',
      namespace,
      name: driver.metadata.name,
      patch: DRIVER_SUCCEEDED_PATCH,
    });
    await one(
      `driver update Succeeded (${executors} Services in their cool-down)`,
      'driver: update Succeeded',
      watchedEvent('update', finished),
      driver.metadata.name,
    );
    const last = await emulator.call<PodBody>({ op: 'get', resource: 'pods', namespace, name: driver.metadata.name });
    await emulator.call({ op: 'delete', resource: 'pods', namespace, name: driver.metadata.name });
    await one('driver delete', 'driver: delete', watchedEvent('delete', last), driver.metadata.name);
    return out;
  } finally {
    sender.close();
  }
}

// ---- the section -----------------------------------------------------------------------------

function stepStats(apps: readonly AppRun[]): StepStats[] {
  return STEPS.flatMap((step) => {
    const records = apps.flatMap((a) => a.records.filter((r) => r.step === step));
    if (records.length === 0) return [];
    const calls: Record<string, number> = {};
    for (const r of records) for (const [k, v] of Object.entries(r.calls)) calls[k] = (calls[k] ?? 0) + v;
    const total = Object.values(calls).reduce((a, b) => a + b, 0);
    const ms = records.map((r) => r.ms);
    return [
      {
        step,
        events: records.length,
        callsPerEvent: round(total / records.length, 3),
        calls,
        p50Ms: round(median(ms), 3),
        p99Ms: round(percentile(ms, 99), 3),
        maxMs: round(Math.max(...ms), 3),
      },
    ];
  });
}

/** Groups of steps whose time adds up to the scale-up and the teardown. */
export const TIME_GROUPS: ReadonlyArray<{ readonly group: string; readonly steps: readonly Step[] }> = [
  // Since issue 17 the Services are made at the running update (only a running executor claims its slot).
  {
    group: 'scale-up: first add of each batch (a Pending executor: no call)',
    steps: ['add: first of a later batch', 'add: first executor of the app'],
  },
  { group: 'scale-up: rest of a batch (no call)', steps: ['add: rest of a batch'] },
  {
    group: "scale-up: running (the first of a batch: its pods, its Services, once per app the driver and the count, the batch's creates)",
    steps: ['update: running'],
  },
  { group: 'scale-up: scheduled, creating, ready (no-op)', steps: ['update: scheduled', 'update: creating', 'update: ready'] },
  { group: 'teardown: deletionTimestamp + delete (no-op)', steps: ['update: deletionTimestamp (still Running)', 'delete'] },
  { group: 'teardown: phase Failed (a list + marks per 32, else nothing)', steps: ['update: phase Failed'] },
  { group: 'teardown: driver Succeeded + delete', steps: ['driver: update Succeeded', 'driver: delete'] },
];

function timePerExecutor(apps: readonly AppRun[]): Record<string, number> {
  const executors = apps.reduce((a, x) => a + x.executors, 0);
  const out: Record<string, number> = {};
  for (const { group, steps } of TIME_GROUPS) {
    const ms = apps.reduce((a, x) => a + x.records.filter((r) => steps.includes(r.step)).reduce((b, r) => b + r.ms, 0), 0);
    out[group] = round(ms / executors, 2);
  }
  return out;
}

export function callsPerExecutor(app: AppRun): { scaleUp: number; termination: number; driver: number; total: number } {
  const sum = (part: Part): number =>
    app.records.filter((r) => PART_OF[r.step] === part).reduce((a, r) => a + Object.values(r.calls).reduce((x, y) => x + y, 0), 0);
  const n = app.executors;
  const scaleUp = sum('scale-up') / n;
  const termination = sum('termination') / n;
  const driver = (sum('driver start') + sum('driver end')) / n;
  return {
    scaleUp: round(scaleUp, 2),
    termination: round(termination, 2),
    driver: round(driver, 2),
    total: round(scaleUp + termination + driver, 2),
  };
}

export async function runSequential(options: SequentialOptions): Promise<SequentialResult> {
  const { log } = options;
  const env = manifestEnv();
  const latencies = [...new Set(options.latenciesMs)].sort((a, b) => a - b);
  const appNs = (lat: number, rep: number): string => `seq-${lat}ms-${rep}`;
  const namespaces = [
    'seq-warm',
    ...latencies.flatMap((lat) => Array.from({ length: options.reps }, (_, r) => appNs(lat, r + 1))),
    ...options.pacedRates.map((rate) => `seq-paced-${rate}`),
    'seq-noop',
    'seq-noop-prof',
    'seq-large',
  ];
  const fnEnv = { ...env, WATCH_NAMESPACES: namespaces.join(',') };
  const emulator = await startEmulatorProcess();
  const results: LatencyResult[] = [];
  let section: Section | undefined;
  const paced: PacedResult[] = [];
  let noop: NoopResult | undefined;
  let large: LargeAppEvent[] | undefined;
  let podBytes = { add: 0, ready: 0, failed: 0 };
  try {
    const fn = await startFunctionProcess({
      entry: options.entry,
      kubeconfig: emulator.kubeconfig,
      env: fnEnv,
      logFile: join(options.resultsDir, 'function-sequential.log'),
    });
    section = new Section(emulator, fn);
    // The fair floor's delivery: a bare node:http server answering 200, for the whole section.
    const sink = await startBareSink(200);
    const kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromFile(emulator.kubeconfig);
    const api = kubeConfig.makeApiClient(k8s.CoreV1Api);
    try {
      // Pod sizes as the function receives them.
      {
        const [d] = await emulator.seed([realisticDriverPod('seq-sizes', 1)]);
        const [e] = await emulator.seed([realisticExecutorPod(d!, 1)]);
        const add = watchedEvent('add', e!).body.length;
        let ready = 0;
        for (const s of STATUS_STEPS)
          ready = watchedEvent(
            'update',
            await emulator.call<PodBody>(patchCmd('seq-sizes', e!.metadata.name, executorStatusPatch(s, e!.metadata.name, 1))),
          ).body.length;
        const failed = watchedEvent(
          'update',
          await emulator.call<PodBody>(patchCmd('seq-sizes', e!.metadata.name, executorStatusPatch('failed', e!.metadata.name, 1))),
        ).body.length;
        podBytes = { add, ready, failed };
      }
      // Warm-up (JIT) of both sides, not timed.
      await section.setLatency(0);
      const warm = await section.app('seq-warm', 100, Math.min(20, options.executors), 0);
      await deliveryFloor(section, sink.url, warm.sentEvents);
      await floorRun(emulator, api, 'seqf-warm', 50, 100, 0, 0);

      const apps = new Map<number, AppRun[]>();
      const floors = new Map<number, FloorRun[]>();
      for (let rep = 1; rep <= options.reps; rep++) {
        for (const lat of latencies) {
          await section.setLatency(lat);
          const seed = 100 + rep * 10 + latencies.indexOf(lat);
          let writes: Omit<FloorRun, 'deliveryScaleUpMs' | 'deliveryTeardownMs'> | undefined;
          let delivered: { scaleUpMs: number; teardownMs: number } | undefined;
          const runFloor = async (): Promise<void> => {
            writes = await floorRun(emulator, api, `seqf-${lat}ms-${rep}`, options.executors, seed, lat, rep);
          };
          const runApp = async (): Promise<void> => {
            const { sentEvents, ...app } = await section!.app(appNs(lat, rep), seed, options.executors, rep);
            apps.set(lat, [...(apps.get(lat) ?? []), app]);
            // The same events to the bare sink, right after (the delivery part of the fair floor).
            delivered = await deliveryFloor(section!, sink.url, sentEvents);
          };
          // Alternate which goes first, so that neither always runs on the warmer machine.
          if (rep % 2 === 1) {
            await runFloor();
            await runApp();
          } else {
            await runApp();
            await runFloor();
          }
          const f: FloorRun = { ...writes!, deliveryScaleUpMs: delivered!.scaleUpMs, deliveryTeardownMs: delivered!.teardownMs };
          floors.set(lat, [...(floors.get(lat) ?? []), f]);
          const a = apps.get(lat)!.at(-1)!;
          const fairUp = f.batchCreateMs + f.deliveryScaleUpMs;
          const fairDown = f.batchDeleteMs + f.deliveryTeardownMs;
          log(
            `  ${String(lat).padStart(2)} ms/call, run ${rep}: scale-up ${Math.round(a.scaleUpMs)} ms vs fair floor ${Math.round(fairUp)} ms (${(a.scaleUpMs / fairUp).toFixed(2)}×; batches ${Math.round(f.batchCreateMs)} + delivery ${Math.round(f.deliveryScaleUpMs)}), sequential floor ${Math.round(f.createMs)} ms (${(a.scaleUpMs / f.createMs).toFixed(2)}×); ` +
              `teardown ${Math.round(a.teardownMs)} ms vs fair floor ${Math.round(fairDown)} ms (${(a.teardownMs / fairDown).toFixed(2)}×), sequential floor ${Math.round(f.deleteMs)} ms (${(a.teardownMs / f.deleteMs).toFixed(2)}×)`,
          );
        }
      }
      for (const lat of latencies) {
        const as = apps.get(lat)!;
        const fs = floors.get(lat)!;
        const m = (xs: number[]): number => round(median(xs), 1);
        results.push({
          latencyMs: lat,
          apps: as,
          floors: fs,
          median: {
            scaleUpMs: m(as.map((a) => a.scaleUpMs)),
            lastServiceMs: m(as.map((a) => a.lastServiceMs)),
            teardownMs: m(as.map((a) => a.teardownMs)),
            servicesGoneMs: m(as.map((a) => a.servicesGoneMs)),
            floorCreateMs: m(fs.map((f) => f.createMs)),
            floorDeleteMs: m(fs.map((f) => f.deleteMs)),
            reuseCreateMs: m(fs.map((f) => f.reuseCreateMs)),
            reuseDeleteMs: m(fs.map((f) => f.reuseDeleteMs)),
            scaleUpRatio: round(median(as.map((a, i) => a.scaleUpMs / fs[i]!.createMs)), 2),
            lastServiceRatio: round(median(as.map((a, i) => a.lastServiceMs / fs[i]!.createMs)), 2),
            teardownRatio: round(median(as.map((a, i) => a.teardownMs / fs[i]!.deleteMs)), 2),
            batchCreateMs: m(fs.map((f) => f.batchCreateMs)),
            batchDeleteMs: m(fs.map((f) => f.batchDeleteMs)),
            deliveryScaleUpMs: m(fs.map((f) => f.deliveryScaleUpMs)),
            deliveryTeardownMs: m(fs.map((f) => f.deliveryTeardownMs)),
            fairScaleUpMs: m(fs.map((f) => f.batchCreateMs + f.deliveryScaleUpMs)),
            fairTeardownMs: m(fs.map((f) => f.batchDeleteMs + f.deliveryTeardownMs)),
            fairScaleUpRatio: round(median(as.map((a, i) => a.scaleUpMs / (fs[i]!.batchCreateMs + fs[i]!.deliveryScaleUpMs))), 2),
            fairTeardownRatio: round(median(as.map((a, i) => a.teardownMs / (fs[i]!.batchDeleteMs + fs[i]!.deliveryTeardownMs))), 2),
            functionCpuMsPerEvent: round(median(as.map((a) => a.functionCpuMsPerEvent)), 3),
            scaleUpCpuMsPerEvent: round(median(as.map((a) => a.scaleUpCpuMsPerEvent)), 3),
            teardownCpuMsPerEvent: round(median(as.map((a) => a.teardownCpuMsPerEvent)), 3),
          },
          timePerExecutor: timePerExecutor(as),
        });
      }

      // Paced scale-ups at Spark's allocation rates.
      const pacedLatency = latencies.includes(TARGETS.atLatencyMs) ? TARGETS.atLatencyMs : latencies[latencies.length - 1]!;
      await section.setLatency(pacedLatency);
      for (const rate of options.pacedRates) {
        const r = await pacedRun(section, emulator, fn, `seq-paced-${rate}`, 300 + rate, rate, options.pacedBatches, pacedLatency);
        paced.push(r);
        log(
          `  paced ${rate} pods/s at ${pacedLatency} ms/call: creation → Service p50 ${r.lagMs.p50} ms, p99 ${r.lagMs.p99} ms, max ${r.lagMs.max} ms (${r.pods} pods, stream busy ${Math.round(r.busy * 100)} %)`,
        );
      }

      // No-op updates: the function's CPU per event (no API latency: none is called).
      await section.setLatency(0);
      const snapshots = await noopFixture(section, emulator, fn, 'seq-noop', 400, Math.min(50, options.executors));
      const rounds: NoopMeasure[] = [];
      const sinkRounds: NoopMeasure[] = [];
      const noopSink = await startBareSink();
      try {
        for (let k = 0; k < options.reps; k++) {
          rounds.push(await noopRun(section, emulator, fn, 'seq-noop', snapshots, options.noopEvents));
          sinkRounds.push(await noopRun(section, emulator, noopSink, 'seq-noop', snapshots, options.noopEvents));
        }
      } finally {
        await noopSink.stop();
      }
      const calls = rounds.reduce((a, r) => a + r.calls, 0);
      if (calls !== 0)
        section.failures.push(`sequential: ${options.noopEvents * rounds.length} no-op updates cost ${calls} API call(s) — must be 0`);
      const measured = medianMeasure(rounds);
      const floor = medianMeasure(sinkRounds);
      noop = {
        events: options.noopEvents,
        rounds: rounds.length,
        ...measured,
        calls,
        httpFloor: floor,
        perRound: rounds.map((r) => r.cpuMsPerEvent),
        httpFloorPerRound: sinkRounds.map((r) => r.cpuMsPerEvent),
      };
      log(
        `  no-op updates: ${measured.cpuMsPerEvent} ms of function CPU per event (median of ${rounds.length} × ${options.noopEvents}: ${rounds.map((r) => r.cpuMsPerEvent).join(', ')}; user ${measured.userMsPerEvent}, system ${measured.systemMsPerEvent}; target ≤ ${TARGETS.noopCpuMs}), ` +
          `p50 ${measured.p50Ms} ms, ${calls} API calls; bare node:http sink ${floor.cpuMsPerEvent} ms, p50 ${floor.p50Ms} ms`,
      );

      // The longest single event: an application of many executors ends.
      if (options.largeApp > 0 && latencies.includes(TARGETS.atLatencyMs)) {
        await section.setLatency(TARGETS.atLatencyMs);
        large = await largeApp(section, emulator, fn, 'seq-large', options.largeApp);
        for (const e of large)
          log(
            `  large app, ${TARGETS.atLatencyMs} ms/call: ${e.what}: ${Math.round(e.ms)} ms, Services ${e.servicesBefore} → ${e.servicesAfter}`,
          );
      }
    } finally {
      await sink.stop();
      await fn.stop();
    }

    // Where a no-op update's CPU goes: a second process with the inspector, profiled over the same run.
    if (noop !== undefined && (noop.cpuMsPerEvent > TARGETS.noopCpuMs || options.profile)) {
      await emulator.call({ op: 'latency', ms: 0 });
      const inspectPort = await freePort();
      // A profile that cannot be taken (the process did not get ready in time on a loaded
      // machine) is reported as a failure; the figures measured so far are still written.
      const prof = await startFunctionProcess({
        entry: options.entry,
        kubeconfig: emulator.kubeconfig,
        env: fnEnv,
        logFile: join(options.resultsDir, 'function-sequential-profile.log'),
        inspectPort,
      }).catch((error: unknown) => {
        section!.failures.push(
          `sequential: the no-op profile could not be taken: ${error instanceof Error ? error.message : String(error)}`,
        );
        return undefined;
      });
      if (prof !== undefined)
        try {
          const snapshots = await noopFixture(section, emulator, prof, 'seq-noop-prof', 401, Math.min(50, options.executors));
          const inspector = await connectInspector(inspectPort);
          try {
            let profile: object | undefined;
            await noopRun(section, emulator, prof, 'seq-noop-prof', snapshots, options.noopEvents, async (run) => {
              profile = await inspector.profile(run);
            });
            mkdirSync(options.profileDir, { recursive: true });
            const file = join(options.profileDir, 'function-noop-updates.cpuprofile');
            writeFileSync(file, JSON.stringify(profile));
            noop = { ...noop, profile: summarizeProfile(file, undefined, 20), profileFile: file };
          } finally {
            inspector.close();
          }
        } finally {
          await prof.stop();
        }
    }
  } finally {
    await emulator.stop();
  }

  const perExecutor = results.map((r) => {
    // The app whose scale-up was the median one stands for the latency (counts barely vary).
    const sorted = [...r.apps].sort((a, b) => a.scaleUpMs - b.scaleUpMs);
    return { latencyMs: r.latencyMs, ...callsPerExecutor(sorted[Math.floor(sorted.length / 2)]!) };
  });
  const failures = [...section!.failures];
  return {
    executors: options.executors,
    batchSize: BATCH_SIZE,
    concurrency: CONCURRENCY,
    reps: options.reps,
    functionEnv: env,
    podBytes,
    latencies: results,
    steps: results.map((r) => ({ latencyMs: r.latencyMs, stats: stepStats(r.apps) })),
    perExecutor,
    paced,
    noop,
    largeApp: large === undefined ? undefined : { executors: options.largeApp, latencyMs: TARGETS.atLatencyMs, events: large },
    longestEvent: section!.longest === undefined ? undefined : { ms: round(section!.longest.ms, 3), what: section!.longest.what },
    targets: TARGETS,
    failures,
  };
}
