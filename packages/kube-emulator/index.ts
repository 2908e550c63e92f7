/**
 * A Kubernetes API-server emulator for tests: core/v1 pods and services over real HTTP,
 * for the real @kubernetes/client-node and kubectl. See README.md for what it implements
 * and every way it differs from a real apiserver.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type * as k8s from '@kubernetes/client-node';
import { type FaultInjector, Faults } from './faults.ts';
import { buildKubeConfig, writeKubeconfigFile } from './kubeconfig.ts';
import { listResource } from './list.ts';
import { Namespaces } from './namespaces.ts';
import { Registry } from './registry.ts';
import { createHandler, type RequestRecord } from './server.ts';
import { STRATEGIES } from './strategy.ts';
import { TokenIssuer } from './tokenreview.ts';
import { clone, type ResourceName } from './types.ts';

export type { Fault, FaultInjector, FaultRule } from './faults.ts';
export type { RequestRecord } from './server.ts';
export { ApiError } from './status.ts';
export { type MintOptions, TokenIssuer } from './tokenreview.ts';

export interface EmulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /**
   * The API server's clock (default: the real one). Everything the emulator dates follows it, as
   * a real apiserver's follow its `time.Now()`: creationTimestamp, deletionTimestamp, tokens'
   * iat/exp and their review, and the `Date` header of every answer (Go's net/http sets it on each
   * response, whole seconds, IMF-fixdate). Tests move it to make time pass for every client at once.
   */
  clock?: () => Date;
}

export interface RequestFilter {
  /** get | list | create | update | patch | delete | deletecollection | watch | discovery | unknown */
  verb?: string;
  /** pods | services | namespaces (subresource requests count under their resource) */
  resource?: string;
}

export interface KubeEmulator {
  readonly url: string;
  /** A KubeConfig (loadFromOptions) for client-node: this URL, a bearer token, namespace "default". */
  kubeConfig(): k8s.KubeConfig;
  /** A kubeconfig file usable by kubectl --kubeconfig and KubeConfig.loadFromFile. */
  writeKubeconfig(path: string): void;

  // Direct, synchronous store access: no HTTP, not counted in `requests`.
  /** Insert a Pod or Service as if created through the API (uid, resourceVersion, defaults, clusterIP,
   * validation, GC) but keeping its status and, when given, metadata.uid and creationTimestamp. */
  seed(obj: object): object;
  getObject(resource: ResourceName, namespace: string, name: string): Record<string, unknown> | undefined;
  listObjects(resource: ResourceName, namespace?: string, labelSelector?: string): Record<string, unknown>[];
  /** Like an API DELETE with Background propagation, including the owner garbage-collection cascade. Throws ApiError (404) when absent. */
  deleteObject(resource: ResourceName, namespace: string, name: string): void;
  /** JSON merge patch applied to the whole object, status included (as the kubelet/controllers would via /status). */
  patchObject(resource: ResourceName, namespace: string, name: string, mergePatch: object): Record<string, unknown>;
  /** Until the returned function runs, deleted owners' dependents stay (a real cluster's GC is asynchronous); then the held cascades run. */
  holdGarbageCollection(): () => void;

  /** Every HTTP request that reached the API handlers, in arrival order (faulted ones too; status 0 = reset/hang). */
  readonly requests: ReadonlyArray<RequestRecord>;
  resetRequests(): void;
  countRequests(filter?: RequestFilter): number;

  readonly faults: FaultInjector;
  /** ServiceAccount tokens for tests, and what POST /apis/authentication.k8s.io/v1/tokenreviews answered (tokenreview.ts). */
  readonly tokens: TokenIssuer;
  /** down: stop listening and drop every connection (clients get ECONNREFUSED); up: listen again on the same port. */
  setDown(down: boolean): Promise<void>;
  stop(): Promise<void>;
}

export async function startEmulator(opts: EmulatorOptions = {}): Promise<KubeEmulator> {
  const host = opts.host ?? '127.0.0.1';
  const clock = opts.clock ?? (() => new Date());
  const registry = new Registry(clock);
  const namespaces = new Namespaces(registry.store, clock);
  const faults = new Faults();
  const tokens = new TokenIssuer();
  tokens.now = () => clock().getTime();
  const records: RequestRecord[] = [];
  const hung = new Set<ServerResponse>();
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  let port = opts.port ?? 0;
  const hostForUrl = host.includes(':') ? `[${host}]` : host;

  const handler = createHandler({
    registry,
    namespaces,
    faults,
    records,
    serverAddress: () => `${hostForUrl}:${port}`,
    hung,
    timers,
    tokens,
    clock,
  });

  let server: Server | undefined;
  let stopped = false;

  const listen = async (): Promise<void> => {
    const s = createServer(handler);
    s.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, host, () => {
        s.off('error', reject);
        resolve();
      });
    });
    const address = s.address();
    if (address !== null && typeof address === 'object') port = address.port;
    server = s;
  };

  const shutdown = async (): Promise<void> => {
    const s = server;
    server = undefined;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    for (const res of hung) res.destroy();
    hung.clear();
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s !== undefined) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  };

  await listen();
  const url = `http://${hostForUrl}:${port}`;

  return {
    url,
    kubeConfig: () => buildKubeConfig(url),
    writeKubeconfig: (path) => writeKubeconfigFile(path, url),

    seed: (obj) => clone(registry.seed(obj)),
    getObject: (resource, namespace, name) => {
      const obj = registry.store.get(resource, namespace, name);
      return obj === undefined ? undefined : clone(obj);
    },
    listObjects: (resource, namespace, labelSelector) =>
      listResource(registry.store, STRATEGIES[resource], namespace, { labelSelector: labelSelector ?? '' }).items.map((o) => clone(o)),
    deleteObject: (resource, namespace, name) => {
      registry.delete(resource, namespace, name);
    },
    patchObject: (resource, namespace, name, mergePatch) =>
      clone(registry.patch(resource, namespace, name, 'merge', mergePatch, { scope: 'all' })),
    holdGarbageCollection: () => registry.holdGarbageCollection(),

    get requests() {
      return records;
    },
    resetRequests: () => {
      records.length = 0;
    },
    countRequests: (filter = {}) =>
      records.filter(
        (r) => (filter.verb === undefined || r.verb === filter.verb) && (filter.resource === undefined || r.resource === filter.resource),
      ).length,

    faults,
    tokens,
    setDown: async (down) => {
      if (stopped) throw new Error('kube-emulator: setDown after stop()');
      if (down) await shutdown();
      else if (server === undefined) await listen();
    },
    stop: async () => {
      stopped = true;
      await shutdown();
    },
  };
}
