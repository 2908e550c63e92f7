/**
 * The generic REST flow of the apiserver's registry (genericregistry.Store + rest.BeforeCreate
 * / BeforeUpdate / BeforeDelete) for pods and services: decode, system fields, defaulting,
 * validation, optimistic concurrency, allocation, storage, finalizers and garbage collection.
 * Used by the HTTP handlers and by the synchronous test back door alike.
 */
import { randomUUID } from 'node:crypto';
import { GarbageCollector, type GcHost } from './gc.ts';
import { isValidNamespaceName } from './names.ts';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch } from './patch.ts';
import { type Decoded, DecodeError, decodeObject } from './schema.ts';
import { ServiceAllocations } from './service-alloc.ts';
import {
  badRequest,
  conflict,
  fieldInvalid,
  fieldNotSupported,
  invalid,
  MODIFIED,
  notFound,
  unknownServerError,
  alreadyExists,
  type FieldError,
} from './status.ts';
import { Store } from './store.ts';
import { STRATEGIES, type Strategy } from './strategy.ts';
import {
  array,
  clone,
  deepEqual,
  isRecord,
  metadataOf,
  nameOf,
  namespaceOf,
  type Obj,
  type ResourceName,
  record,
  rfc3339,
  str,
  uidOf,
} from './types.ts';

export type PatchType = 'merge' | 'json' | 'strategic';

/** main = the resource itself (status is kept), status = the /status subresource (spec is kept), all = both (test back door). */
export type Scope = 'main' | 'status' | 'all';

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

export interface WriteOptions {
  readonly dryRun?: boolean;
  readonly scope?: Scope;
  /** Unknown-field handling; the apiserver's default is Warn. */
  readonly fieldValidation?: FieldValidation;
  /** Receives the Warning texts (e.g. `unknown field "spec.foo"`) for Warn. */
  readonly warnings?: string[];
}

export interface DeleteOptions {
  readonly propagationPolicy?: unknown;
  readonly orphanDependents?: unknown;
  readonly preconditions?: { readonly uid?: unknown; readonly resourceVersion?: unknown };
  readonly dryRun?: boolean;
}

const PROPAGATION = ['Foreground', 'Background', 'Orphan'];
const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
/** v1 kinds the scheme knows: posting one of them to the wrong endpoint fails in conversion, not lookup. */
const KNOWN_V1_KINDS = new Set([
  'Pod',
  'Service',
  'ConfigMap',
  'Secret',
  'Namespace',
  'Node',
  'Endpoints',
  'Event',
  'ServiceAccount',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'ReplicationController',
  'LimitRange',
  'ResourceQuota',
  'PodTemplate',
]);

function jsonWhat(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'object';
  return typeof value === 'boolean' ? 'bool' : typeof value;
}

export class Registry implements GcHost {
  readonly store = new Store();
  private readonly services = new ServiceAllocations();
  private readonly gc: GarbageCollector;
  private readonly clock: () => Date;

  constructor(clock: () => Date = () => new Date()) {
    this.clock = clock;
    this.gc = new GarbageCollector(this);
  }

  private now(): string {
    return rfc3339(this.clock());
  }

  get(resource: ResourceName, namespace: string, name: string): Obj {
    const obj = this.store.get(resource, namespace, name);
    if (obj === undefined) throw notFound(resource, name);
    return obj;
  }

  // ---- decode ---------------------------------------------------------------------------

  /** The typed decode of a request body; every failure is the handler's 400 BadRequest. */
  private decodeBody(strategy: Strategy, body: unknown, opts: WriteOptions): Obj {
    const kind = strategy.kind;
    if (!isRecord(body)) {
      const summary = JSON.stringify(body).slice(0, 30);
      throw badRequest(
        `the object provided is unrecognized (must be of type ${kind}): couldn't get version/kind; json parse error: json: cannot unmarshal ${jsonWhat(
          body,
        )} into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" } (${summary})`,
      );
    }
    const apiVersion = body['apiVersion'];
    const bodyKind = body['kind'];
    if ((apiVersion !== undefined && typeof apiVersion !== 'string') || (bodyKind !== undefined && typeof bodyKind !== 'string')) {
      throw badRequest(
        `the object provided is unrecognized (must be of type ${kind}): couldn't get version/kind; json parse error: json: cannot unmarshal ${jsonWhat(
          typeof apiVersion !== 'string' ? apiVersion : bodyKind,
        )} into Go struct field .${typeof apiVersion !== 'string' ? 'apiVersion' : 'kind'} of type string`,
      );
    }
    const version = apiVersion === undefined || apiVersion === '' ? 'v1' : apiVersion;
    const gotKind = bodyKind === undefined || bodyKind === '' ? kind : bodyKind;
    if (version !== 'v1') {
      const short = version.includes('/') ? version.slice(version.indexOf('/') + 1) : version;
      throw badRequest(
        `${gotKind} in version "${short}" cannot be handled as a ${kind}: no kind "${gotKind}" is registered for version "${version}" in scheme "pkg/api/legacyscheme/scheme.go:30"`,
      );
    }
    if (gotKind !== kind) {
      const why = KNOWN_V1_KINDS.has(gotKind)
        ? `converting (v1.${gotKind}) to (core.${kind}): unknown conversion`
        : `no kind "${gotKind}" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30"`;
      throw badRequest(`${gotKind} in version "v1" cannot be handled as a ${kind}: ${why}`);
    }
    const cannot = `${kind} in version "v1" cannot be handled as a ${kind}`;
    let decoded: Decoded;
    try {
      decoded = decodeObject(kind, body);
    } catch (e) {
      if (e instanceof DecodeError) throw badRequest(`${cannot}: ${e.message}`);
      throw e;
    }
    const strict = this.unknownFields(decoded, opts);
    if (strict !== undefined) throw badRequest(`${cannot}: ${strict}`);
    return this.withTypeMeta(strategy, decoded.obj);
  }

  /** Applies the fieldValidation directive; returns the strict-decoding error text to fail with, if any. */
  private unknownFields(decoded: Decoded, opts: WriteOptions): string | undefined {
    if (decoded.unknownFields.length === 0) return undefined;
    const texts = decoded.unknownFields.map((f) => `unknown field ${JSON.stringify(f)}`);
    const directive = opts.fieldValidation ?? 'Warn';
    if (directive === 'Strict') return `strict decoding error: ${texts.join(', ')}`;
    if (directive === 'Warn') opts.warnings?.push(...texts);
    return undefined;
  }

  /** kind and apiVersion first, as the Go TypeMeta serialises. */
  private withTypeMeta(strategy: Strategy, obj: Obj): Obj {
    const out: Obj = { kind: strategy.kind, apiVersion: 'v1' };
    for (const [key, value] of Object.entries(obj)) if (key !== 'kind' && key !== 'apiVersion') out[key] = value;
    return out;
  }

  /** Final encode: Go field order and omitempty, after defaulting added fields. */
  private normalize(strategy: Strategy, obj: Obj): Obj {
    return this.withTypeMeta(strategy, decodeObject(strategy.kind, obj).obj);
  }

  /** Sets metadata.resourceVersion, keeping ObjectMeta field order. */
  private stamp(strategy: Strategy, obj: Obj, revision: number): Obj {
    metadataOf(obj)['resourceVersion'] = String(revision);
    return this.normalize(strategy, obj);
  }

  // ---- create ---------------------------------------------------------------------------

  create(resource: ResourceName, namespace: string, body: unknown, opts: WriteOptions & { seed?: boolean } = {}): Obj {
    const strategy = STRATEGIES[resource];
    const obj = this.decodeBody(strategy, body, opts);
    const meta = metadataOf(obj);
    const dryRun = opts.dryRun === true;
    if (str(meta['namespace']) !== '' && meta['namespace'] !== namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    // NamespaceLifecycle admission: a namespace that cannot exist is "not found".
    if (!isValidNamespaceName(namespace)) throw notFound('namespaces', namespace);
    if (opts.seed !== true && str(meta['resourceVersion']) !== '') {
      throw unknownServerError('resourceVersion should not be set on objects to be created');
    }
    meta['namespace'] = namespace;
    for (const key of ['resourceVersion', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields', 'selfLink', 'generation'])
      delete meta[key];

    // FillObjectMetaSystemFields; the seed back door may pin uid and creationTimestamp.
    const givenUid = str(meta['uid']);
    if (opts.seed === true && givenUid !== '') {
      if (this.store.findByUid(givenUid) !== undefined) throw new Error(`seed: uid ${givenUid} is already used by another object`);
    } else meta['uid'] = randomUUID();
    if (opts.seed !== true || str(meta['creationTimestamp']) === '') meta['creationTimestamp'] = this.now();

    if (str(meta['name']) === '' && str(meta['generateName']) !== '')
      meta['name'] = this.generateName(resource, namespace, str(meta['generateName']));

    const givenStatus = obj['status'];
    delete obj['status'];
    strategy.defaults(obj);
    strategy.admitCreate(obj);
    obj['status'] = opts.seed === true ? strategy.seedStatus({ ...obj, status: givenStatus }) : strategy.initialStatus(obj);

    const name = str(meta['name']);
    this.throwIfInvalid(strategy, name, strategy.validate(obj));
    if (this.store.get(resource, namespace, name) !== undefined) throw alreadyExists(resource, name);
    if (resource === 'services') this.throwIfInvalid(strategy, name, this.services.allocate(obj, undefined, dryRun));

    const out = this.normalize(strategy, obj);
    if (dryRun) return out;
    const stored = this.store.put(resource, this.stamp(strategy, out, this.store.nextRevision()), this.now());
    // A dependent whose owner does not exist is collected right away (README).
    this.gc.processItem(resource, stored);
    return stored;
  }

  private generateName(resource: ResourceName, namespace: string, base: string): string {
    const prefix = base.length > 58 ? base.slice(0, 58) : base;
    for (;;) {
      let suffix = '';
      for (let i = 0; i < 5; i++) suffix += GENERATE_ALPHABET[Math.floor(Math.random() * GENERATE_ALPHABET.length)] ?? 'x';
      const name = prefix + suffix;
      if (this.store.get(resource, namespace, name) === undefined) return name;
    }
  }

  private throwIfInvalid(strategy: Strategy, name: string, errs: FieldError[]): void {
    if (errs.length > 0) throw invalid(strategy.kind, name, errs);
  }

  // ---- update / patch -------------------------------------------------------------------

  update(resource: ResourceName, namespace: string, name: string, body: unknown, opts: WriteOptions = {}): Obj {
    const strategy = STRATEGIES[resource];
    const existing = this.get(resource, namespace, name);
    return this.applyUpdate(strategy, existing, this.decodeBody(strategy, body, opts), opts);
  }

  patch(resource: ResourceName, namespace: string, name: string, type: PatchType, patch: unknown, opts: WriteOptions = {}): Obj {
    const strategy = STRATEGIES[resource];
    const existing = this.get(resource, namespace, name);
    const current = clone(existing);
    const patched =
      type === 'merge'
        ? applyMergePatch(current, patch)
        : type === 'json'
          ? applyJsonPatch(current, patch)
          : applyStrategicMergePatch(current, patch, strategy.smp);
    // The patch, not a request body, produced this document: problems are 422 like the patcher's.
    const patchInvalid = (why: string) => invalid('', '', [fieldInvalid('patch', JSON.stringify(patched), why)]);
    let decoded: Decoded;
    try {
      decoded = decodeObject(strategy.kind, patched);
    } catch (e) {
      if (e instanceof DecodeError) throw patchInvalid(e.message);
      throw e;
    }
    const strict = this.unknownFields(decoded, opts);
    if (strict !== undefined) throw patchInvalid(strict);
    return this.applyUpdate(strategy, existing, this.withTypeMeta(strategy, decoded.obj), opts);
  }

  private applyUpdate(strategy: Strategy, existing: Obj, obj: Obj, opts: WriteOptions): Obj {
    const resource = strategy.resource;
    const name = nameOf(existing);
    const namespace = namespaceOf(existing);
    const meta = metadataOf(obj);
    const oldMeta = record(existing['metadata']);
    const dryRun = opts.dryRun === true;
    const scope = opts.scope ?? 'main';

    // checkName in the update/patch handlers.
    if (str(meta['name']) !== name) {
      throw badRequest(`the name of the object (${str(meta['name'])}) does not match the name on the URL (${name})`);
    }
    if (str(meta['namespace']) !== '' && meta['namespace'] !== namespace) {
      throw badRequest(
        `the namespace of the object (${str(meta['namespace'])}) does not match the namespace on the request (${namespace})`,
      );
    }
    meta['namespace'] = namespace;
    const uid = str(meta['uid']);
    if (uid !== '' && uid !== uidOf(existing)) {
      throw conflict(resource, name, `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${uidOf(existing)}`);
    }
    const rv = str(meta['resourceVersion']);
    if (rv !== '') {
      if (!/^\d+$/.test(rv)) throw badRequest(`invalid resourceVersion ${JSON.stringify(rv)}: must be an unsigned integer`);
      if (rv !== str(oldMeta['resourceVersion'])) throw conflict(resource, name, MODIFIED);
    }

    // rest.BeforeUpdate: system fields always come from the stored object.
    for (const key of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'resourceVersion', 'generation']) {
      if (oldMeta[key] === undefined) delete meta[key];
      else meta[key] = oldMeta[key];
    }
    delete meta['managedFields'];
    delete meta['selfLink'];
    if (scope === 'main') obj['status'] = clone(existing['status']);
    if (scope === 'status') {
      obj['spec'] = clone(existing['spec']);
      // The pod status strategy protects owner references from (old) kubelets.
      if (resource === 'pods') {
        if (oldMeta['ownerReferences'] === undefined) delete meta['ownerReferences'];
        else meta['ownerReferences'] = clone(oldMeta['ownerReferences']);
      }
    }

    if (resource === 'services') this.services.prepareUpdate(obj, existing);
    strategy.defaults(obj);
    this.throwIfInvalid(strategy, name, strategy.validateUpdate(obj, existing));
    if (resource === 'services') this.throwIfInvalid(strategy, name, this.services.allocate(obj, existing, dryRun));

    const out = this.normalize(strategy, obj);
    // An update that changes nothing is not written and keeps its resourceVersion.
    if (deepEqual(out, existing)) return existing;
    if (dryRun) return out;
    const stored = this.store.put(resource, this.stamp(strategy, out, this.store.nextRevision()), this.now());
    if (resource === 'services') this.services.releaseUnused(stored, existing);

    const storedMeta = record(stored['metadata']);
    if (oldMeta['deletionTimestamp'] !== undefined && array(storedMeta['finalizers']).length === 0) {
      // The last finalizer of a terminating object is gone: it is deleted now.
      return this.finalizeDelete(resource, stored);
    }
    if (!deepEqual(oldMeta['ownerReferences'], storedMeta['ownerReferences'])) this.gc.processItem(resource, stored);
    return stored;
  }

  // ---- delete ---------------------------------------------------------------------------

  delete(resource: ResourceName, namespace: string, name: string, options: DeleteOptions = {}): Obj {
    const existing = this.get(resource, namespace, name);
    const errs: FieldError[] = [];
    const policy = options.propagationPolicy;
    if (policy !== undefined && (typeof policy !== 'string' || !PROPAGATION.includes(policy))) {
      errs.push(fieldNotSupported('propagationPolicy', typeof policy === 'string' ? policy : null, [...PROPAGATION, 'nil']));
    }
    if (options.orphanDependents !== undefined && policy !== undefined) {
      errs.push(
        fieldInvalid(
          'propagationPolicy',
          typeof policy === 'string' ? policy : null,
          'orphanDependents and deletionPropagation cannot be both set',
        ),
      );
    }
    if (errs.length > 0) throw invalid('DeleteOptions', '', errs, 'meta.k8s.io');

    const pre = options.preconditions;
    if (pre !== undefined) {
      // k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete (v1.34.4): checked before any
      // deletion, the conflict named by the object's Kind (GroupResource{Resource: gvk.Kind}).
      const kind = STRATEGIES[resource].kind;
      const wantUid = typeof pre.uid === 'string' ? pre.uid : '';
      if (wantUid !== '' && wantUid !== uidOf(existing)) {
        throw conflict(
          kind,
          name,
          `the UID in the precondition (${wantUid}) does not match the UID in record (${uidOf(existing)}). The object might have been deleted and then recreated`,
        );
      }
      const wantRv = typeof pre.resourceVersion === 'string' ? pre.resourceVersion : '';
      const haveRv = str(record(existing['metadata'])['resourceVersion']);
      if (wantRv !== '' && wantRv !== haveRv) {
        throw conflict(
          kind,
          name,
          `the ResourceVersion in the precondition (${wantRv}) does not match the ResourceVersion in record (${haveRv}). The object might have been modified`,
        );
      }
    }
    if (options.dryRun === true) return existing;
    const effective = typeof policy === 'string' ? policy : options.orphanDependents === true ? 'Orphan' : 'Background';
    return this.deleteObject(resource, existing, effective);
  }

  private deleteObject(resource: ResourceName, existing: Obj, policy: string): Obj {
    const meta = record(existing['metadata']);
    if (policy === 'Orphan') this.gc.orphan(namespaceOf(existing), uidOf(existing));
    const current = this.store.findByUid(uidOf(existing))?.obj ?? existing;
    if (array(meta['finalizers']).length > 0) {
      // Finalizers hold the object: it only becomes "terminating".
      if (meta['deletionTimestamp'] !== undefined) return current;
      const terminating = clone(current);
      const tmeta = metadataOf(terminating);
      tmeta['deletionTimestamp'] = this.now();
      tmeta['deletionGracePeriodSeconds'] = 0;
      return this.store.put(resource, this.stamp(STRATEGIES[resource], terminating, this.store.nextRevision()), this.now());
    }
    if (resource === 'pods' && meta['deletionTimestamp'] === undefined) {
      // Pods delete gracefully: k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete stamps
      // deletionTimestamp and the grace period (0 for an unscheduled pod, pkg/registry/core/pod/
      // strategy.go CheckGracefulDelete) before the immediate delete, and the answer carries them.
      // The emulator always deletes at once (README), so always with grace 0.
      const stamped = clone(current);
      const smeta = metadataOf(stamped);
      smeta['deletionTimestamp'] = this.now();
      smeta['deletionGracePeriodSeconds'] = 0;
      return this.finalizeDelete(resource, stamped);
    }
    return this.finalizeDelete(resource, current);
  }

  /** Removes the object for good, then lets the garbage collector look at its dependents. */
  private finalizeDelete(resource: ResourceName, obj: Obj): Obj {
    const revision = this.store.nextRevision();
    this.store.remove(resource, namespaceOf(obj), nameOf(obj));
    if (resource === 'services') this.services.release(obj);
    const result = this.stamp(STRATEGIES[resource], clone(obj), revision);
    this.gc.ownerGone(namespaceOf(obj), uidOf(obj));
    return result;
  }

  /** See GarbageCollector.holdCascades. */
  holdGarbageCollection(): () => void {
    return this.gc.holdCascades();
  }

  // ---- GcHost ---------------------------------------------------------------------------

  collect(resource: ResourceName, obj: Obj): void {
    this.deleteObject(resource, obj, 'Background');
  }

  keepOwnerRefs(resource: ResourceName, obj: Obj, keep: (ref: unknown) => boolean): void {
    const updated = clone(obj);
    const meta = metadataOf(updated);
    const refs = array(meta['ownerReferences']).filter(keep);
    if (refs.length > 0) meta['ownerReferences'] = refs;
    else delete meta['ownerReferences'];
    this.store.put(resource, this.stamp(STRATEGIES[resource], updated, this.store.nextRevision()), this.now());
  }

  // ---- test back door -------------------------------------------------------------------

  /** Inserts a Pod or Service as if created through the API, but keeping status (and a given uid / creationTimestamp). */
  seed(input: unknown): Obj {
    if (!isRecord(input)) throw new Error('seed: expected a Pod or Service object');
    const kind = input['kind'];
    const resource: ResourceName | undefined = kind === 'Pod' ? 'pods' : kind === 'Service' ? 'services' : undefined;
    if (resource === undefined) throw new Error(`seed: kind must be "Pod" or "Service", got ${JSON.stringify(kind)}`);
    const namespace = str(record(input['metadata'])['namespace']) || 'default';
    return this.create(resource, namespace, input, { seed: true, fieldValidation: 'Strict' });
  }

  /** Namespace rows for the implicit Namespace resource. */
  namespaceNames(): string[] {
    return [...this.store.namespacesSeen.keys()];
  }
}
