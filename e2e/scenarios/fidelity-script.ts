/**
 * Issue 16 scenario 5, "Emulator fidelity": the request sequence sent unchanged to the emulator
 * (packages/kube-emulator) and to the harness's real kube-apiserver, the projection of each answer
 * onto the fields our code reads, and the differences the emulator keeps on purpose (each with why
 * it does not matter for us; packages/kube-emulator/README.md, "Differences from a real API server").
 */

/** What one side remembers between steps: uids and resourceVersions of the objects it made, continue tokens. */
export interface SideContext {
  readonly uid: Map<string, string>;
  readonly rv: Map<string, string>;
  continueToken: string;
}

export interface Step {
  readonly name: string;
  readonly method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  readonly path: string | ((ctx: SideContext) => string);
  readonly body?: unknown | ((ctx: SideContext) => unknown);
  readonly contentType?: string;
  /** The real GC is asynchronous (the emulator's synchronous): repeat this step until it holds, bounded. */
  readonly until?: (answer: Answer) => boolean;
}

export interface Answer {
  readonly status: number;
  readonly body: unknown;
}

export const NS = 'fidelity';
const pods = `/api/v1/namespaces/${NS}/pods`;
const services = `/api/v1/namespaces/${NS}/services`;
const merge = 'application/merge-patch+json';
const strategic = 'application/strategic-merge-patch+json';
const jsonPatch = 'application/json-patch+json';

/**
 * Pods with no spec.nodeName: the harness runs without nodes, so they stay unscheduled and Pending,
 * and a real DELETE removes them at once (pkg/registry/core/pod/strategy.go CheckGracefulDelete:
 * grace 0 for an unscheduled pod). A pod bound to a missing node would be deleted by the
 * pod-garbage-collector within the run, and a bound one is deleted gracefully (README: the
 * emulator deletes pods immediately).
 */
function pod(name: string, labels: Record<string, string>, extra: Record<string, unknown> = {}): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels, ...extra },
    spec: { containers: [{ name: 'spark', image: 'spark:3.5.1', ports: [{ containerPort: 7079 }] }] },
  };
}

function service(
  name: string,
  ownerPod: string | undefined,
  ctx: SideContext,
  ports: unknown[] = [{ name: 'blockmanager', port: 7079 }],
): unknown {
  const ownerReferences =
    ownerPod === undefined
      ? undefined
      : [{ apiVersion: 'v1', kind: 'Pod', name: ownerPod, uid: ctx.uid.get(ownerPod) ?? 'missing', controller: true }];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { 'spark-app-selector': 'app-1', 'spark-exec-id': '1' }, ...(ownerReferences ? { ownerReferences } : {}) },
    spec: { selector: { 'spark-exec-id': '1' }, ports },
  };
}

const deleteOptions = (extra: Record<string, unknown>): unknown => ({ apiVersion: 'v1', kind: 'DeleteOptions', ...extra });
const gone = (a: Answer): boolean => a.status === 404;

export const SCRIPT: readonly Step[] = [
  // create, AlreadyExists, validation
  { name: 'create driver pod', method: 'POST', path: pods, body: pod('drv', { 'spark-role': 'driver', 'spark-app-selector': 'app-1' }) },
  {
    name: 'create exec-1 pod',
    method: 'POST',
    path: pods,
    body: pod('exec-1', { 'spark-role': 'executor', 'spark-app-selector': 'app-1', 'spark-exec-id': '1' }),
  },
  {
    name: 'create exec-2 pod',
    method: 'POST',
    path: pods,
    body: pod('exec-2', { 'spark-role': 'executor', 'spark-app-selector': 'app-1', 'spark-exec-id': '2' }),
  },
  {
    name: 'create exec-3 pod (other app)',
    method: 'POST',
    path: pods,
    body: pod('exec-3', { 'spark-role': 'executor', 'spark-app-selector': 'app-2' }),
  },
  { name: 'create pod again: 409 AlreadyExists', method: 'POST', path: pods, body: pod('drv', {}) },
  { name: 'create pod with bad name: 422', method: 'POST', path: pods, body: pod('Bad_Name', {}) },
  { name: 'create pod with bad label value: 422', method: 'POST', path: pods, body: pod('badlabel', { app: 'not ok!' }) },
  {
    name: 'create service without ports: 422',
    method: 'POST',
    path: services,
    body: (c: SideContext) => service('noports', undefined, c, []),
  },
  {
    name: 'create service with bad port name: 422',
    method: 'POST',
    path: services,
    body: (c: SideContext) => service('badport', undefined, c, [{ name: 'Block_M', port: 7079 }]),
  },
  {
    name: 'create service owned by exec-1 (defaults, clusterIP)',
    method: 'POST',
    path: services,
    body: (c: SideContext) => service('exec-1-svc', 'exec-1', c),
  },
  { name: 'create service owned by exec-2', method: 'POST', path: services, body: (c: SideContext) => service('exec-2-svc', 'exec-2', c) },
  { name: 'create service owned by exec-3', method: 'POST', path: services, body: (c: SideContext) => service('exec-3-svc', 'exec-3', c) },
  { name: 'create service owned by drv', method: 'POST', path: services, body: (c: SideContext) => service('drv-svc', 'drv', c) },
  { name: 'create service again: 409', method: 'POST', path: services, body: (c: SideContext) => service('exec-1-svc', undefined, c) },
  // get, 404
  { name: 'get pod', method: 'GET', path: `${pods}/exec-1` },
  { name: 'get service', method: 'GET', path: `${services}/exec-1-svc` },
  { name: 'get missing pod: 404', method: 'GET', path: `${pods}/nope` },
  { name: 'get missing service: 404', method: 'GET', path: `${services}/nope` },
  // list with selectors
  { name: 'list pods =', method: 'GET', path: `${pods}?labelSelector=${encodeURIComponent('spark-role=executor')}` },
  {
    name: 'list pods ==, !=',
    method: 'GET',
    path: `${pods}?labelSelector=${encodeURIComponent('spark-role==executor,spark-app-selector!=app-2')}`,
  },
  { name: 'list pods in', method: 'GET', path: `${pods}?labelSelector=${encodeURIComponent('spark-exec-id in (1,2)')}` },
  { name: 'list pods notin', method: 'GET', path: `${pods}?labelSelector=${encodeURIComponent('spark-exec-id notin (1)')}` },
  { name: 'list pods exists', method: 'GET', path: `${pods}?labelSelector=spark-exec-id` },
  { name: 'list pods !exists', method: 'GET', path: `${pods}?labelSelector=${encodeURIComponent('!spark-exec-id')}` },
  { name: 'list pods bad selector: 400', method: 'GET', path: `${pods}?labelSelector=${encodeURIComponent('a in b')}` },
  {
    name: 'list services by selector',
    method: 'GET',
    path: `${services}?labelSelector=${encodeURIComponent('spark-app-selector=app-1,spark-exec-id=1')}`,
  },
  {
    name: 'list pods all namespaces by selector',
    method: 'GET',
    path: `/api/v1/pods?labelSelector=${encodeURIComponent('spark-app-selector=app-1')}`,
  },
  // pagination
  { name: 'list pods limit=2', method: 'GET', path: `${pods}?limit=2` },
  { name: 'list pods continue', method: 'GET', path: (c) => `${pods}?limit=2&continue=${encodeURIComponent(c.continueToken)}` },
  { name: 'list pods invalid continue: 400', method: 'GET', path: `${pods}?limit=2&continue=garbage` },
  // patches
  {
    name: 'merge patch labels',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: { metadata: { labels: { extra: 'x' } } },
    contentType: merge,
  },
  {
    name: 'merge patch with current resourceVersion',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: (c: SideContext) => ({ metadata: { resourceVersion: c.rv.get('exec-2'), labels: { extra: 'y' } } }),
    contentType: merge,
  },
  {
    name: 'merge patch with stale resourceVersion: 409',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: { metadata: { resourceVersion: '1', labels: { extra: 'z' } } },
    contentType: merge,
  },
  {
    name: 'merge patch bad label value: 422',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: { metadata: { labels: { extra: 'bad value' } } },
    contentType: merge,
  },
  {
    name: 'merge patch missing pod: 404',
    method: 'PATCH',
    path: `${pods}/nope`,
    body: { metadata: { labels: { a: 'b' } } },
    contentType: merge,
  },
  {
    name: 'strategic patch annotations',
    method: 'PATCH',
    path: `${services}/exec-2-svc`,
    body: { metadata: { annotations: { 'spark-exec-svc/state': 'ok' } } },
    contentType: strategic,
  },
  {
    name: 'json patch label',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: [{ op: 'add', path: '/metadata/labels/jp', value: 'v' }],
    contentType: jsonPatch,
  },
  {
    name: 'json patch failed test: 422',
    method: 'PATCH',
    path: `${pods}/exec-2`,
    body: [{ op: 'test', path: '/metadata/labels/jp', value: 'other' }],
    contentType: jsonPatch,
  },
  // pod status subresource
  {
    name: 'patch pod status Running',
    method: 'PATCH',
    path: `${pods}/exec-1/status`,
    body: {
      status: { phase: 'Running', podIP: '10.244.0.9', podIPs: [{ ip: '10.244.0.9' }], conditions: [{ type: 'Ready', status: 'True' }] },
    },
    contentType: merge,
  },
  {
    name: 'status patch does not change labels',
    method: 'PATCH',
    path: `${pods}/exec-1/status`,
    body: { metadata: { labels: { sneaky: 'x' } } },
    contentType: merge,
  },
  { name: 'get pod after status', method: 'GET', path: `${pods}/exec-1` },
  // delete with preconditions
  {
    name: 'delete with wrong uid precondition: 409',
    method: 'DELETE',
    path: `${pods}/exec-3`,
    body: deleteOptions({ preconditions: { uid: '00000000-0000-0000-0000-000000000000' } }),
  },
  {
    name: 'delete with stale resourceVersion precondition: 409',
    method: 'DELETE',
    path: `${pods}/exec-3`,
    body: deleteOptions({ preconditions: { resourceVersion: '1' } }),
  },
  // The real scheduler's PodScheduled=False write bumped exec-3's resourceVersion: read the current one.
  { name: 'get exec-3 before deleting it', method: 'GET', path: `${pods}/exec-3` },
  {
    name: 'delete with matching preconditions (background)',
    method: 'DELETE',
    path: `${pods}/exec-3`,
    body: (c: SideContext) => deleteOptions({ preconditions: { uid: c.uid.get('exec-3'), resourceVersion: c.rv.get('exec-3') } }),
  },
  { name: 'dependent of exec-3 collected (eventually)', method: 'GET', path: `${services}/exec-3-svc`, until: gone },
  { name: 'delete missing pod: 404', method: 'DELETE', path: `${pods}/exec-3` },
  // garbage collection: orphan, foreground
  { name: 'delete exec-2 orphan', method: 'DELETE', path: `${pods}/exec-2`, body: deleteOptions({ propagationPolicy: 'Orphan' }) },
  { name: 'exec-2 gone (eventually)', method: 'GET', path: `${pods}/exec-2`, until: gone },
  {
    name: 'orphaned service kept, owner reference removed (eventually)',
    method: 'GET',
    path: `${services}/exec-2-svc`,
    until: (a) =>
      a.status === 200 && ((a.body as { metadata?: { ownerReferences?: unknown[] } }).metadata?.ownerReferences ?? []).length === 0,
  },
  { name: 'delete drv foreground', method: 'DELETE', path: `${pods}/drv`, body: deleteOptions({ propagationPolicy: 'Foreground' }) },
  { name: 'drv gone (eventually)', method: 'GET', path: `${pods}/drv`, until: gone },
  { name: 'drv dependent gone (eventually)', method: 'GET', path: `${services}/drv-svc`, until: gone },
  { name: 'delete service', method: 'DELETE', path: `${services}/exec-2-svc` },
  // watch (bounded by timeoutSeconds)
  { name: 'watch pods', method: 'GET', path: `${pods}?watch=true&timeoutSeconds=1` },
  // TokenReview of a token neither side issued
  {
    name: 'TokenReview of a foreign token',
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/tokenreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'not-a-token' } },
  },
];

/** The differences the emulator keeps on purpose, by step name, each with why it does not matter for us. */
export const DOCUMENTED: ReadonlyMap<string, string> = new Map([
  [
    'list pods invalid continue: 400',
    'Same 400 BadRequest and message prefix "invalid continue token: continue key is not valid: "; the tail is the JSON decoder\'s own error (Go encoding/json vs JavaScript JSON.parse). We never send a token we did not get, and read only the code.',
  ],
  [
    'merge patch bad label value: 422',
    'Same 422 Invalid, message and first cause; a real pod update lists the metadata.labels cause 4 times (object-meta validation runs in several of the update validators), the emulator once. Nothing of ours reads details.causes.',
  ],
  [
    'delete exec-2 orphan',
    'A real Orphan delete answers the object in deletion (deletionTimestamp, finalizer "orphan"), removed once the GC has orphaned the dependents; the emulator orphans synchronously and answers the deleted object (README, "Garbage collection and deletion"). The eventual state (next steps) is the same; we never delete with Orphan.',
  ],
  [
    'delete drv foreground',
    'A real Foreground delete answers the object in deletion (finalizer "foregroundDeletion"); the emulator deletes dependents and owner synchronously and answers the deleted object (README, "Garbage collection and deletion"). The eventual state (next steps) is the same; we never delete with Foreground.',
  ],
  [
    'watch pods',
    'The emulator has no watch (405; README, "No watch"). Our function gets pod events from Knative\'s ApiServerSource, which watches the real API server; nothing tested against the emulator watches.',
  ],
]);

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});

/** Remembers what later steps refer to (uids, resourceVersions, the continue token) from one side's answer. */
export function remember(ctx: SideContext, answer: Answer): void {
  const body = rec(answer.body);
  const meta = rec(body['metadata']);
  if (typeof meta['name'] === 'string' && typeof meta['uid'] === 'string') {
    ctx.uid.set(meta['name'], meta['uid']);
    if (typeof meta['resourceVersion'] === 'string') ctx.rv.set(meta['name'], meta['resourceVersion']);
  }
  if (typeof meta['continue'] === 'string' && meta['continue'] !== '') ctx.continueToken = meta['continue'];
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** Uids and the stored resourceVersion quoted in precondition conflicts differ by construction. */
function normaliseMessage(message: unknown): unknown {
  return typeof message === 'string'
    ? message.replace(UUID, '<uid>').replace(/ResourceVersion in record \(\d+\)/, 'ResourceVersion in record (<rv>)')
    : message;
}

/** kube-scheduler writes PodScheduled (False: the harness has no nodes); the emulator runs no scheduler (README). */
const SCHEDULER_CONDITION = 'PodScheduled';

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/**
 * The fields we rely on. Normalised, narrowly: uids (owner references compare by the owner's name),
 * resourceVersions, timestamps, clusterIPs (only "an IPv4 address" is compared) and continue tokens
 * (only "present") are left out or reduced.
 */
export function project(answer: Answer): unknown {
  const body = rec(answer.body);
  const kind = body['kind'];
  const meta = rec(body['metadata']);
  if (kind === 'Status') {
    const details = rec(body['details']);
    return {
      http: answer.status,
      code: body['code'],
      reason: body['reason'],
      message: normaliseMessage(body['message']),
      details: { name: details['name'], kind: details['kind'], causes: details['causes'] },
    };
  }
  if (typeof kind === 'string' && kind.endsWith('List')) {
    const items = Array.isArray(body['items']) ? body['items'] : [];
    return {
      http: answer.status,
      kind,
      names: items.map((i) => rec(rec(i)['metadata'])['name']),
      continue: typeof meta['continue'] === 'string' && meta['continue'] !== '',
      remainingItemCount: meta['remainingItemCount'],
    };
  }
  const common = {
    http: answer.status,
    kind,
    name: meta['name'],
    namespace: meta['namespace'],
    labels: meta['labels'],
    annotations: meta['annotations'],
    ownerReferences: (Array.isArray(meta['ownerReferences']) ? meta['ownerReferences'] : []).map((o) => {
      const { uid: _uid, ...rest } = rec(o);
      return rest;
    }),
    finalizers: meta['finalizers'],
    hasUid: typeof meta['uid'] === 'string',
    hasResourceVersion: typeof meta['resourceVersion'] === 'string',
  };
  const spec = rec(body['spec']);
  const status = rec(body['status']);
  if (kind === 'Pod') {
    const containers = (Array.isArray(spec['containers']) ? spec['containers'] : []).map((c) => {
      const x = rec(c);
      return { name: x['name'], image: x['image'], ports: x['ports'], imagePullPolicy: x['imagePullPolicy'] };
    });
    const conditions = (Array.isArray(status['conditions']) ? status['conditions'] : [])
      .map((c) => ({ type: rec(c)['type'], status: rec(c)['status'] }))
      .filter((c) => c.type !== SCHEDULER_CONDITION);
    return {
      ...common,
      spec: {
        containers,
        restartPolicy: spec['restartPolicy'],
        nodeName: spec['nodeName'],
        serviceAccountName: spec['serviceAccountName'],
      },
      status: { phase: status['phase'], podIP: status['podIP'], podIPs: status['podIPs'], conditions },
      deleting: typeof meta['deletionTimestamp'] === 'string',
    };
  }
  if (kind === 'Service') {
    const clusterIP = spec['clusterIP'];
    return {
      ...common,
      spec: {
        type: spec['type'],
        selector: spec['selector'],
        ports: spec['ports'],
        clusterIPisIPv4: typeof clusterIP === 'string' && IPV4.test(clusterIP),
        clusterIPsMatch: JSON.stringify(spec['clusterIPs']) === JSON.stringify([clusterIP]),
        sessionAffinity: spec['sessionAffinity'],
        ipFamilies: spec['ipFamilies'],
        ipFamilyPolicy: spec['ipFamilyPolicy'],
        internalTrafficPolicy: spec['internalTrafficPolicy'],
      },
    };
  }
  if (kind === 'TokenReview') return { http: answer.status, kind, authenticated: status['authenticated'] ?? false };
  return { http: answer.status, kind, body: typeof answer.body === 'string' ? 'text' : Object.keys(body).sort() };
}
