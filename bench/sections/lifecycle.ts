/**
 * Section 2: API calls per executor lifecycle, counted by the emulator per verb, step by step:
 * driver add → executor add → 3 updates that change nothing → 1 update that changes only
 * status and an unrelated annotation → executor delete → driver delete. The floor is one
 * create for the whole lifecycle (Kubernetes garbage collection removes the Service with its
 * driver). Updates that change nothing must cost zero calls: asserted, the bench fails if not.
 */
import { join } from 'node:path';
import { EventPoster, type PodBody, type PreparedEvent, appDriver, appExecutors, podEvent, podRefEvent } from '../lib/load.ts';
import { REPO_ROOT, startEmulatorProcess, startFunctionProcess } from '../lib/procs.ts';

export type Scenario = 'resource, opt-in on executor' | 'resource, opt-in on driver only' | 'reference mode';

export interface StepResult {
  readonly step: string;
  readonly reply: string;
  /** API requests by verb (get, list, create, patch, delete). */
  readonly calls: Record<string, number>;
  readonly total: number;
  readonly minimum: number;
  /** Must be zero (asserted). */
  readonly mustBeZero: boolean;
}

export interface ScenarioResult {
  readonly scenario: Scenario;
  readonly steps: readonly StepResult[];
  readonly total: number;
  readonly minimum: number;
}

export interface LifecycleResult {
  readonly scenarios: readonly ScenarioResult[];
  readonly failures: readonly string[];
}

const NAMESPACE = 'bench';

export async function runLifecycle(options: { entry: string; log: (line: string) => void }): Promise<LifecycleResult> {
  const emulator = await startEmulatorProcess();
  const failures: string[] = [];
  const scenarios: ScenarioResult[] = [];
  try {
    const fn = await startFunctionProcess({ entry: options.entry, kubeconfig: emulator.kubeconfig, logFile: join(REPO_ROOT, '.bench-results', 'function-lifecycle.log') });
    const poster = new EventPoster(fn.url, 1);
    try {
      const plan: ReadonlyArray<{ scenario: Scenario; executorOptIn: boolean; ref: boolean }> = [
        { scenario: 'resource, opt-in on executor', executorOptIn: true, ref: false },
        { scenario: 'resource, opt-in on driver only', executorOptIn: false, ref: false },
        { scenario: 'reference mode', executorOptIn: true, ref: true },
      ];
      let seed = 100;
      for (const { scenario, executorOptIn, ref } of plan) {
        const [driver] = await emulator.seed([appDriver(NAMESPACE, seed++)]);
        const [executor] = await emulator.seed(appExecutors(driver!, 1, { optIn: executorOptIn }));
        const ev = (verb: 'add' | 'update' | 'delete', pod: PodBody): PreparedEvent =>
          ref ? podRefEvent(verb, pod.metadata.namespace, pod.metadata.name) : podEvent(verb, pod);
        const steps: StepResult[] = [];
        const step = async (name: string, event: PreparedEvent, minimum: number, mustBeZero: boolean, before?: () => Promise<unknown>): Promise<void> => {
          if (before !== undefined) await before();
          await emulator.reset();
          const answer = await poster.post(event);
          const counts = await emulator.countByVerb();
          const calls = Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0));
          const total = Object.values(calls).reduce((a, b) => a + b, 0);
          const reply = answer.status === 200 ? (answer.type ?? '?').replace(/^spark-exec-svc\./, '') : `HTTP ${answer.status}`;
          steps.push({ step: name, reply, calls, total, minimum, mustBeZero });
          if (answer.status !== 200) failures.push(`lifecycle [${scenario}] ${name}: answered ${answer.status} ${answer.body.slice(0, 200)}`);
          if (mustBeZero && total !== 0) {
            failures.push(`lifecycle [${scenario}] ${name}: an update that changes nothing cost ${total} API call(s) ${JSON.stringify(calls)} — must be 0`);
          }
        };
        const unchanged = !ref; // Reference mode must read the pod to know that nothing changed.
        await step('driver add', ev('add', driver!), 0, false);
        await step('executor add', ev('add', executor!), 1, false);
        // What an ApiServerSource delivers for an update: the new object; nothing we read changed.
        const rv0 = Number((executor!.metadata as { resourceVersion?: string }).resourceVersion ?? '1');
        const resourceVersion = (n: number): PodBody => ({ ...executor!, metadata: { ...executor!.metadata, resourceVersion: String(rv0 + n) } as PodBody['metadata'] });
        for (let i = 1; i <= 3; i++) await step(`executor update ${i}/3 (nothing changed)`, ev('update', resourceVersion(i)), 0, unchanged);
        const irrelevant: PodBody = {
          ...executor!,
          metadata: { ...executor!.metadata, resourceVersion: String(rv0 + 4), annotations: { ...executor!.metadata.annotations, 'example.com/last-heartbeat': new Date().toISOString() } } as PodBody['metadata'],
          status: { ...executor!.status, phase: 'Running', podIP: '10.244.1.8' },
        };
        await step('executor update (status + unrelated annotation)', ev('update', irrelevant), 0, unchanged, () =>
          emulator.call({ op: 'patch', resource: 'pods', namespace: NAMESPACE, name: executor!.metadata.name, patch: { metadata: { annotations: irrelevant.metadata.annotations }, status: irrelevant.status } }),
        );
        await step('executor delete', ev('delete', executor!), 0, false, () => emulator.call({ op: 'delete', resource: 'pods', namespace: NAMESPACE, name: executor!.metadata.name }));
        await step('driver delete', ev('delete', driver!), 0, false, () => emulator.call({ op: 'delete', resource: 'pods', namespace: NAMESPACE, name: driver!.metadata.name }));
        const left = await emulator.countObjects('services', NAMESPACE, `spark-app-selector=${driver!.metadata.labels['spark-app-selector']}`);
        if (left !== 0) failures.push(`lifecycle [${scenario}]: ${left} Service(s) left after the driver was deleted`);
        const created = steps.find((s) => s.step === 'executor add');
        if (created?.reply !== 'service.created') failures.push(`lifecycle [${scenario}]: executor add answered ${created?.reply}, expected service.created`);
        scenarios.push({ scenario, steps, total: steps.reduce((a, s) => a + s.total, 0), minimum: steps.reduce((a, s) => a + s.minimum, 0) });
        options.log(`  lifecycle [${scenario}]: ${steps.map((s) => s.total).join(' + ')} = ${steps.reduce((a, s) => a + s.total, 0)} API calls`);
      }
    } finally {
      poster.close();
      await fn.stop();
    }
  } finally {
    await emulator.stop();
  }
  return { scenarios, failures };
}
