/**
 * The invariant of docs/reliability.md, written again from the specification (not from
 * shared/rules/decide.ts), for the adversarial reviews (review.test.ts, review-batch.test.ts):
 *
 *   for every live, opted-in executor pod (exists, phase not Succeeded/Failed; being deleted
 *   still counts) whose v1 Pod controller owner lives (that name and UID, not terminal), the
 *   Service executorServiceName(appId, execId) exists (once the pod runs: phase Running — issue 17), carries no spark-exec-svc/executor-gone-at,
 *   has exactly one ownerReference = that driver, selects exactly {spark-app-selector,
 *   spark-exec-id} of the executor, and its first port is the executor's block-manager port.
 */
import { executorServiceName } from '../../shared/model/naming.ts';
import type { KubeEmulator } from '../kube-emulator/index.ts';
import { NS } from '../reliability/support.ts';

export const GONE_AT = 'spark-exec-svc/executor-gone-at';
const ENABLED = 'spark-exec-svc/enabled';
const TERMINAL = new Set(['Succeeded', 'Failed']);
const SPARK_EXEC_ID = /^[1-9][0-9]*$/;

export interface PodObj {
  metadata: {
    name: string;
    uid: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
  };
  spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> };
  status?: { phase?: string };
}

export interface SvcObj {
  metadata: { name: string; uid: string; resourceVersion: string; labels?: Record<string, string>; annotations?: Record<string, string>; ownerReferences?: Array<Record<string, unknown>> };
  spec?: { selector?: Record<string, string>; ports?: Array<{ port?: number }> };
}

const optedIn = (pod: PodObj): boolean => pod.metadata.labels?.[ENABLED] === 'true' || pod.metadata.annotations?.[ENABLED] === 'true';
const lives = (pod: PodObj | undefined, uid?: string): pod is PodObj => pod !== undefined && (uid === undefined || pod.metadata.uid === uid) && !TERMINAL.has(pod.status?.phase ?? '');

function portOf(pod: PodObj, fallback: number | undefined): number | undefined {
  const annotated = pod.metadata.annotations?.['spark-exec-svc/block-manager-port'];
  if (annotated !== undefined) return Number(annotated);
  for (const c of pod.spec?.containers ?? []) {
    for (const e of c.env ?? []) {
      const m = /^SPARK_JAVA_OPT_\d+$/.test(e.name) ? /-Dspark\.blockManager\.port=(\d+)/.exec(e.value ?? '') : null;
      if (m !== null && Number(m[1]) !== 0) return Number(m[1]);
    }
  }
  return fallback;
}

/** Violations of the invariant for the pods named in `genuine` (or every live executor when a slot has one claimant). */
export function invariantProblems(emulator: KubeEmulator, defaultPort: number | undefined, genuine: ReadonlySet<string>, cap?: number): string[] {
  const pods = emulator.listObjects('pods', NS) as unknown as PodObj[];
  const byName = new Map(pods.map((p) => [p.metadata.name, p]));
  const claims = new Map<string, Array<{ pod: string; problems: string[] }>>();
  const ours = emulator.listObjects('services', NS, 'app.kubernetes.io/managed-by=spark-exec-svc').length;
  for (const pod of pods) {
    const labels = pod.metadata.labels ?? {};
    const appId = labels['spark-app-selector'];
    const execId = labels['spark-exec-id'];
    if (labels['spark-role'] !== 'executor' || !appId || execId === undefined || !SPARK_EXEC_ID.test(execId) || !lives(pod)) continue;
    const owner = (pod.metadata.ownerReferences ?? []).find((r) => r.controller === true && r.kind === 'Pod' && r.apiVersion === 'v1');
    if (owner === undefined || !lives(byName.get(owner.name), owner.uid)) continue;
    if (!optedIn(pod) && !optedIn(byName.get(owner.name)!)) continue;
    const port = portOf(pod, defaultPort);
    if (port === undefined) continue;
    const name = executorServiceName(appId, execId);
    const svc = emulator.getObject('services', NS, name) as unknown as SvcObj | undefined;
    const problems: string[] = [];
    if (svc === undefined) {
      // The Service must exist once the executor runs (issue 17: a Pending pod claims no slot).
      if ((cap === undefined || ours < cap) && pod.status?.phase === 'Running') problems.push('missing');
    } else {
      if (svc.metadata.annotations?.[GONE_AT] !== undefined) problems.push(`marked gone (${svc.metadata.annotations[GONE_AT]})`);
      const owners = svc.metadata.ownerReferences ?? [];
      if (owners.length !== 1 || owners[0]!['name'] !== owner.name || owners[0]!['uid'] !== owner.uid) problems.push(`owners ${JSON.stringify(owners)}`);
      const sel = svc.spec?.selector ?? {};
      if (Object.keys(sel).length !== 2 || sel['spark-app-selector'] !== appId || sel['spark-exec-id'] !== execId) problems.push(`selector ${JSON.stringify(sel)}`);
      if (svc.spec?.ports?.[0]?.port !== port) problems.push(`port ${svc.spec?.ports?.[0]?.port}, the executor listens on ${port}`);
    }
    claims.set(name, [...(claims.get(name) ?? []), { pod: pod.metadata.name, problems }]);
  }
  const out: string[] = [];
  for (const [name, verdicts] of claims) {
    const mine = verdicts.filter((v) => genuine.has(v.pod));
    const mustHold = mine.length > 0 ? mine : verdicts.length === 1 ? verdicts : [];
    for (const v of mustHold) out.push(...v.problems.map((p) => `Service ${name} of live executor ${v.pod}: ${p}`));
  }
  return out;
}
