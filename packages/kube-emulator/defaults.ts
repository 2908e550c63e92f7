/**
 * Defaulting the apiserver applies before validation (SetDefaults_* in pkg/apis/core/v1
 * plus the admission plugins every cluster runs: ServiceAccount, DefaultTolerationSeconds,
 * Priority). Only what a Pod/Service round trip visibly carries; see README for the rest.
 */
import { array, getPath, isRecord, type Obj, record, str } from './types.ts';

function ensureRecord(parent: Obj, key: string): Obj {
  const value = parent[key];
  if (isRecord(value)) return value;
  const fresh: Obj = {};
  parent[key] = fresh;
  return fresh;
}

function setDefault(obj: Obj, key: string, value: unknown): void {
  if (obj[key] === undefined || obj[key] === '') obj[key] = value;
}

// ---- Service ------------------------------------------------------------------------------

/** apiservice.ExternallyAccessible: only these may carry an externalTrafficPolicy. */
export function externallyAccessible(spec: Obj): boolean {
  const type = spec['type'];
  return type === 'NodePort' || type === 'LoadBalancer' || (type === 'ClusterIP' && array(spec['externalIPs']).length > 0);
}

export function defaultService(svc: Obj): void {
  const spec = ensureRecord(svc, 'spec');
  setDefault(spec, 'type', 'ClusterIP');
  setDefault(spec, 'sessionAffinity', 'None');
  if (spec['sessionAffinity'] === 'ClientIP' && spec['sessionAffinityConfig'] === undefined) {
    spec['sessionAffinityConfig'] = { clientIP: { timeoutSeconds: 10800 } };
  }
  for (const raw of array(spec['ports'])) {
    if (!isRecord(raw)) continue;
    setDefault(raw, 'protocol', 'TCP');
    // targetPort 0 or "" means "same as port".
    if (raw['targetPort'] === undefined || raw['targetPort'] === 0 || raw['targetPort'] === '') raw['targetPort'] = raw['port'];
  }
  const type = spec['type'];
  if (externallyAccessible(spec)) setDefault(spec, 'externalTrafficPolicy', 'Cluster');
  if (type === 'LoadBalancer' && spec['allocateLoadBalancerNodePorts'] === undefined) spec['allocateLoadBalancerNodePorts'] = true;
  if (type !== 'ExternalName') setDefault(spec, 'internalTrafficPolicy', 'Cluster');
  // normalizeClusterIPs: singular and plural stay in step.
  const clusterIP = str(spec['clusterIP']);
  const clusterIPs = array(spec['clusterIPs']).map(str);
  if (clusterIP === '' && clusterIPs.length > 0) spec['clusterIP'] = clusterIPs[0];
  if (clusterIP !== '' && clusterIPs.length === 0) spec['clusterIPs'] = [clusterIP];
  if (!isRecord(svc['status'])) svc['status'] = { loadBalancer: {} };
}

// ---- Pod ----------------------------------------------------------------------------------

const DEFAULT_TOLERATIONS = ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable'];

function imagePullPolicyFor(image: string): string {
  if (image.includes('@')) return 'IfNotPresent';
  const lastSlash = image.lastIndexOf('/');
  const lastColon = image.lastIndexOf(':');
  const tag = lastColon > lastSlash ? image.slice(lastColon + 1) : '';
  return tag === '' || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

function defaultContainer(c: Obj): void {
  setDefault(c, 'terminationMessagePath', '/dev/termination-log');
  setDefault(c, 'terminationMessagePolicy', 'File');
  setDefault(c, 'imagePullPolicy', imagePullPolicyFor(str(c['image'])));
  const resources = ensureRecord(c, 'resources');
  // Requests default to limits (SetDefaults_Pod).
  if (isRecord(resources['limits'])) {
    const requests = ensureRecord(resources, 'requests');
    for (const [k, v] of Object.entries(resources['limits'])) if (requests[k] === undefined) requests[k] = v;
  }
  for (const port of array(c['ports'])) if (isRecord(port)) setDefault(port, 'protocol', 'TCP');
}

/** SetDefaults_Pod and friends: applied to every decoded Pod (create and update). */
export function defaultPod(pod: Obj): void {
  const spec = ensureRecord(pod, 'spec');
  for (const key of ['initContainers', 'containers']) for (const c of array(spec[key])) if (isRecord(c)) defaultContainer(c);
  setDefault(spec, 'restartPolicy', 'Always');
  if (spec['terminationGracePeriodSeconds'] === undefined) spec['terminationGracePeriodSeconds'] = 30;
  setDefault(spec, 'dnsPolicy', 'ClusterFirst');
  if (spec['securityContext'] === undefined) spec['securityContext'] = {};
  setDefault(spec, 'schedulerName', 'default-scheduler');
  if (spec['enableServiceLinks'] === undefined) spec['enableServiceLinks'] = true;
  // The deprecated serviceAccount mirrors serviceAccountName.
  if (str(spec['serviceAccountName']) === '' && str(spec['serviceAccount']) !== '') spec['serviceAccountName'] = spec['serviceAccount'];
  if (str(spec['serviceAccountName']) !== '') spec['serviceAccount'] = spec['serviceAccountName'];
}

/** The mutating admission plugins every cluster runs, which act on create only. */
export function admitPodCreate(pod: Obj): void {
  const spec = ensureRecord(pod, 'spec');
  // ServiceAccount admission (without the token volume, see README).
  if (str(spec['serviceAccountName']) === '') {
    spec['serviceAccountName'] = 'default';
    spec['serviceAccount'] = 'default';
  }
  // Priority admission with no PriorityClass.
  if (spec['priority'] === undefined) spec['priority'] = 0;
  if (spec['preemptionPolicy'] === undefined) spec['preemptionPolicy'] = 'PreemptLowerPriority';
  // DefaultTolerationSeconds admission.
  const tolerations = array(spec['tolerations']).slice();
  for (const key of DEFAULT_TOLERATIONS) {
    const covered = tolerations.some(
      (t) =>
        isRecord(t) &&
        (t['effect'] === 'NoExecute' || t['effect'] === undefined || t['effect'] === '') &&
        (t['key'] === key || ((t['key'] === undefined || t['key'] === '') && t['operator'] === 'Exists')),
    );
    if (!covered) tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
  }
  spec['tolerations'] = tolerations;
}

/** Kubelet-independent part of the status the apiserver writes on create. */
export function qosClass(pod: Obj): 'BestEffort' | 'Burstable' | 'Guaranteed' {
  const containers = [...array(getPath(pod, 'spec', 'initContainers')), ...array(getPath(pod, 'spec', 'containers'))].map(record);
  let any = false;
  let guaranteed = containers.length > 0;
  for (const c of containers) {
    const requests = record(getPath(c, 'resources', 'requests'));
    const limits = record(getPath(c, 'resources', 'limits'));
    for (const res of ['cpu', 'memory']) {
      if (requests[res] !== undefined || limits[res] !== undefined) any = true;
      if (limits[res] === undefined || (requests[res] !== undefined && String(requests[res]) !== String(limits[res]))) guaranteed = false;
    }
  }
  if (!any) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}
