/**
 * `metadata.managedFields` as a real API server keeps them on a Spark pod, so that an event's body
 * is the whole object the ApiServerSource adapter sends (it marshals the unstructured object the
 * watch gave it, managedFields included: knative/eventing v0.48.2 pkg/adapter/apiserver/events).
 * The kube-emulator stores none (packages/kube-emulator/registry.ts drops them on every write), so
 * the bench adds them to the bodies it sends: 6–9 KB per event instead of 4–5 KB.
 *
 * Modelled: one entry per manager that wrote the pod, as structured-merge-diff records them
 * (k8s.io/apiserver fieldmanager, FieldsV1: "f:<field>" for a field, "k:{…}" for a list item by
 * its merge key, "." for the item itself; atomic lists as one leaf):
 *   the creator (Spark's driver through the fabric8 client: Update, metadata + spec, at creation),
 *   kube-scheduler (Update of the status subresource: the PodScheduled condition),
 *   kubelet (Update of status: the other conditions, containerStatuses, IPs, phase, startTime).
 * Not modelled: the exact manager names of a given Spark/kubelet build and the order of keys
 * within the sets (Go's JSON sorts them: goJson does too), which change no size by more than a few
 * bytes.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type FieldSet = { [key: string]: FieldSet };

/** Merge keys of the pod's associative lists (k8s.io/api core/v1 patchMergeKey / listMapKeys). */
const MERGE_KEYS: Readonly<Record<string, readonly string[]>> = {
  containers: ['name'],
  initContainers: ['name'],
  env: ['name'],
  ports: ['containerPort', 'protocol'],
  volumeMounts: ['mountPath'],
  volumes: ['name'],
  conditions: ['type'],
  ownerReferences: ['uid'],
  podIPs: ['ip'],
  hostIPs: ['ip'],
  containerStatuses: [],
};

/** The field set a manager owns for `value` under `field` (scalars and atomic lists are leaves). */
function fieldsOf(value: Json, field: string): FieldSet {
  if (Array.isArray(value)) {
    const keys = MERGE_KEYS[field];
    if (keys === undefined || keys.length === 0 || !value.every((v) => v !== null && typeof v === 'object' && !Array.isArray(v))) return {};
    const set: FieldSet = {};
    for (const item of value as Array<{ [key: string]: Json }>) {
      const key = Object.fromEntries(keys.filter((k) => item[k] !== undefined).map((k) => [k, item[k]!]));
      set[`k:${JSON.stringify(key)}`] = { '.': {}, ...objectFields(item) };
    }
    return set;
  }
  if (value !== null && typeof value === 'object') return objectFields(value);
  return {};
}

function objectFields(object: { [key: string]: Json }): FieldSet {
  const set: FieldSet = {};
  for (const [k, v] of Object.entries(object)) set[`f:${k}`] = fieldsOf(v, k);
  return set;
}

interface PodLike {
  readonly metadata: { readonly creationTimestamp?: string; readonly [key: string]: unknown };
  readonly spec?: unknown;
  readonly status?: unknown;
}

const entry = (manager: string, operation: string, time: string, fieldsV1: FieldSet, subresource?: string) => ({
  apiVersion: 'v1',
  fieldsType: 'FieldsV1',
  fieldsV1,
  manager,
  operation,
  ...(subresource === undefined ? {} : { subresource }),
  time,
});

/** The pod as the watch shows it on a real API server: with the managedFields of its writers so far. */
export function withManagedFields<P extends PodLike>(pod: P): P {
  const meta = pod.metadata as { [key: string]: Json };
  const created = String(meta['creationTimestamp'] ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'));
  const owned: { [key: string]: Json } = {};
  for (const k of ['labels', 'annotations', 'ownerReferences', 'finalizers'] as const) if (meta[k] !== undefined) owned[k] = meta[k]!;
  const entries: object[] = [
    entry('fabric8-kubernetes-client', 'Update', created, {
      'f:metadata': objectFields(owned),
      'f:spec': fieldsOf(pod.spec as Json, 'spec'),
    }),
  ];
  const status = (pod.status ?? {}) as { conditions?: Array<{ [key: string]: Json }>; [key: string]: Json | undefined };
  const conditions = status.conditions ?? [];
  const scheduled = conditions.filter((c) => c['type'] === 'PodScheduled');
  if (scheduled.length > 0)
    entries.push(
      entry(
        'kube-scheduler',
        'Update',
        String(scheduled[0]!['lastTransitionTime'] ?? created),
        { 'f:status': { 'f:conditions': fieldsOf(scheduled, 'conditions') } },
        'status',
      ),
    );
  const { conditions: _, phase: __, ...rest } = status;
  const kubeletConditions = conditions.filter((c) => c['type'] !== 'PodScheduled');
  const kubeletStatus: { [key: string]: Json } = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as {
    [key: string]: Json;
  };
  if (kubeletConditions.length > 0) kubeletStatus['conditions'] = kubeletConditions;
  if (Object.keys(kubeletStatus).length > 0) {
    if (status['phase'] !== undefined) kubeletStatus['phase'] = status['phase'];
    const times = kubeletConditions.map((c) => String(c['lastTransitionTime'] ?? '')).filter((t) => t !== '');
    entries.push(entry('kubelet', 'Update', times.sort().at(-1) ?? created, { 'f:status': objectFields(kubeletStatus) }, 'status'));
  }
  return { ...pod, metadata: { ...pod.metadata, managedFields: entries } };
}
