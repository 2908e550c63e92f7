/**
 * Namespaces exist implicitly: every DNS-1123 label is an Active namespace (README). This
 * module only gives them a face for GET/LIST/POST /api/v1/namespaces: the four namespaces
 * of a fresh cluster, those created explicitly, and those that ever held an object.
 */
import { createHash } from 'node:crypto';
import { isDns1123Label, isValidNamespaceName } from './names.ts';
import { alreadyExists, badRequest, fieldInvalid, fieldRequired, invalid, notFound } from './status.ts';
import type { Store } from './store.ts';
import { getPath, isRecord, type Obj, rfc3339, str, stringMap } from './types.ts';

const BUILTIN = ['default', 'kube-node-lease', 'kube-public', 'kube-system'];

/** Stable per name, shaped like a UUID (real ones are random). */
function namespaceUid(name: string): string {
  const h = createHash('sha1').update(`namespace/${name}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export class Namespaces {
  private readonly explicit = new Map<string, Obj>();
  private readonly store: Store;
  private readonly started: string;
  private readonly clock: () => Date;

  constructor(store: Store, clock: () => Date) {
    this.store = store;
    this.clock = clock;
    this.started = rfc3339(clock());
  }

  private synthesize(name: string, labels: Record<string, string> = {}, created = this.started, rv = '1'): Obj {
    return {
      kind: 'Namespace',
      apiVersion: 'v1',
      metadata: {
        name,
        uid: namespaceUid(name),
        resourceVersion: rv,
        creationTimestamp: created,
        labels: Object.fromEntries(Object.entries({ ...labels, 'kubernetes.io/metadata.name': name }).sort(([a], [b]) => (a < b ? -1 : 1))),
      },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    };
  }

  get(name: string): Obj {
    const explicit = this.explicit.get(name);
    if (explicit !== undefined) return explicit;
    if (!isValidNamespaceName(name)) throw notFound('namespaces', name);
    return this.synthesize(name, {}, this.store.namespacesSeen.get(name) ?? this.started);
  }

  list(): Obj[] {
    const names = new Set([...BUILTIN, ...this.explicit.keys(), ...this.store.namespacesSeen.keys()]);
    return [...names].sort().map((n) => this.get(n));
  }

  create(body: unknown): Obj {
    if (!isRecord(body)) throw badRequest('the object provided is unrecognized (must be of type Namespace)');
    const name = str(getPath(body, 'metadata', 'name'));
    if (name === '') throw invalid('Namespace', '', [fieldRequired('metadata.name', 'name or generateName is required')]);
    const errs = isDns1123Label(name).map((m) => fieldInvalid('metadata.name', name, m));
    if (errs.length > 0) throw invalid('Namespace', name, errs);
    if (BUILTIN.includes(name) || this.explicit.has(name) || this.store.namespacesSeen.has(name)) throw alreadyExists('namespaces', name);
    const now = rfc3339(this.clock());
    const ns = this.synthesize(name, stringMap(getPath(body, 'metadata', 'labels')), now, String(this.store.nextRevision()));
    this.explicit.set(name, ns);
    return ns;
  }

  /** Field selector values a Namespace supports. */
  static fields(ns: Obj): Record<string, string> {
    return { 'metadata.name': str(getPath(ns, 'metadata', 'name')), 'status.phase': str(getPath(ns, 'status', 'phase')) };
  }
}
