/**
 * Writes the Grafana dashboard for the function's metrics (knative/overlays/monitoring/grafana-dashboard.json).
 * Import it in Grafana (Dashboards → Import), or let a dashboard sidecar load it:
 *   kubectl -n <grafana ns> create configmap spark-exec-svc-dashboard \
 *     --from-file=knative/overlays/monitoring/grafana-dashboard.json && kubectl label ... grafana_dashboard=1
 * test/install-story.test.ts checks that the committed file is this script's output and that every
 * series a panel reads is one the function serves (shared/metrics.ts).
 * Usage: node scripts/grafana-dashboard.ts [out.json]
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Target {
  expr: string;
  legendFormat: string;
}
interface Panel {
  title: string;
  unit: string;
  targets: Target[];
  description: string;
}

const ns = 'namespace=~"$namespace"';
/** The rows of the dashboard: what an operator reads first on a bad day (docs/metrics.md). */
export const PANELS: readonly Panel[] = [
  {
    title: 'Events by outcome',
    unit: 'ops',
    description: 'CloudEvents answered, by outcome and HTTP code. failed = 5xx: the sender redelivers.',
    targets: [{ expr: `sum by (outcome, code) (rate(spark_exec_svc_events_total{${ns}}[5m]))`, legendFormat: '{{outcome}} {{code}}' }],
  },
  {
    title: 'Event latency p50 / p99',
    unit: 's',
    description: "Per event, including retries. With a direct sink it is the namespace's event throughput (one event at a time).",
    targets: [
      { expr: `histogram_quantile(0.5, sum by (le) (rate(spark_exec_svc_event_duration_seconds_bucket{${ns}}[5m])))`, legendFormat: 'p50' },
      {
        expr: `histogram_quantile(0.99, sum by (le) (rate(spark_exec_svc_event_duration_seconds_bucket{${ns}}[5m])))`,
        legendFormat: 'p99',
      },
    ],
  },
  {
    title: 'Events in flight',
    unit: 'short',
    description: "Events being handled now, by type, summed over the function's pods (containerConcurrency is 20 per pod).",
    targets: [{ expr: `sum by (type) (spark_exec_svc_events_in_flight{${ns}})`, legendFormat: '{{type}}' }],
  },
  {
    title: 'Service outcomes',
    unit: 'ops',
    description: 'What events and sweeps did to Services: created, marked-gone, deleted, conflict, skipped …',
    targets: [{ expr: `sum by (outcome) (rate(spark_exec_svc_service_outcomes_total{${ns}}[5m]))`, legendFormat: '{{outcome}}' }],
  },
  {
    title: 'Kubernetes API requests by code',
    unit: 'reqps',
    description: '429 = throttled, 403 = RBAC (alert SparkExecSvcRbacDenied), 5xx/timeout = API server trouble; 404/409 are normal.',
    targets: [
      {
        expr: `sum by (verb, resource, code) (rate(spark_exec_svc_kube_requests_total{${ns}}[5m]))`,
        legendFormat: '{{verb}} {{resource}} {{code}}',
      },
    ],
  },
  {
    title: 'List items skipped',
    unit: 'ops',
    description:
      'Items of a pod or Service list the function could not read (skipped with a reason, the rest of the page used). A conformant API server sends none.',
    targets: [{ expr: `sum by (resource) (rate(spark_exec_svc_list_items_skipped_total{${ns}}[5m]))`, legendFormat: '{{resource}}' }],
  },
  {
    title: 'Kubernetes API latency p99',
    unit: 's',
    description: 'Against REQUEST_TIMEOUT_MS (1 s by default).',
    targets: [
      {
        expr: `histogram_quantile(0.99, sum by (le, verb) (rate(spark_exec_svc_kube_request_duration_seconds_bucket{${ns}}[5m])))`,
        legendFormat: '{{verb}}',
      },
    ],
  },
  {
    title: 'Retries',
    unit: 'ops',
    description: 'API requests retried inside an event, by the code that caused them.',
    targets: [{ expr: `sum by (code) (rate(spark_exec_svc_kube_retries_total{${ns}}[5m]))`, legendFormat: '{{code}}' }],
  },
  {
    title: 'Sweeps and repairs',
    unit: 'short',
    description:
      'Sweep runs by result and what they repaired. Repairs in many runs in a row = events are lost (alert SparkExecSvcSweepKeepsRepairing).',
    targets: [
      { expr: `sum by (result) (increase(spark_exec_svc_sweep_runs_total{${ns}}[1h]))`, legendFormat: 'runs {{result}}' },
      { expr: `sum by (kind) (increase(spark_exec_svc_sweep_repairs_total{${ns}}[1h]))`, legendFormat: 'repaired {{kind}}' },
    ],
  },
  {
    title: 'Sweep duration p90',
    unit: 's',
    description: 'Near half of SWEEP_DEADLINE_MS: the namespaces are too large for one run.',
    targets: [
      { expr: `histogram_quantile(0.9, sum by (le) (rate(spark_exec_svc_sweep_duration_seconds_bucket{${ns}}[1h])))`, legendFormat: 'p90' },
    ],
  },
  {
    title: 'Services managed vs the cap',
    unit: 'short',
    description: 'Per watched namespace, against MAX_SERVICES_PER_NAMESPACE (alert SparkExecSvcServicesNearLimit).',
    targets: [
      { expr: `max by (service_namespace) (spark_exec_svc_managed_services{${ns}})`, legendFormat: '{{service_namespace}}' },
      { expr: `max by (service_namespace) (spark_exec_svc_managed_services_limit{${ns}})`, legendFormat: '{{service_namespace}} cap' },
    ],
  },
  {
    title: 'Refused inputs',
    unit: 'ops',
    description: 'Requests refused before any work (not a CloudEvent, invalid, too large).',
    targets: [{ expr: `sum by (reason) (rate(spark_exec_svc_refused_total{${ns}}[5m]))`, legendFormat: '{{reason}}' }],
  },
  {
    title: 'Fact cache',
    unit: 'bytes',
    description: 'Estimated size of the bounded cache of observed facts, by kind.',
    targets: [{ expr: `max by (kind) (spark_exec_svc_fact_cache_bytes{${ns}})`, legendFormat: '{{kind}}' }],
  },
  {
    title: 'Function pods: resident memory',
    unit: 'bytes',
    description: "Node's process metrics (requests.memory is 128Mi, the limit 256Mi).",
    targets: [{ expr: `max by (pod) (process_resident_memory_bytes{${ns}, job=~".*/spark-exec-svc"})`, legendFormat: '{{pod}}' }],
  },
];

export function dashboard(): Record<string, unknown> {
  return {
    title: 'spark-exec-svc',
    uid: 'spark-exec-svc',
    description: 'Per-executor Services for Spark (docs/metrics.md explains each panel and the alerts).',
    tags: ['spark', 'knative'],
    schemaVersion: 39,
    version: 1,
    editable: true,
    time: { from: 'now-6h', to: 'now' },
    refresh: '1m',
    templating: {
      list: [
        { name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Data source' },
        {
          name: 'namespace',
          type: 'query',
          datasource: { type: 'prometheus', uid: '${datasource}' },
          label: 'Install namespace',
          query: 'label_values(spark_exec_svc_events_total, namespace)',
          includeAll: true,
          multi: true,
          refresh: 2,
        },
      ],
    },
    panels: PANELS.map((p, i) => ({
      id: i + 1,
      type: 'timeseries',
      title: p.title,
      description: p.description,
      datasource: { type: 'prometheus', uid: '${datasource}' },
      gridPos: { h: 8, w: 12, x: (i % 2) * 12, y: Math.floor(i / 2) * 8 },
      fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
      options: { legend: { displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi' } },
      targets: p.targets.map((t, j) => ({ refId: String.fromCharCode(65 + j), expr: t.expr, legendFormat: t.legendFormat })),
    })),
  };
}

export const dashboardJson = (): string => `${JSON.stringify(dashboard(), null, 2)}\n`;

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = resolve(process.argv[2] ?? fileURLToPath(new URL('../knative/overlays/monitoring/grafana-dashboard.json', import.meta.url)));
  writeFileSync(out, dashboardJson());
  console.log(`wrote ${out}`);
}
