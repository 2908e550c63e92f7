/**
 * In-memory storage: one map per resource keyed like etcd ("<namespace>/<name>"), a global
 * revision that every write bumps (what resourceVersion is in real clusters), and frozen
 * snapshots so paginated lists stay consistent the way etcd MVCC reads are.
 */
import { type Obj, ownerRefsOf, type ResourceName, nameOf, namespaceOf, uidOf } from './types.ts';

export type Entry = readonly [key: string, obj: Obj];

const MAX_SNAPSHOTS = 64;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

export function keyOf(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export class Store {
  private rev = 0;
  private readonly data: Record<ResourceName, Map<string, Obj>> = { pods: new Map(), services: new Map() };
  private readonly uids = new Map<string, { resource: ResourceName; key: string }>();
  /** owner UID → dependents' UIDs, so the garbage collector need not scan everything. */
  private readonly dependents = new Map<string, Set<string>>();
  /** Sorted entries per resource, rebuilt lazily after a write; shared (immutable) with snapshots. */
  private readonly sorted: Partial<Record<ResourceName, readonly Entry[]>> = {};
  private readonly snapshots = new Map<string, readonly Entry[]>();
  /** Namespaces that held an object at some point, with when they were first seen. */
  readonly namespacesSeen = new Map<string, string>();

  get revision(): number {
    return this.rev;
  }

  nextRevision(): number {
    this.rev += 1;
    return this.rev;
  }

  /** Stored objects are frozen: callers copy before changing anything. */
  get(resource: ResourceName, namespace: string, name: string): Obj | undefined {
    return this.data[resource].get(keyOf(namespace, name));
  }

  findByUid(uid: string): { resource: ResourceName; obj: Obj } | undefined {
    const hit = this.uids.get(uid);
    if (hit === undefined) return undefined;
    const obj = this.data[hit.resource].get(hit.key);
    return obj === undefined ? undefined : { resource: hit.resource, obj };
  }

  put(resource: ResourceName, obj: Obj, now: string): Obj {
    const key = keyOf(namespaceOf(obj), nameOf(obj));
    const previous = this.data[resource].get(key);
    if (previous !== undefined) this.unindex(previous);
    const frozen = deepFreeze(obj);
    this.data[resource].set(key, frozen);
    this.uids.set(uidOf(frozen), { resource, key });
    for (const ref of ownerRefsOf(frozen)) {
      let set = this.dependents.get(ref.uid);
      if (set === undefined) this.dependents.set(ref.uid, (set = new Set()));
      set.add(uidOf(frozen));
    }
    delete this.sorted[resource];
    if (!this.namespacesSeen.has(namespaceOf(obj))) this.namespacesSeen.set(namespaceOf(obj), now);
    return frozen;
  }

  remove(resource: ResourceName, namespace: string, name: string): void {
    const key = keyOf(namespace, name);
    const previous = this.data[resource].get(key);
    if (previous === undefined) return;
    this.unindex(previous);
    this.data[resource].delete(key);
    delete this.sorted[resource];
  }

  private unindex(obj: Obj): void {
    this.uids.delete(uidOf(obj));
    for (const ref of ownerRefsOf(obj)) {
      const set = this.dependents.get(ref.uid);
      set?.delete(uidOf(obj));
      if (set?.size === 0) this.dependents.delete(ref.uid);
    }
  }

  /** All objects of a resource in etcd key order (byte order of "<ns>/<name>"). */
  entries(resource: ResourceName): readonly Entry[] {
    let sorted = this.sorted[resource];
    if (sorted === undefined) {
      sorted = Object.freeze([...this.data[resource].entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
      this.sorted[resource] = sorted;
    }
    return sorted;
  }

  /** Objects (of either resource) whose ownerReferences name `ownerUid`, in `namespace`. */
  dependentsOf(namespace: string, ownerUid: string): Array<{ resource: ResourceName; obj: Obj }> {
    const out: Array<{ resource: ResourceName; obj: Obj }> = [];
    for (const uid of this.dependents.get(ownerUid) ?? []) {
      const hit = this.findByUid(uid);
      if (hit !== undefined && namespaceOf(hit.obj) === namespace) out.push(hit);
    }
    return out;
  }

  /** Pins the current state of `resource` for continue tokens issued at this revision. */
  snapshot(resource: ResourceName): { revision: number; entries: readonly Entry[] } {
    const id = `${resource}@${this.rev}`;
    let entries = this.snapshots.get(id);
    if (entries === undefined) {
      entries = this.entries(resource);
      this.snapshots.set(id, entries);
      while (this.snapshots.size > MAX_SNAPSHOTS) {
        const oldest = this.snapshots.keys().next().value;
        if (oldest === undefined) break;
        this.snapshots.delete(oldest);
      }
    }
    return { revision: this.rev, entries };
  }

  snapshotAt(resource: ResourceName, revision: number): readonly Entry[] | undefined {
    if (revision === this.rev) return this.snapshot(resource).entries;
    return this.snapshots.get(`${resource}@${revision}`);
  }

  size(resource: ResourceName): number {
    return this.data[resource].size;
  }
}
