/**
 * Facts as the function remembers them for one executor of a realistic Spark application (names
 * as Spark 3.5/4.0 make them: `spark-<32 hex>` application ids, `<app>-<16 hex>-exec-<n>` pods,
 * 36-character UIDs): what the memory's sizes are measured with (bench section memory, and the
 * calibration test of shared/ops/bounded-lru.ts estimateBytes).
 */
import { createHash } from 'node:crypto';
import { desiredExecutorService, type ServiceFact, serviceFactFromCreated } from '../../shared/model/service-spec.ts';
import { Pod } from '../../shared/model/k8s-objects.ts';
import { type PodFact, podFact } from '../../shared/model/spark-pod.ts';

const hex = (seed: string, length: number): string => createHash('sha256').update(seed).digest('hex').slice(0, length);
const uuid = (seed: string): string => {
  const h = hex(seed, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
};

export interface ExecutorFacts {
  readonly namespace: string;
  readonly appId: string;
  readonly execId: string;
  readonly pod: PodFact;
  readonly service: ServiceFact;
  readonly claimants: readonly string[];
}

/** The i-th executor's facts (executors 1…executorsPerApp of application ⌊i / executorsPerApp⌋). */
export function executorFacts(i: number, executorsPerApp = 50, namespace = 'spark-jobs'): ExecutorFacts {
  const app = Math.floor(i / executorsPerApp);
  const appId = `spark-${hex(`app${app}`, 32)}`;
  const execId = String((i % executorsPerApp) + 1);
  const prefix = `nightly-sales-aggregation-${hex(`prefix${app}`, 16)}`;
  const name = `${prefix}-exec-${execId}`;
  const uid = uuid(`pod${i}`);
  const owner = { name: `${prefix}-driver`, uid: uuid(`driver${app}`) };
  const pod = Pod.parse({
    metadata: {
      name,
      namespace,
      uid,
      resourceVersion: String(100_000 + i),
      labels: { 'spark-role': 'executor', 'spark-app-selector': appId, 'spark-exec-id': execId, 'spark-exec-svc/enabled': 'true' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', controller: true, ...owner }],
    },
    status: { phase: 'Running', podIP: `10.244.${(i >> 8) & 255}.${i & 255}` },
  });
  const fact = podFact(pod, 7079);
  if (fact === undefined) throw new Error('sample pod is not a Spark pod');
  const identity = { appId, execId, executor: { name, uid }, owner };
  const body = desiredExecutorService(namespace, identity, 7079);
  const service = serviceFactFromCreated(body, uuid(`svc${i}`), String(200_000 + i), identity);
  return { namespace, appId, execId, pod: fact, service, claimants: [name] };
}
