/**
 * Our half of the e2e plane, on a running API server: the objects of our knative/ kustomization
 * that a bare API server serves (ServiceAccounts, Roles, RoleBindings) applied with the admin's
 * token; the function as it ships (its bundle, the Knative Service's env, the token of the
 * ServiceAccount the Service names); the real receive adapter with the env its reconciler would
 * generate and the token of the ServiceAccount the ApiServerSource names; a recording proxy between
 * the two; and a tenant whose ServiceAccount may only create and delete pods.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { NS } from '../../test/support/audited.ts';
import { type RunningAdapter, startAdapter } from '../adapter/adapter.ts';
import {
  type ApiAccess,
  applyObjects,
  createServiceAccountWithRole,
  ensureNamespace,
  serviceAccountToken,
} from '../adapter/kube-access.ts';
import { type RecordedRequest, type RecordingProxy, startRecordingProxy } from '../adapter/recording-proxy.ts';
import { createPod, deletePod } from './spark-pods.ts';
import { startTcpRelay, type TcpRelay } from '../adapter/tcp-relay.ts';
import { adapterBinaries, configuredKustomizations, render, type Rendered, sendPing, type SourceMode } from '../adapter/render.ts';
import { bundleFunction, type FunctionDeployment, functionDeployment, type RunningFunction, startFunction } from '../function/function.ts';
import type { ServiceAccountFiles } from '../function/pod-process.ts';

export interface ClusterEndpoints {
  /** The admin, as the harness reaches the API server. */
  readonly admin: ApiAccess;
  /** The API server as the function and the adapter reach it (their KUBERNETES_SERVICE_HOST/PORT). */
  readonly apiServer: { readonly host: string; readonly port: number };
  /** Where logs of our processes go. */
  readonly logDir: string;
  /** The harness's namespace creation (waits for the default ServiceAccount), when there is one. */
  readonly createNamespace?: (name: string) => Promise<void>;
  readonly createTenant?: (namespace: string, name: string) => Promise<unknown>;
}

export const TENANT = 'e2e-tenant';

export interface Plane {
  readonly mode: SourceMode;
  readonly rendered: Rendered;
  readonly deployment: FunctionDeployment;
  readonly proxy: RecordingProxy;
  /** Between the adapter and the API server: partition() makes the adapter re-list once healed. */
  readonly apiRelay: TcpRelay;
  readonly fn: () => RunningFunction;
  readonly adapter: () => RunningAdapter;
  /** The tenant: may create and delete pods in the namespace, nothing else. */
  readonly tenant: ApiAccess;
  /** Starts the function again (after killFunction), same port; same env, or these overrides instead of the plane's. */
  restartFunction(overrides?: Readonly<Record<string, string>>): Promise<void>;
  /** SIGKILL: what a crashed or evicted function pod does. */
  killFunction(): Promise<void>;
  /** SIGTERM and start again: a rollout of the adapter's Deployment. */
  restartAdapter(): Promise<void>;
  /** One PingSource tick through the proxy, as the mtping adapter sends it. */
  sweep(): Promise<void>;
  stop(): Promise<void>;
}

export interface PlaneOptions {
  readonly mode: SourceMode;
  /** Changes to the function's manifest env (reported). */
  readonly functionOverrides?: Readonly<Record<string, string>>;
  readonly functionPort: number;
  /** Runs after the function is up and before the adapter starts (objects that exist before it). */
  readonly beforeAdapter?: (tenant: ApiAccess) => Promise<void>;
  /**
   * Knative's event-delivery authentication on (`authentication-oidc`): the sender-auth overlay
   * (Resource mode) instead of the base, the sources' OIDC ServiceAccounts and the adapter's token
   * Role as the reconcilers create them, the adapter's K_AUDIENCE/K_OIDC_SERVICE_ACCOUNT, and each
   * sweep with the PingSource's token (e2e/go/render -oidc).
   */
  readonly senderAuth?: boolean;
}

/**
 * Set in every scenario (and reported with the other overrides): `sweep()` stands for one
 * PingSource tick, every 5 minutes in knative/base/pingsource.yaml, and the scenarios send them
 * seconds apart; the function coalesces ticks less than SWEEP_MIN_INTERVAL_MS (30 s by default)
 * after the last sweep's start (functions/executor-service/sweep-gate.ts), so each scenario's
 * sweep would otherwise be answered 2xx and do nothing. testkit/harness.ts sets the same.
 */
const SCENARIO_FUNCTION_ENV: Readonly<Record<string, string>> = { SWEEP_MIN_INTERVAL_MS: '0' };

let bundleDirOnce: Promise<string> | undefined;
let binariesOnce: Promise<{ adapter: string; render: string }> | undefined;

export async function startPlane(cluster: ClusterEndpoints, options: PlaneOptions): Promise<Plane> {
  binariesOnce ??= adapterBinaries();
  bundleDirOnce ??= bundleFunction();
  const [bins, bundleDir] = await Promise.all([binariesOnce, bundleDirOnce]);
  // What is started so far, undone in reverse when a later step fails: a plane starts whole or
  // leaves nothing behind (the proxy's and the relay's listeners, the processes, the tree).
  const started: Array<() => unknown> = [];
  try {
    return await startPlaneSteps(cluster, options, bins, bundleDir, started);
  } catch (error) {
    // The start's error is the one to report; an undo that fails too must not hide it.
    for (const undo of started.reverse())
      await Promise.resolve()
        .then(undo)
        .catch(() => undefined);
    throw error;
  }
}

async function startPlaneSteps(
  cluster: ClusterEndpoints,
  options: PlaneOptions,
  bins: { adapter: string; render: string },
  bundleDir: string,
  started: Array<() => unknown>,
): Promise<Plane> {
  // Rendered from a configured copy of knative/ and spark/ (IMAGE set), removed when the plane stops.
  const tree = configuredKustomizations();
  started.push(tree.remove);
  const senderAuth = options.senderAuth === true;
  if (senderAuth && options.mode !== 'resource') throw new Error('the sender-auth overlay is on the base: Resource mode');
  const kustomization = senderAuth ? tree.senderAuth : tree.dirs[options.mode];
  const fnUrl = `http://127.0.0.1:${options.functionPort}/`;
  const proxy = await startRecordingProxy(fnUrl);
  started.push(proxy.close);
  const rendered = await render(bins.render, kustomization, proxy.url, { oidc: senderAuth });
  const deployment = functionDeployment(rendered);
  if (deployment.namespace !== NS || rendered.adapter.sourceNamespace !== NS) {
    throw new Error(`the kustomization installs into ${deployment.namespace}, the scenarios expect ${NS}`);
  }
  if (cluster.createNamespace !== undefined) await cluster.createNamespace(NS);
  else await ensureNamespace(cluster.admin, NS);
  await applyObjects(cluster.admin, [...rendered.objects, ...(rendered.oidc?.objects ?? [])]);
  // The tenant: a ServiceAccount that may only create and delete pods (the harness's, when it runs).
  if (cluster.createTenant !== undefined) await cluster.createTenant(NS, TENANT);
  else
    await createServiceAccountWithRole(cluster.admin, NS, TENANT, [{ apiGroups: [''], resources: ['pods'], verbs: ['create', 'delete'] }]);
  const files = async (sa: string): Promise<ServiceAccountFiles> => ({
    token: await serviceAccountToken(cluster.admin, NS, sa),
    caPem: cluster.admin.caPem,
    namespace: NS,
  });
  const [fnSa, adapterSa, tenantToken] = await Promise.all([
    files(deployment.serviceAccountName),
    files(rendered.adapter.serviceAccountName),
    serviceAccountToken(cluster.admin, NS, TENANT),
  ]);
  mkdirSync(cluster.logDir, { recursive: true });
  const apiRelay = await startTcpRelay(cluster.apiServer.host, cluster.apiServer.port);
  started.push(apiRelay.close);
  let fnRun = 0;
  let adapterRun = 0;
  const launchFunction = (overrides = options.functionOverrides): Promise<RunningFunction> =>
    startFunction({
      bundleDir,
      deployment,
      serviceAccount: fnSa,
      apiServer: cluster.apiServer,
      port: options.functionPort,
      overrides: { ...SCENARIO_FUNCTION_ENV, ...overrides },
      logFile: join(cluster.logDir, `function-${options.mode}-${fnRun++}.log`),
    });
  const launchAdapter = (): Promise<RunningAdapter> =>
    startAdapter({
      binary: bins.adapter,
      rendered,
      serviceAccount: adapterSa,
      apiServer: { host: '127.0.0.1', port: apiRelay.port },
      logFile: join(cluster.logDir, `adapter-${options.mode}-${adapterRun++}.log`),
    });
  const tenant: ApiAccess = { server: cluster.admin.server, caPem: cluster.admin.caPem, token: tenantToken };
  let fn = await launchFunction();
  started.push(() => fn.process.stop(5_000));
  await options.beforeAdapter?.(tenant);
  let adapter = await launchAdapter();
  await adapterWatching(cluster.admin, proxy);
  return {
    mode: options.mode,
    rendered,
    deployment,
    proxy,
    apiRelay,
    fn: () => fn,
    adapter: () => adapter,
    tenant,
    restartFunction: async (overrides) => {
      fn = await launchFunction(overrides);
    },
    killFunction: async () => {
      await fn.process.kill();
    },
    restartAdapter: async () => {
      await adapter.process.stop(10_000);
      adapter = await launchAdapter();
      await adapterWatching(cluster.admin, proxy);
    },
    sweep: async () => {
      // With OIDC the mtping adapter sends the PingSource's token for the sink's audience (TokenRequest, 1 h).
      const ping = rendered.oidc?.senders.find((x) => x.kind === 'PingSource');
      const token =
        ping === undefined
          ? undefined
          : await serviceAccountToken(cluster.admin, ping.namespace, ping.serviceAccount, 3600, [ping.audience]);
      await sendPing(bins.render, kustomization, proxy.url, token);
    },
    stop: async () => {
      await Promise.all([adapter.process.stop(5_000), fn.process.stop(5_000)]);
      await proxy.close();
      await apiRelay.close();
      tree.remove();
    },
  };
}

let probes = 0;

/**
 * Resolves once the adapter's watch is running: a probe pod created now reaches the function, and
 * so does its deletion. The adapter's start log line comes before its reflector lists; a pod
 * created between the two is folded into that first list, which the adapter never sends
 * (knative/eventing pkg/adapter/apiserver: Replace sends nothing) — scenarios that create pods
 * right after the plane starts would lose their first events to that race. The probe itself can
 * fall into it, so a new probe is created every second until one's add arrives (30 s at most).
 * A probe pod is a Spark "driver" without an application id (the function ignores it without an
 * API request), bound to a node no kubelet runs; all of them are deleted at the end.
 */
async function adapterWatching(admin: ApiAccess, proxy: RecordingProxy): Promise<void> {
  const about = (name: string, type: RegExp) => (r: RecordedRequest) =>
    r.headers['ce-subject']?.endsWith(`/pods/${name}`) === true && type.test(r.headers['ce-type'] ?? '');
  const created: string[] = [];
  const deadline = Date.now() + 30_000;
  let seen: string | undefined;
  try {
    while (seen === undefined) {
      if (Date.now() > deadline) throw new Error(`the adapter sent no event for its watch probes ${created.join(', ')} within 30 s`);
      const name = `adapter-watch-probe-${process.pid}-${probes++}`;
      await createPod(admin, NS, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: NS, labels: { 'spark-role': 'driver' } },
        spec: {
          nodeName: 'no-kubelet-runs-this-node',
          automountServiceAccountToken: false,
          containers: [{ name: 'probe', image: 'none', command: ['true'] }],
        },
      });
      created.push(name);
      seen = await proxy
        .waitFor((r) => created.some((n) => about(n, /\.add$/)(r)), 1_000, 'a watch probe’s add')
        .then((r) => created.find((n) => about(n, /\.add$/)(r)))
        .catch(() => undefined);
    }
  } finally {
    for (const name of created) await deletePod(admin, NS, name, 0);
  }
  await proxy.waitFor(about(seen, /\.delete$/), 30_000, `the adapter's delete event for its watch probe ${seen}`);
}
