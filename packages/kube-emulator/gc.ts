/**
 * The garbage collector's decision for one dependent (attemptToDeleteItem in
 * pkg/controller/garbagecollector): owners are looked up by kind/name in the dependent's
 * namespace and must match the UID; with no live owner left the dependent is deleted
 * (background), with some owners alive only the dangling references are removed.
 * Runs synchronously inside the write that triggered it (README: real GC is async).
 */
import type { Store } from './store.ts';
import { isRecord, nameOf, namespaceOf, type Obj, type OwnerRef, ownerRefsOf, type ResourceName, uidOf } from './types.ts';

export type OwnerState = 'alive' | 'absent' | 'unknown';

export interface GcHost {
  readonly store: Store;
  /** Delete `obj` as a Background API delete would (finalizers, GC of its own dependents). */
  collect(resource: ResourceName, obj: Obj): void;
  /** Rewrite `obj` keeping only `keep` of its ownerReferences (a normal update). */
  keepOwnerRefs(resource: ResourceName, obj: Obj, keep: (ref: unknown) => boolean): void;
}

const KNOWN_OWNER_KINDS: Readonly<Record<string, ResourceName>> = { Pod: 'pods', Service: 'services' };

export class GarbageCollector {
  private readonly host: GcHost;

  constructor(host: GcHost) {
    this.host = host;
  }

  /** Kinds the emulator does not serve cannot be resolved; like a missing REST mapping, they are left alone. */
  ownerState(namespace: string, ref: OwnerRef): OwnerState {
    const resource = ref.apiVersion === 'v1' ? KNOWN_OWNER_KINDS[ref.kind] : undefined;
    if (resource === undefined) return 'unknown';
    const owner = this.host.store.get(resource, namespace, ref.name);
    return owner !== undefined && uidOf(owner) === ref.uid ? 'alive' : 'absent';
  }

  /** Decide the fate of one object from its owner references. */
  processItem(resource: ResourceName, obj: Obj): void {
    const refs = ownerRefsOf(obj);
    if (refs.length === 0) return;
    const ns = namespaceOf(obj);
    const dangling = new Set(refs.filter((r) => this.ownerState(ns, r) === 'absent').map((r) => r.uid));
    if (dangling.size === 0) return;
    if (dangling.size < refs.length) {
      this.host.keepOwnerRefs(resource, obj, (raw) => !dangling.has(refUid(raw)));
      return;
    }
    this.host.collect(resource, obj);
  }

  /** Owner deletions whose cascade waits for release (holdCascades); undefined = run at once. */
  private held: Array<{ namespace: string; ownerUid: string }> | undefined;

  /**
   * Lets dependents outlive their deleted owner until the returned release runs, as they do on a
   * real cluster while its asynchronous garbage collector catches up.
   */
  holdCascades(): () => void {
    this.held ??= [];
    return () => {
      const pending = this.held ?? [];
      this.held = undefined;
      for (const p of pending) this.ownerGone(p.namespace, p.ownerUid);
    };
  }

  /** Everything in `namespace` that named `ownerUid` as an owner gets re-evaluated. */
  ownerGone(namespace: string, ownerUid: string): void {
    if (this.held !== undefined) {
      this.held.push({ namespace, ownerUid });
      return;
    }
    for (const { obj } of this.dependentsOf(namespace, ownerUid)) {
      // Re-read: an earlier step of this cascade may already have changed or removed it.
      const current = this.host.store.findByUid(uidOf(obj));
      if (current !== undefined) this.processItem(current.resource, current.obj);
    }
  }

  /** propagationPolicy=Orphan: dependents lose the reference instead of being deleted. */
  orphan(namespace: string, ownerUid: string): void {
    for (const { resource, obj } of this.dependentsOf(namespace, ownerUid)) {
      this.host.keepOwnerRefs(resource, obj, (raw) => refUid(raw) !== ownerUid);
    }
  }

  dependentsOf(namespace: string, ownerUid: string): Array<{ resource: ResourceName; obj: Obj }> {
    // Deterministic order: by resource, then etcd key.
    const key = (d: { resource: ResourceName; obj: Obj }): string => `${d.resource}/${namespaceOf(d.obj)}/${nameOf(d.obj)}`;
    return this.host.store.dependentsOf(namespace, ownerUid).sort((a, b) => (key(a) < key(b) ? -1 : 1));
  }
}

function refUid(raw: unknown): string {
  return isRecord(raw) && typeof raw['uid'] === 'string' ? raw['uid'] : '';
}
