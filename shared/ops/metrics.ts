/**
 * The function's Prometheus metrics (prom-client), served at GET /metrics on the function's port.
 *
 * One `Metrics` per function process, each with its own `Registry` (never prom-client's global
 * one), so that several function instances in one process — tests, the bench — do not share or
 * clash. Every label value is from a small fixed set or from the configuration (watched
 * namespaces): never a pod, Service or application name, nor anything else an event carries.
 * What each metric means, and how to read a bad day from them: docs/metrics.md.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { APISERVER_REF_TYPE_PREFIX, APISERVER_RESOURCE_TYPE_PREFIX, PING_TYPE } from '../model/events.ts';
import type { KubeApiError } from '../kube/errors.ts';
import { type KubeResource, type KubeVerb, kubeCodeLabel } from '../kube/middleware.ts';
import { type EventAction, OUTCOMES, type ServiceOutcome, type SweepRound } from '../rules/outcome.ts';

export const METRICS_PATH = '/metrics';
export const METRIC_PREFIX = 'spark_exec_svc_';

/** CloudEvent types that become label values as they are; any other type is `other`, none at all `unknown`. */
export const EVENT_TYPE_LABELS: readonly string[] = [
  ...['add', 'update', 'delete'].map((verb) => `${APISERVER_RESOURCE_TYPE_PREFIX}${verb}`),
  ...['add', 'update', 'delete'].map((verb) => `${APISERVER_REF_TYPE_PREFIX}${verb}`),
  PING_TYPE,
];
const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set(EVENT_TYPE_LABELS);

export function eventTypeLabel(type: unknown): string {
  if (typeof type !== 'string' || type === '') return 'unknown';
  return KNOWN_EVENT_TYPES.has(type) ? type : 'other';
}

/** An event's outcome: the headline of what was done (2xx), `rejected` (4xx) or `failed` (5xx). */
export type EventOutcome = EventAction | 'rejected' | 'failed';

/** Why a request was refused (4xx): a class, never the message. */
export type RefusedReason =
  | 'body-too-large' // 413: the body exceeds MAX_BODY_BYTES
  | 'not-a-cloudevent' // 400: missing/unsupported attributes, unparseable
  | 'batch' // 400: batched CloudEvents
  | 'invalid-event' // 400: a CloudEvent, but its data is not what its type promises
  | 'method-not-allowed' // 405
  | 'unknown-path' // 404
  // The HTTP edge (functions/executor-service/request-limits.ts, sender-auth.ts):
  | 'json-too-deep' // 400: nested deeper than MAX_JSON_DEPTH, refused unparsed
  | 'body-not-received' // 408: the body did not arrive within REQUEST_RECEIVE_TIMEOUT_MS (or the sender left)
  | 'too-many-connections' // connection closed on accept: MAX_CONNECTIONS open
  | 'unauthenticated' // 401: no valid token for our audience (SENDER_AUTH)
  | 'forbidden' // 403: a valid token of an identity not in SENDER_AUTH_USERS
  | 'auth-unavailable'; // 503: the TokenReview could not be made

/**
 * How a sweep tick ended: a whole round over every watched namespace finished, it goes on next
 * time, it failed (5xx), or it found another sweep running in the process and did nothing, or it came
 * sooner than SWEEP_MIN_INTERVAL_MS after the last start and did nothing (functions/executor-service/sweep-gate.ts).
 */
/** `too-soon`: refused by the sweep gate before any round began (functions/executor-service/sweep-gate.ts). */
export type SweepResult = SweepRound | 'failed' | 'too-soon';

interface CacheStats {
  readonly size: number;
  readonly bytes: number;
  readonly evictions: number;
}

/** What the metrics read of the process's fact memory (shared/engine/memory.ts). */
export interface FactMemoryStats {
  readonly pods: CacheStats;
  readonly services: CacheStats;
  readonly claimants: CacheStats;
  serviceCount(namespace: string): { readonly value: number } | undefined;
}

/** What the metrics read from the running process when scraped. */
export interface MetricSources {
  readonly facts: FactMemoryStats;
  readonly namespaces: readonly string[];
  readonly maxServicesPerNamespace: number;
  readonly inFlight?: () => number;
}

export interface MetricsOptions {
  /** Node's default process metrics (CPU, memory, event loop, GC, handles): on in the container. */
  readonly processMetrics?: boolean;
  /** Wall clock in epoch ms (the sweep's timestamps). */
  readonly now?: () => number;
}

const MISNAMED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

const EVENT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5, 10, 20, 30];
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const SWEEP_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60];

export class Metrics {
  readonly registry: Registry;

  // A small view kept for the soak and bench scripts, the shutdown log line and older tests.
  /** Events answered 2xx by the handler. */
  eventsHandled = 0;
  /** Events the handler answered 4xx or 5xx. */
  eventsFailed = 0;
  /** API calls retried inside events. */
  retries = 0;

  readonly events: Counter<'type' | 'outcome' | 'code'>;
  readonly eventDuration: Histogram<'type'>;
  readonly serviceOutcomes: Counter<'outcome' | 'trigger'>;
  readonly refused: Counter<'reason'>;
  readonly kubeRequests: Counter<'verb' | 'resource' | 'code'>;
  readonly kubeRequestDuration: Histogram<'verb' | 'resource'>;
  readonly kubeRetries: Counter<'code'>;
  readonly listItemsSkipped: Counter<'resource'>;
  readonly sweepRuns: Counter<'result'>;
  readonly sweepDuration: Histogram;
  readonly sweepRepairs: Counter<'kind'>;
  readonly sweepLastRepairing: Gauge;
  readonly sweepLastClean: Gauge;
  readonly managedServices: Gauge<'service_namespace'>;
  readonly managedServicesLimit: Gauge<'service_namespace'>;
  readonly cacheEntries: Gauge<'kind'>;
  readonly cacheBytes: Gauge<'kind'>;
  readonly cacheEvictions: Counter<'kind'>;
  readonly inFlight: Gauge;

  private sources: MetricSources | undefined;
  private readonly now: () => number;

  constructor(options: MetricsOptions = {}) {
    const registry = new Registry();
    this.registry = registry;
    this.now = options.now ?? Date.now;
    const registers = [registry];
    const sources = (): MetricSources | undefined => this.sources;

    this.events = new Counter({
      name: `${METRIC_PREFIX}events_total`,
      help: 'CloudEvents received on POST /, by CloudEvent type, outcome (what was done, or rejected/failed) and HTTP status code of the answer.',
      labelNames: ['type', 'outcome', 'code'],
      registers,
    });
    this.eventDuration = new Histogram({
      name: `${METRIC_PREFIX}event_duration_seconds`,
      help: 'Time from receiving a CloudEvent to the end of its answer, retries included, by CloudEvent type.',
      labelNames: ['type'],
      buckets: EVENT_BUCKETS,
      registers,
    });
    this.serviceOutcomes = new Counter({
      name: `${METRIC_PREFIX}service_outcomes_total`,
      help: 'What happened to each executor Service an event or the sweep looked at, by outcome and trigger (event or sweep; the sweep reports only its writes and conflicts). outcome="conflict" counts identity conflicts.',
      labelNames: ['outcome', 'trigger'],
      registers,
    });
    this.refused = new Counter({
      name: `${METRIC_PREFIX}refused_total`,
      help: 'Requests answered 4xx, by reason class.',
      labelNames: ['reason'],
      registers,
    });
    this.kubeRequests = new Counter({
      name: `${METRIC_PREFIX}kube_requests_total`,
      help: 'Kubernetes API requests, by verb, resource and response code (HTTP status; "timeout", "error" for no answer, "invalid-response" for an answer that could not be read).',
      labelNames: ['verb', 'resource', 'code'],
      registers,
    });
    this.kubeRequestDuration = new Histogram({
      name: `${METRIC_PREFIX}kube_request_duration_seconds`,
      help: 'Latency of one Kubernetes API request (one attempt), by verb and resource.',
      labelNames: ['verb', 'resource'],
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.kubeRetries = new Counter({
      name: `${METRIC_PREFIX}kube_retries_total`,
      help: 'Kubernetes API requests retried inside an event, by the code of the failed attempt.',
      labelNames: ['code'],
      registers,
    });
    this.listItemsSkipped = new Counter({
      name: `${METRIC_PREFIX}list_items_skipped_total`,
      help: 'Items of Kubernetes API list answers that could not be read (each logged with its name and reason), by resource: skipped, the rest of the page used.',
      labelNames: ['resource'],
      registers,
    });
    this.sweepRuns = new Counter({
      name: `${METRIC_PREFIX}sweep_runs_total`,
      help: 'Sweep runs (PingSource ticks), by result: round-completed (every watched namespace covered), continues (stopped at half its budget; the next run goes on), failed, already-running (another sweep of this process was running: nothing done), too-soon (less than SWEEP_MIN_INTERVAL_MS after the last start: nothing done). The last two are answered 2xx.',
      labelNames: ['result'],
      registers,
    });
    this.sweepDuration = new Histogram({
      name: `${METRIC_PREFIX}sweep_duration_seconds`,
      help: 'Duration of one sweep run.',
      buckets: SWEEP_BUCKETS,
      registers,
    });
    this.sweepRepairs = new Counter({
      name: `${METRIC_PREFIX}sweep_repairs_total`,
      help: 'Services the sweep wrote, by kind (created, patched, marked-gone, unmarked, deleted; deleted is mostly the planned end of cool-downs).',
      labelNames: ['kind'],
      registers,
    });
    this.sweepLastRepairing = new Gauge({
      name: `${METRIC_PREFIX}sweep_last_repairing_run_timestamp_seconds`,
      help: 'When the last sweep run of this process that had to create, patch, mark or unmark a Service ended (Unix time; 0 = none yet).',
      registers,
    });
    this.sweepLastClean = new Gauge({
      name: `${METRIC_PREFIX}sweep_last_clean_run_timestamp_seconds`,
      help: 'When the last sweep run of this process that found nothing to create, patch, mark or unmark ended (Unix time; 0 = none yet).',
      registers,
    });
    this.managedServices = new Gauge({
      name: `${METRIC_PREFIX}managed_services`,
      help: 'Executor Services of ours per watched namespace, as last counted by this process and kept current by its own writes (garbage collection shows at the next count).',
      labelNames: ['service_namespace'],
      registers,
      collect() {
        this.reset();
        const from = sources();
        if (from === undefined) return;
        for (const namespace of from.namespaces) {
          const count = from.facts.serviceCount(namespace);
          if (count !== undefined) this.set({ service_namespace: namespace }, count.value);
        }
      },
    });
    this.managedServicesLimit = new Gauge({
      name: `${METRIC_PREFIX}managed_services_limit`,
      help: 'MAX_SERVICES_PER_NAMESPACE: creates stop (skipped) once a namespace holds this many of our Services.',
      labelNames: ['service_namespace'],
      registers,
      collect() {
        this.reset();
        const from = sources();
        if (from === undefined) return;
        for (const namespace of from.namespaces) this.set({ service_namespace: namespace }, from.maxServicesPerNamespace);
      },
    });
    // One loop over the fact cache's kinds, for the three cache metrics.
    const eachCacheKind = (visit: (kind: string, cache: { size: number; bytes: number; evictions: number }) => void): void => {
      const from = sources();
      if (from === undefined) return;
      for (const [kind, cache] of Object.entries({ pods: from.facts.pods, services: from.facts.services, claimants: from.facts.claimants }))
        visit(kind, cache);
    };
    this.cacheEntries = new Gauge({
      name: `${METRIC_PREFIX}fact_cache_entries`,
      help: 'Entries in the per-process fact cache, by kind (pods, services, claimants).',
      labelNames: ['kind'],
      registers,
      collect() {
        eachCacheKind((kind, cache) => this.set({ kind }, cache.size));
      },
    });
    this.cacheBytes = new Gauge({
      name: `${METRIC_PREFIX}fact_cache_bytes`,
      help: 'Estimated bytes held by the per-process fact cache, by kind.',
      labelNames: ['kind'],
      registers,
      collect() {
        eachCacheKind((kind, cache) => this.set({ kind }, cache.bytes));
      },
    });
    this.cacheEvictions = new Counter({
      name: `${METRIC_PREFIX}fact_cache_evictions_total`,
      help: 'Entries the fact cache forgot to stay within its bounds, by kind.',
      labelNames: ['kind'],
      registers,
      collect() {
        if (sources() === undefined) return;
        this.reset();
        eachCacheKind((kind, cache) => this.inc({ kind }, cache.evictions));
      },
    });
    this.inFlight = new Gauge({
      name: `${METRIC_PREFIX}events_in_flight`,
      help: 'CloudEvents being handled right now.',
      registers,
      collect() {
        const from = sources();
        if (from?.inFlight !== undefined) this.set(from.inFlight());
      },
    });
    if (options.processMetrics === true) {
      collectDefaultMetrics({ register: registry });
      // prom-client also exports each total of its by-type gauges nodejs_active_{handles,requests,resources}
      // as a gauge named …_total, which Prometheus' conventions (and `promtool check metrics`) keep
      // for counters: sum() of the by-type gauge gives the same number.
      for (const name of MISNAMED_DEFAULT_METRICS) registry.removeSingleMetric(name);
    }
  }

  /** Where the gauges read from when scraped: the process's caches and configuration. */
  attach(sources: MetricSources): void {
    this.sources = sources;
  }

  /** The exposition, in Prometheus' text format. */
  async exposition(): Promise<{ readonly contentType: string; readonly body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  recordEvent(type: unknown, outcome: EventOutcome, code: number, seconds: number): void {
    const label = eventTypeLabel(type);
    this.events.inc({ type: label, outcome, code: String(code) });
    this.eventDuration.observe({ type: label }, seconds);
  }

  recordRefused(reason: RefusedReason): void {
    this.refused.inc({ reason });
  }

  recordServiceOutcomes(trigger: 'event' | 'sweep', outcomes: readonly ServiceOutcome[]): void {
    for (const outcome of outcomes) this.serviceOutcomes.inc({ outcome: outcome.action, trigger });
  }

  recordSweep(result: SweepResult, seconds: number, outcomes: readonly ServiceOutcome[]): void {
    this.sweepRuns.inc({ result });
    if (result === 'already-running' || result === 'too-soon') return; // no run: neither a duration nor a verdict
    this.sweepDuration.observe(seconds);
    if (result === 'failed') return;
    // What the sweep wrote; all but `deleted` (mostly cool-downs ending, as planned) mean an event was lost or a Service drifted.
    for (const outcome of outcomes) if (OUTCOMES[outcome.action].changed) this.sweepRepairs.inc({ kind: outcome.action });
    const repairing = outcomes.some((o) => OUTCOMES[o.action].lostEventRepair);
    (repairing ? this.sweepLastRepairing : this.sweepLastClean).set(this.now() / 1000);
  }

  recordRetry(error: KubeApiError): void {
    this.retries++;
    this.kubeRetries.inc({ code: kubeCodeLabel(error) });
  }

  recordSkippedListItem(resource: KubeResource): void {
    this.listItemsSkipped.inc({ resource });
  }

  recordKubeRequest(verb: KubeVerb, resource: KubeResource, code: string, seconds: number): void {
    this.kubeRequests.inc({ verb, resource, code });
    this.kubeRequestDuration.observe({ verb, resource }, seconds);
  }

  /** The small view, for the shutdown log line. */
  summary(): { eventsHandled: number; eventsFailed: number; retries: number } {
    return { eventsHandled: this.eventsHandled, eventsFailed: this.eventsFailed, retries: this.retries };
  }
}

export function newMetrics(options: MetricsOptions = {}): Metrics {
  return new Metrics(options);
}
