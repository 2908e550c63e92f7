/**
 * The monitoring overlay (knative/overlays/monitoring): a PodMonitor that scrapes GET /metrics
 * and a PrometheusRule with the alerts of docs/metrics.md.
 *
 * The overlay is built with `kubectl kustomize`; the PodMonitor and the PrometheusRule are
 * validated with @kubernetes-models/prometheus-operator (test/manifests.test.ts also validates
 * and type-checks every object of the build). The rule groups are taken from the built
 * PrometheusRule — one source — into a rules file for the real `promtool`: `check rules`, then
 * `test rules` with test/fixtures/alerts.promtool-test.yaml, where every alert has a test that
 * fires it and a near miss that keeps it quiet. That each alert's tests really test it is
 * checked by mutation: with the alert's expression replaced by one that never fires, its firing
 * tests must fail; by one that always fires, its quiet tests must fail.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump, load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { METRICS_PATH, newMetrics } from '../../shared/ops/metrics.ts';
import { prometheusTools, runTool, toolVersion } from './prometheus-tools.ts';
import { configuredTree, kustomizeObjects, requireKubectl, skipWithoutKubectl } from './kustomize.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OVERLAY = 'knative/overlays/monitoring';
/** What knative/overlays/monitoring/runbook.env ships, as docs/metrics.md documents it. */
const DEFAULT_RUNBOOK_BASE = 'https://spark-exec-svc.invalid/docs/metrics.md';
const FIXTURE = path.join(ROOT, 'test/fixtures/alerts.promtool-test.yaml');
const SKIP_KUBECTL = skipWithoutKubectl('metrics-rules.test', 'the monitoring overlay checks');
const tools = prometheusTools('metrics-rules.test');
const skipPromtool = SKIP_KUBECTL || tools.skip(['promtool'], 'promtool check rules / test rules');

/** The alerts the issue asks for, by what they watch. */
const REQUIRED_ALERTS = [
  'SparkExecSvcEventsFailing', // events failing
  'SparkExecSvcIdentityConflicts', // conflicts appearing
  'SparkExecSvcRbacDenied', // RBAC denials
  'SparkExecSvcSweepKeepsRepairing', // the sweep repairing in several runs in a row: events are lost
  'SparkExecSvcServicesNearLimit', // Services near the per-namespace cap
];

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: Rule[];
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
}
interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: Array<{ exp_labels?: Record<string, string>; exp_annotations?: Record<string, string> }>;
}
interface PromtoolTests {
  rule_files: string[];
  tests: Array<{ name: string; input_series: unknown[]; alert_rule_test?: AlertTest[] }>;
}

let objects: K8sObject[] = [];
let groups: RuleGroup[] = [];
let dir = '';

const alerts = (): Rule[] => groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
const ofKind = (kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);

/** The fixture, with each expected alert's static annotations (description, runbook_url) taken from its rule. */
function promtoolTests(rules: readonly Rule[]): PromtoolTests {
  const tests = load(readFileSync(FIXTURE, 'utf8')) as PromtoolTests;
  const byAlert = new Map(rules.map((r) => [r.alert, r.annotations ?? {}]));
  for (const test of tests.tests) {
    for (const check of test.alert_rule_test ?? []) {
      for (const expected of check.exp_alerts) {
        for (const key of ['description', 'runbook_url']) {
          const value = byAlert.get(check.alertname)?.[key];
          if (value !== undefined && expected.exp_annotations?.[key] === undefined) {
            expected.exp_annotations = { ...expected.exp_annotations, [key]: value };
          }
        }
      }
    }
  }
  return tests;
}

/** Runs `promtool test rules` on `rules`; the names of the failing test groups. */
async function testRules(rules: readonly RuleGroup[], tag: string): Promise<{ code: number; failing: string[]; output: string }> {
  const rulesFile = path.join(dir, `rules-${tag}.yaml`);
  const testFile = path.join(dir, `tests-${tag}.yaml`);
  writeFileSync(rulesFile, dump({ groups: rules }));
  const tests = promtoolTests(rules.flatMap((g) => g.rules));
  writeFileSync(testFile, dump({ ...tests, rule_files: [path.basename(rulesFile)] }));
  const { code, output } = await runTool(tools.require('promtool'), ['test', 'rules', path.basename(testFile)], { cwd: dir });
  const failing = [...output.matchAll(/^\s*name: (.*),\s*$/gm)].map((m) => m[1]!);
  return { code, failing: [...new Set(failing)], output };
}

function withExpr(alert: string, expr: string): RuleGroup[] {
  return groups.map((g) => ({ ...g, rules: g.rules.map((r) => (r.alert === alert ? { ...r, expr } : r)) }));
}

describe.skipIf(SKIP_KUBECTL)(`${OVERLAY}`, () => {
  beforeAll(async () => {
    objects = await kustomizeObjects<K8sObject>(requireKubectl(), OVERLAY);
    groups = (ofKind('PrometheusRule')[0]?.spec['groups'] ?? []) as RuleGroup[];
    dir = mkdtempSync(path.join(os.tmpdir(), 'sxs-rules-'));
  });

  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('is the base plus two PodMonitors (function, adapter) and one PrometheusRule, valid against @kubernetes-models/prometheus-operator', async () => {
    const base = await kustomizeObjects<K8sObject>(requireKubectl(), 'knative/base');
    expect(objects.filter((o) => o.apiVersion !== 'monitoring.coreos.com/v1')).toEqual(base);
    expect(
      objects
        .filter((o) => o.apiVersion === 'monitoring.coreos.com/v1')
        .map((o) => o.kind)
        .sort(),
    ).toEqual(['PodMonitor', 'PodMonitor', 'PrometheusRule']);
    for (const o of ofKind('PodMonitor')) new PodMonitor(o as never).validate();
    for (const o of ofKind('PrometheusRule')) new PrometheusRule(o as never).validate();
    // The validator does reject a malformed object (guards the checks above).
    expect(() => new PodMonitor({ ...ofKind('PodMonitor')[0]!, spec: { podMetricsEndpoints: 'user-port' } } as never).validate()).toThrow();
  });

  it('the PodMonitor scrapes GET /metrics on the user port of the function’s revision pods, in its namespace', () => {
    const ksvc = objects.find((o) => o.kind === 'Service' && o.apiVersion === 'serving.knative.dev/v1')!;
    const monitor = ofKind('PodMonitor').find((m) => m.metadata.name === 'spark-exec-svc')!;
    expect(monitor.metadata.namespace).toBe(ksvc.metadata.namespace);
    const spec = monitor.spec as {
      selector: { matchLabels?: Record<string, string> };
      namespaceSelector?: unknown;
      podMetricsEndpoints: Array<Record<string, unknown>>;
    };
    // Knative labels every revision pod with its Service's name, and names the user container's port `user-port`.
    expect(spec.selector).toEqual({ matchLabels: { 'serving.knative.dev/service': ksvc.metadata.name } });
    expect(spec.namespaceSelector).toBeUndefined();
    expect(spec.podMetricsEndpoints).toHaveLength(1);
    expect(spec.podMetricsEndpoints[0]).toMatchObject({ port: 'user-port', path: METRICS_PATH });
  });

  it('a second PodMonitor scrapes the ApiServerSource adapter (labels and port as knative/eventing sets them on its Deployment)', () => {
    const source = objects.find((o) => o.kind === 'ApiServerSource')!;
    const monitor = ofKind('PodMonitor').find((m) => m.metadata.name === 'spark-exec-svc-adapter')!;
    expect(monitor.metadata.namespace).toBe(source.metadata.namespace);
    const spec = monitor.spec as {
      selector: { matchLabels?: Record<string, string> };
      namespaceSelector?: unknown;
      podMetricsEndpoints: Array<Record<string, unknown>>;
    };
    // pkg/reconciler/apiserversource/resources/labels.go: Labels(source.Name); receive_adapter.go: port "metrics" 9090.
    expect(spec.selector).toEqual({
      matchLabels: {
        'eventing.knative.dev/source': 'apiserver-source-controller',
        'eventing.knative.dev/sourceName': source.metadata.name,
      },
    });
    expect(spec.namespaceSelector).toBeUndefined();
    expect(spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
  });

  it('has the required alerts, each with a severity, a summary and a description without templates', () => {
    expect(groups.length).toBeGreaterThan(0);
    expect(
      alerts()
        .map((a) => a.alert)
        .sort(),
    ).toEqual([...REQUIRED_ALERTS].sort());
    for (const rule of alerts()) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.['severity']);
      expect(rule.annotations?.['summary'], rule.alert).toBeTruthy();
      expect(rule.annotations?.['description'], rule.alert).toBeTruthy();
      expect(rule.annotations?.['description'], `${rule.alert}: static (test/fixtures copies it)`).not.toMatch(/\{\{/);
      // The runbook: a section of docs/metrics.md named after the alert (GitHub's heading anchor),
      // under the documented default base until the user sets theirs (next test).
      expect(rule.annotations?.['runbook_url'], rule.alert).toBe(`${DEFAULT_RUNBOOK_BASE}#${String(rule.alert).toLowerCase()}`);
      expect(readFileSync(path.join(ROOT, 'docs/metrics.md'), 'utf8').split('\n'), rule.alert).toContain(`### ${rule.alert}`);
    }
  });

  it('runbook_url is absolute, from one line (RUNBOOK_BASE_URL in runbook.env), documented with its default', async () => {
    // The default documented in docs/metrics.md is an absolute URL, and it is what the overlay ships.
    const metricsDoc = readFileSync(path.join(ROOT, 'docs/metrics.md'), 'utf8');
    expect(metricsDoc).toContain(`RUNBOOK_BASE_URL=${DEFAULT_RUNBOOK_BASE}`);
    expect(new URL(DEFAULT_RUNBOOK_BASE).protocol).toBe('https:');
    // Set as docs/metrics.md says, the one line changes every alert's link and nothing else.
    const base = 'https://git.example.com/team/spark-exec-svc/blob/v1.2.3/docs/metrics.md';
    const tree = configuredTree();
    writeFileSync(path.join(tree, OVERLAY, 'runbook.env'), `RUNBOOK_BASE_URL=${base}\n`);
    const built = await kustomizeObjects<K8sObject>(requireKubectl(), OVERLAY, tree);
    const rules = ((built.find((o) => o.kind === 'PrometheusRule')?.spec['groups'] ?? []) as RuleGroup[]).flatMap((g) => g.rules);
    expect(rules.length).toBe(REQUIRED_ALERTS.length);
    for (const rule of rules) expect(rule.annotations?.['runbook_url'], rule.alert).toBe(`${base}#${String(rule.alert).toLowerCase()}`);
    const stripRunbooks = (objs: K8sObject[]) => JSON.stringify(objs).replaceAll(/"runbook_url":"[^"]*"/g, '');
    expect(stripRunbooks(built)).toBe(stripRunbooks(objects));
    rmSync(tree, { recursive: true, force: true });
  });

  it('every series the rules read is one the function exports (a renamed metric fails here)', async () => {
    const exported = new Set<string>();
    for (const metric of newMetrics().registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      exported.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name}${suffix}`);
    }
    const read = new Set(
      groups.flatMap((g) => g.rules).flatMap((r) => [...String(r.expr).matchAll(/\bspark_exec_svc_[a-z0-9_]+/g)].map((m) => m[0])),
    );
    expect(read.size).toBeGreaterThan(0);
    for (const name of read) expect(exported.has(name), name).toBe(true);
  });

  it('every alert has a test that fires it and a near miss that stays quiet', () => {
    const tests = promtoolTests(alerts()).tests;
    for (const name of REQUIRED_ALERTS) {
      const fires = tests.filter((t) => t.name.startsWith(`${name} fires`));
      const quiet = tests.filter((t) => t.name.startsWith(`${name} stays quiet`));
      expect(fires.length, `${name}: firing tests`).toBeGreaterThan(0);
      expect(quiet.length, `${name}: quiet tests`).toBeGreaterThan(0);
      for (const t of fires)
        expect(
          t.alert_rule_test?.some((c) => c.alertname === name && c.exp_alerts.length > 0),
          t.name,
        ).toBe(true);
      for (const t of quiet) {
        expect(t.input_series.length, `${t.name}: has series`).toBeGreaterThan(0);
        expect(t.alert_rule_test?.filter((c) => c.alertname === name).length, t.name).toBeGreaterThan(0);
        expect(
          t.alert_rule_test?.every((c) => c.alertname === name && c.exp_alerts.length === 0),
          t.name,
        ).toBe(true);
      }
    }
    for (const t of tests)
      for (const c of t.alert_rule_test ?? []) expect(REQUIRED_ALERTS, `${t.name}: ${c.alertname}`).toContain(c.alertname);
  });

  describe.skipIf(skipPromtool)('with the real promtool', () => {
    beforeAll(async () => {
      console.info(`[metrics-rules.test] ${await toolVersion(tools.require('promtool'))}`);
    });

    it('`promtool check rules` accepts the rules extracted from the PrometheusRule', async () => {
      writeFileSync(path.join(dir, 'rules.yaml'), dump({ groups }));
      const { code, output } = await runTool(tools.require('promtool'), ['check', 'rules', 'rules.yaml'], { cwd: dir });
      expect(output).toContain(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`);
      expect(code, output).toBe(0);
    });

    it('`promtool test rules`: every firing and quiet case passes', async () => {
      const { code, failing, output } = await testRules(groups, 'as-built');
      expect(failing, output).toEqual([]);
      expect(code, output).toBe(0);
      expect(output).toContain('SUCCESS');
    });

    it.each(REQUIRED_ALERTS)(
      '%s: its firing tests fail when it can never fire, its quiet tests when it always fires (mutation check)',
      async (name) => {
        const tests = promtoolTests(alerts()).tests;
        const fires = tests.filter((t) => t.name.startsWith(`${name} fires`)).map((t) => t.name);
        const quiet = tests.filter((t) => t.name.startsWith(`${name} stays quiet`)).map((t) => t.name);
        const never = await testRules(withExpr(name, 'vector(0) > 1'), `${name}-never`);
        expect(never.code, never.output).not.toBe(0);
        expect(never.failing.sort(), never.output).toEqual([...fires].sort());
        const always = await testRules(withExpr(name, 'vector(1)'), `${name}-always`);
        expect(always.code, always.output).not.toBe(0);
        for (const t of quiet) expect(always.failing, `${t}\n${always.output}`).toContain(t);
      },
    );
  });
});
