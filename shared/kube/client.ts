import * as k8s from '@kubernetes/client-node';
import { z } from 'zod';
import { NamespaceName, ObjectName, Pod, Service } from '../model/k8s-objects.ts';
import type { ServiceBody } from '../model/service-spec.ts';
import { type CallDescription, KubeApiError, toKubeApiError } from './errors.ts';
import type { ServerClock } from './server-clock.ts';

export interface Page<T> {
  readonly items: T[];
  /** Opaque token for the next page; undefined on the last page. */
  readonly continueToken: string | undefined;
  /**
   * Items of the page that could not be read as what they should be, each with why: left out of
   * `items`, never fatal to the rest. A page that skipped any is not a complete list.
   */
  readonly skipped: readonly SkippedItem[];
}

export interface SkippedItem {
  /** Its metadata.name when it has a readable one (bounded), for the log line. */
  readonly name: string | undefined;
  readonly reason: string;
}

export type CreateResult = { readonly outcome: 'created'; readonly service: Service } | { readonly outcome: 'exists' };
export type DeleteResult = 'deleted' | 'not-found' | 'precondition-failed';

/**
 * Everything the function asks of the Kubernetes API, and nothing more: read pods, manage
 * Services. Reads return undefined for 404 so that "gone" is a value, not an exception.
 */
export interface KubeClient {
  readPod(namespace: string, name: string): Promise<Pod | undefined>;
  listPods(namespace: string, labelSelector: string, limit: number, continueToken?: string): Promise<Page<Pod>>;
  readService(namespace: string, name: string): Promise<Service | undefined>;
  listServices(namespace: string, labelSelector: string, limit: number, continueToken?: string): Promise<Page<Service>>;
  createService(body: ServiceBody): Promise<CreateResult>;
  /**
   * JSON merge patch (RFC 7386). A `metadata.resourceVersion` in the patch is a precondition:
   * 'conflict' when the Service changed since that version; 'not-found' when it is gone.
   */
  patchService(namespace: string, name: string, patch: Record<string, unknown>): Promise<Service | 'not-found' | 'conflict'>;
  /**
   * Deletes only the Service with this UID (and, when given, this resourceVersion), so that a
   * newer Service of the same name, or one changed since it was decided on, is never hit.
   */
  deleteService(namespace: string, name: string, uid: string, resourceVersion?: string): Promise<DeleteResult>;
}

/** Items of a list response; items are validated one by one below. */
const ListBody = z.looseObject({
  items: z.array(z.unknown()),
  metadata: z.looseObject({ _continue: z.string().nullish() }).nullish(),
});

/** The real client: @kubernetes/client-node's CoreV1Api with a per-request timeout. */
export class CoreV1KubeClient implements KubeClient {
  private readonly api: k8s.CoreV1Api;
  private readonly timeoutMs: number;
  /** The connection pool every request goes through; see reuseConnections(). */
  private pool: { readonly dispatcher: Dispatcher; readonly since: number } | undefined;
  /** Told the `Date` of every answer (errors too): the API server's clock (server-clock.ts). */
  private readonly clock: ServerClock | undefined;

  constructor(kubeConfig: k8s.KubeConfig, timeoutMs: number, clock?: ServerClock) {
    this.api = kubeConfig.makeApiClient(k8s.CoreV1Api);
    this.timeoutMs = timeoutMs;
    this.clock = clock;
  }

  async readPod(namespace: string, name: string): Promise<Pod | undefined> {
    const call: CallDescription = { verb: 'get', resource: 'pods', namespace, name };
    if (!isValidTarget(namespace, name)) return undefined; // no object can have that name
    return this.orUndefinedOn404(call, async () =>
      parseObject(Pod, await this.api.readNamespacedPod({ namespace, name }, this.options()), call),
    );
  }

  async listPods(namespace: string, labelSelector: string, limit: number, continueToken?: string): Promise<Page<Pod>> {
    const call: CallDescription = { verb: 'list', resource: 'pods', namespace };
    assertValidNamespace(call);
    const body = await this.run(call, () =>
      this.api.listNamespacedPod({ namespace, labelSelector, limit, _continue: continueToken }, this.options()),
    );
    return parsePage(Pod, body, call);
  }

  async readService(namespace: string, name: string): Promise<Service | undefined> {
    const call: CallDescription = { verb: 'get', resource: 'services', namespace, name };
    if (!isValidTarget(namespace, name)) return undefined;
    return this.orUndefinedOn404(call, async () =>
      parseObject(Service, await this.api.readNamespacedService({ namespace, name }, this.options()), call),
    );
  }

  async listServices(namespace: string, labelSelector: string, limit: number, continueToken?: string): Promise<Page<Service>> {
    const call: CallDescription = { verb: 'list', resource: 'services', namespace };
    assertValidNamespace(call);
    const body = await this.run(call, () =>
      this.api.listNamespacedService({ namespace, labelSelector, limit, _continue: continueToken }, this.options()),
    );
    return parsePage(Service, body, call);
  }

  async createService(body: ServiceBody): Promise<CreateResult> {
    const { namespace, name } = body.metadata;
    const call: CallDescription = { verb: 'create', resource: 'services', namespace, name };
    assertValidNamespace(call);
    try {
      const created = await this.run(call, () => this.api.createNamespacedService({ namespace, body }, this.options()));
      return { outcome: 'created', service: parseObject(Service, created, call) };
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 409 && error.reason === 'AlreadyExists') return { outcome: 'exists' };
      throw error;
    }
  }

  async patchService(namespace: string, name: string, patch: Record<string, unknown>): Promise<Service | 'not-found' | 'conflict'> {
    const call: CallDescription = { verb: 'patch', resource: 'services', namespace, name };
    if (!isValidTarget(namespace, name)) return 'not-found';
    try {
      const patched = await this.run(call, () =>
        this.api.patchNamespacedService({ namespace, name, body: patch }, this.options(k8s.PatchStrategy.MergePatch)),
      );
      return parseObject(Service, patched, call);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return 'not-found';
      // A stale resourceVersion (or uid) in the patch: the object changed since it was read.
      if (error instanceof KubeApiError && error.status === 409) return 'conflict';
      throw error;
    }
  }

  async deleteService(namespace: string, name: string, uid: string, resourceVersion?: string): Promise<DeleteResult> {
    const call: CallDescription = { verb: 'delete', resource: 'services', namespace, name };
    if (!isValidTarget(namespace, name)) return 'not-found';
    const preconditions = resourceVersion === undefined ? { uid } : { uid, resourceVersion };
    try {
      await this.run(call, () => this.api.deleteNamespacedService({ namespace, name, body: { preconditions } }, this.options()));
      return 'deleted';
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return 'not-found';
      // A failed UID precondition is a 409 Conflict: the name now belongs to another object.
      if (error instanceof KubeApiError && error.status === 409 && /precondition/i.test(error.message)) return 'precondition-failed';
      throw error;
    }
  }

  private async run<T>(call: CallDescription, request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      throw toKubeApiError(error, call);
    }
  }

  private async orUndefinedOn404<T>(call: CallDescription, request: () => Promise<T>): Promise<T | undefined> {
    try {
      return await this.run(call, request);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  /** Per-request options: an abort timeout, and the patch content type when patching. */
  private options(contentType?: string): k8s.ConfigurationOptions {
    const timeoutMs = this.timeoutMs;
    let answered: ((date: string | undefined) => void) | undefined;
    const middleware: k8s.ObservableMiddleware = {
      pre: (context) => {
        answered = this.clock?.exchange();
        context.setSignal(AbortSignal.timeout(timeoutMs));
        if (contentType !== undefined) context.setHeaderParam('Content-Type', contentType);
        this.reuseConnections(context);
        return new k8s.Observable(Promise.resolve(context));
      },
      post: (context) => {
        answered?.(context.headers['date']);
        return new k8s.Observable(Promise.resolve(context));
      },
    };
    return { middleware: [middleware], middlewareMergeStrategy: 'append' };
  }

  /**
   * client-node (2.0.x) builds a new undici Agent for every request whenever the cluster has TLS
   * settings — always in-cluster, where the CA is set — so every API call opened a new TCP and TLS
   * connection, and the abandoned ones stayed open until their keep-alive timeout. The first
   * Agent it builds is kept and every request goes through it; a newly built one is adopted every
   * POOL_MAX_AGE_MS, so a rotated CA or client certificate in the kubeconfig is picked up (the old
   * one is closed once every request given to it has surely been sent; close() lets them finish).
   * Bearer tokens are headers, set per request anyway.
   */
  private reuseConnections(context: k8s.RequestContext): void {
    const fresh = context.getDispatcher();
    if (fresh === undefined) return; // no TLS settings: fetch's global pool, which keeps its connections
    const now = Date.now();
    const pool = this.pool;
    if (pool !== undefined && now - pool.since < POOL_MAX_AGE_MS) {
      context.setDispatcher(pool.dispatcher); // `fresh` never connected: it is simply dropped
      return;
    }
    this.pool = { dispatcher: fresh, since: now };
    if (pool !== undefined) {
      setTimeout(() => void pool.dispatcher.close().catch(() => undefined), this.timeoutMs + 1_000).unref();
    }
  }
}

type Dispatcher = NonNullable<ReturnType<k8s.RequestContext['getDispatcher']>>;

/** How long one connection pool is used before client-node's latest one replaces it. */
const POOL_MAX_AGE_MS = 10 * 60_000;

/**
 * Namespaces and names become URL path segments; client-node encodes them, but "." and ".."
 * would still walk out of the collection (GET …/pods/.. reads the namespace). Kubernetes allows
 * neither, so a request for such a name can only be wrong: it is never sent.
 */
function isValidTarget(namespace: string, name: string): boolean {
  return NamespaceName.safeParse(namespace).success && ObjectName.safeParse(name).success;
}

/** Whether the client sends a request for this call at all (the rule above; a list or create names no object). */
export function sendsRequest(call: CallDescription): boolean {
  return call.name === undefined || call.verb === 'create'
    ? NamespaceName.safeParse(call.namespace).success
    : isValidTarget(call.namespace, call.name);
}

function assertValidNamespace(call: CallDescription): void {
  if (!NamespaceName.safeParse(call.namespace).success) {
    throw new KubeApiError(
      `${call.verb} ${call.resource}: invalid namespace ${JSON.stringify(call.namespace.slice(0, 80))}`,
      400,
      'Invalid',
      false,
      undefined,
    );
  }
}

function parseObject<T>(schema: z.ZodType<T>, value: unknown, call: CallDescription): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new KubeApiError(
      `${call.verb} ${call.resource}: unexpected response shape: ${parsed.error.issues[0]?.message ?? ''}`,
      502,
      'InvalidResponse',
      false,
      undefined,
    );
  }
  return parsed.data;
}

/**
 * A list answer whose envelope cannot be read fails as a whole; an item that cannot be read is
 * skipped with its reason and the rest of the page is used (one pod that anyone may create must
 * not make every list holding it fail).
 */
function parsePage<T>(schema: z.ZodType<T>, value: unknown, call: CallDescription): Page<T> {
  const list = parseObject(ListBody, value, call);
  const items: T[] = [];
  const skipped: SkippedItem[] = [];
  for (const item of list.items) {
    const parsed = schema.safeParse(item);
    if (parsed.success) items.push(parsed.data);
    else skipped.push({ name: itemName(item), reason: describeIssue(parsed.error.issues[0]) });
  }
  const token = list.metadata?._continue;
  return { items, skipped, continueToken: token === null || token === undefined || token === '' ? undefined : token };
}

const ItemName = z.looseObject({ metadata: z.looseObject({ name: z.string() }) });

function itemName(item: unknown): string | undefined {
  const named = ItemName.safeParse(item);
  return named.success ? named.data.metadata.name.slice(0, 253) : undefined;
}

function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  if (issue === undefined) return 'unreadable item';
  return `${issue.path.map(String).join('.').slice(0, 120)}: ${issue.message.slice(0, 200)}`;
}
