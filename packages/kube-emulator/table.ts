/**
 * Server-side printing (meta.k8s.io Table) for kubectl's default output: the columns of
 * pkg/printers/internalversion for pods, services and namespaces, simplified cells.
 */
import { array, getPath, isRecord, type Obj, record, str } from './types.ts';

interface Column {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

const col = (name: string, description: string, priority = 0, format = ''): Column => ({
  name,
  type: 'string',
  format,
  description,
  priority,
});

const NAME = col('Name', 'Name must be unique within a namespace.', 0, 'name');
const AGE = col('Age', 'CreationTimestamp is a timestamp representing the server time when this object was created.');

const COLUMNS: Record<string, Column[]> = {
  pods: [
    NAME,
    col('Ready', 'The aggregate readiness state of this pod for accepting traffic.'),
    col('Status', 'The aggregate status of the containers in this pod.'),
    col(
      'Restarts',
      'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.',
    ),
    AGE,
    col('IP', 'podIP address allocated to the pod.', 1),
    col('Node', 'NodeName indicates in which node this pod is scheduled.', 1),
    col('Nominated Node', 'nominatedNodeName is set only when this pod preempts other pods on the node.', 1),
    col('Readiness Gates', 'If specified, all readiness gates will be evaluated for pod readiness.', 1),
  ],
  services: [
    NAME,
    col('Type', 'type determines how the Service is exposed.'),
    col('Cluster-IP', 'clusterIP is the IP address of the service.'),
    col('External-IP', 'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.'),
    col('Port(s)', 'The ports that are exposed by this service.'),
    AGE,
    col('Selector', 'Route service traffic to pods with label keys and values matching this selector.', 1),
  ],
  namespaces: [NAME, col('Status', 'The status of the namespace'), AGE],
};

/** k8s.io/apimachinery/pkg/util/duration.HumanDuration. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.floor(hours / 24) % 365;
    return dy === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}

function age(obj: Obj, now: Date): string {
  const ts = str(getPath(obj, 'metadata', 'creationTimestamp'));
  return ts === '' ? '<unknown>' : humanDuration(now.getTime() - Date.parse(ts));
}

function podCells(pod: Obj, now: Date): unknown[] {
  const statuses = array(getPath(pod, 'status', 'containerStatuses')).map(record);
  const total = array(getPath(pod, 'spec', 'containers')).length;
  const ready = statuses.filter((s) => s['ready'] === true).length;
  const restarts = statuses.reduce((n, s) => n + (typeof s['restartCount'] === 'number' ? s['restartCount'] : 0), 0);
  let reason = str(getPath(pod, 'status', 'reason')) || str(getPath(pod, 'status', 'phase'));
  for (const s of statuses) {
    const waiting = str(getPath(s, 'state', 'waiting', 'reason'));
    const terminated = str(getPath(s, 'state', 'terminated', 'reason'));
    if (waiting !== '') reason = waiting;
    else if (terminated !== '') reason = terminated;
  }
  if (getPath(pod, 'metadata', 'deletionTimestamp') !== undefined) reason = 'Terminating';
  const gates = array(getPath(pod, 'spec', 'readinessGates')).length;
  return [
    str(getPath(pod, 'metadata', 'name')),
    `${ready}/${total}`,
    reason,
    restarts,
    age(pod, now),
    str(getPath(pod, 'status', 'podIP')) || '<none>',
    str(getPath(pod, 'spec', 'nodeName')) || '<none>',
    str(getPath(pod, 'status', 'nominatedNodeName')) || '<none>',
    gates === 0 ? '<none>' : `0/${gates}`,
  ];
}

function serviceCells(svc: Obj, now: Date): unknown[] {
  const spec = record(svc['spec']);
  const type = str(spec['type']);
  const ports = array(spec['ports'])
    .filter(isRecord)
    .map((p) => {
      const node = typeof p['nodePort'] === 'number' && p['nodePort'] !== 0 ? `:${p['nodePort']}` : '';
      return `${String(p['port'])}${node}/${str(p['protocol'])}`;
    });
  const external = array(spec['externalIPs']).map(str);
  const lbIngress = array(getPath(svc, 'status', 'loadBalancer', 'ingress'))
    .filter(isRecord)
    .map((i) => str(i['ip']) || str(i['hostname']));
  let externalIP = external.length > 0 ? external.join(',') : '<none>';
  if (type === 'LoadBalancer') externalIP = [...lbIngress, ...external].join(',') || '<pending>';
  if (type === 'ExternalName') externalIP = str(spec['externalName']);
  const selector = Object.entries(record(spec['selector']))
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(',');
  return [
    str(getPath(svc, 'metadata', 'name')),
    type,
    str(spec['clusterIP']) || '<none>',
    externalIP,
    ports.length > 0 ? ports.join(',') : '<none>',
    age(svc, now),
    selector === '' ? '<none>' : selector,
  ];
}

function namespaceCells(ns: Obj, now: Date): unknown[] {
  return [str(getPath(ns, 'metadata', 'name')), str(getPath(ns, 'status', 'phase')), age(ns, now)];
}

const CELLS: Record<string, (obj: Obj, now: Date) => unknown[]> = {
  pods: podCells,
  services: serviceCells,
  namespaces: namespaceCells,
};

export type IncludeObject = 'None' | 'Metadata' | 'Object';

/** Accept: application/json;as=Table;v=v1;g=meta.k8s.io (or v1beta1). */
export function wantsTable(accept: string): 'v1' | 'v1beta1' | undefined {
  for (const part of accept.split(',')) {
    const params = part.split(';').map((s) => s.trim());
    if (!params.includes('as=Table') || !params.includes('g=meta.k8s.io')) continue;
    if (params.includes('v=v1')) return 'v1';
    if (params.includes('v=v1beta1')) return 'v1beta1';
  }
  return undefined;
}

export function toTable(
  resource: string,
  objects: readonly Obj[],
  listMeta: Obj,
  version: 'v1' | 'v1beta1',
  include: IncludeObject,
  now: Date,
): Obj {
  const cells = CELLS[resource] ?? ((o: Obj) => [str(getPath(o, 'metadata', 'name'))]);
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${version}`,
    metadata: listMeta,
    columnDefinitions: COLUMNS[resource] ?? [NAME],
    rows: objects.map((obj) => {
      const row: Obj = { cells: cells(obj, now) };
      if (include === 'Metadata') {
        row['object'] = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj['metadata'] };
      } else if (include === 'Object') row['object'] = obj;
      return row;
    }),
  };
}
