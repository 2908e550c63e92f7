/**
 * startCluster(): a real Kubernetes v1.34.4 control plane and node, as processes in a network
 * namespace of its own, for the e2e scenarios (see e2e/README.md for the API and what is real).
 *
 * Layout of a run `sxs-e2e-<pid>`:
 *   node netns `sxs-e2e-<pid>-node`: lo with the node IP 10.0.0.1/32 and a route for the Service
 *     CIDR 10.96.0.0/16 (so locally originated connects reach kube-proxy's DNAT), ip_forward=1; etcd, kube-apiserver (10.0.0.1:6443), kube-controller-manager, kube-scheduler, the
 *     process kubelet, kube-proxy and CoreDNS (10.0.0.1:53) all run in it.
 *   pod netns `sxs-e2e-<pid>-<uid>` (made by the process kubelet): eth0 10.244.0.N/32, default
 *     route via the node IP; the node side has a veth and a /32 route per pod.
 *   the harness's own namespace gets nothing: an `nsforward` process forwards 127.0.0.1 ports to
 *     the node's API server and health endpoints.
 * Teardown (stop(), a failure during start, SIGINT/SIGTERM, process exit) is synchronous and
 * leaves no process, namespace, mount or rule; `verifyClean()` checks it.
 */
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { type ApiClient, apiClient, ensure } from './api.ts';
import { COMPONENT_IDENTITIES, type ComponentIdentity, type ClusterPki, createPki, writeKubeconfig } from './pki.ts';
import { checkPrerequisites } from './prerequisites.ts';
import { type ManagedProcess, type ProcessSpec, startProcess } from './process.ts';
import { destroyNetns, isAlive, killQuietly, mountsMentioning, netnsNames, run, runOrThrow, sleep, sleepSync } from './sys.ts';

const E2E_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

export const NODE_NAME = 'node1';
export const NODE_IP = '10.0.0.1';
export const SERVICE_CIDR = '10.96.0.0/16';
/** ClusterIP of the `kubernetes` Service: the first address of the Service CIDR. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
/** ClusterIP of kube-system/kube-dns, the pods' nameserver (as kubelet --cluster-dns). */
export const CLUSTER_DNS_IP = '10.96.0.10';
export const CLUSTER_CIDR = '10.244.0.0/16';
export const POD_CIDR = '10.244.0.0/24';
export const CLUSTER_DOMAIN = 'cluster.local';

const PORTS = {
  etcd: 2379,
  etcdPeer: 2380,
  apiserver: 6443,
  kcm: 10257,
  scheduler: 10259,
  proxyHealth: 10256,
  corednsReady: 8181,
  corednsHealth: 18080,
} as const;
const API_NODE_URL = `https://${NODE_IP}:${PORTS.apiserver}`;

/** Controllers kube-controller-manager runs (names from its --controllers help at v1.34.4). */
export const CONTROLLERS = [
  'garbage-collector-controller',
  'endpointslice-controller',
  'endpointslice-mirroring-controller',
  'endpoints-controller',
  'serviceaccount-controller',
  'namespace-controller',
  'resourcequota-controller',
  'root-ca-certificate-publisher-controller',
  'pod-garbage-collector-controller',
  'replicaset-controller',
  'deployment-controller',
  'job-controller',
  'ttl-after-finished-controller',
  'disruption-controller',
  'service-cidr-controller',
  'clusterrole-aggregation-controller',
] as const;

export type ProxyMode = 'iptables' | 'nftables' | 'none';

export interface ClusterOptions {
  /** kube-proxy mode; 'none' runs no kube-proxy (and pods use CoreDNS at the node IP). Default iptables. */
  proxyMode?: ProxyMode;
  /** Run kube-scheduler (default true). Without it pods must set spec.nodeName: node1. */
  scheduler?: boolean;
  /** Run the process kubelet (default true). */
  kubelet?: boolean;
  /** Run CoreDNS (default true; needs the kubelet for the pods' resolv.conf to matter). */
  dns?: boolean;
  /** Where configs, data and logs go (default a fresh dir under the OS tmpdir). */
  workDir?: string;
  /** Keep the work dir (logs) after stop (default: keep only when start failed). */
  keepWorkDir?: boolean;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  /** Build missing binaries with e2e/build.sh (default true). */
  build?: boolean;
  /** Bound on each component's health wait (default 90 s). */
  componentTimeoutMs?: number;
}

export interface PodRuntimeInfo {
  namespace: string;
  name: string;
  uid: string;
  netns: string;
  podIP: string;
  /** Directory with one `<container>.log` per container. */
  logDir: string;
}

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CleanReport {
  clean: boolean;
  leftovers: string[];
}

export interface Cluster {
  readonly runId: string;
  readonly nodeNetns: string;
  readonly nodeName: string;
  readonly nodeIP: string;
  readonly serviceCIDR: string;
  readonly podCIDR: string;
  readonly clusterDNS: string;
  readonly clusterDomain: string;
  readonly workDir: string;
  /** API server URL as seen from the node namespace and from pods. */
  readonly apiServerNodeURL: string;
  /** API server URL as seen from the harness's namespace (forwarded). */
  readonly apiServerHostURL: string;
  readonly caCertPem: string;
  readonly caCertFile: string;
  /** Bearer tokens of the static identities (admin = system:masters). */
  readonly tokens: Readonly<Record<ComponentIdentity, string>>;
  /** Admin JSON client (via the forwarded port). */
  readonly api: ApiClient;
  readonly components: ReadonlyMap<string, ManagedProcess>;
  /** Milliseconds from start to each component being healthy, and `total`. */
  readonly timings: Readonly<Record<string, number>>;
  apiAs(token: string): ApiClient;
  /** A @kubernetes/client-node KubeConfig for a token (default admin), reaching the forwarded port. */
  kubeConfig(token?: string): KubeConfig;
  /** Write a kubeconfig file for a token; `where` = 'host' (forwarded port) or 'node' (node netns / pods). */
  kubeconfigFile(name: string, token: string, where: 'host' | 'node'): string;
  /** A token of a ServiceAccount from the TokenRequest API (the way a kubelet gets one). */
  serviceAccountToken(namespace: string, name: string, opts?: { audiences?: string[]; expirationSeconds?: number }): Promise<string>;
  /** Namespace, created if absent, once its `default` ServiceAccount exists (pods need it). */
  createNamespace(name: string): Promise<void>;
  /** A ServiceAccount that may only create and delete pods in `namespace`, and its token. */
  createTenant(namespace: string, name: string): Promise<{ serviceAccount: string; token: string }>;
  /** Where the process kubelet runs a pod (waits up to timeoutMs for it to be set up). */
  podRuntime(namespace: string, name: string, timeoutMs?: number): Promise<PodRuntimeInfo>;
  /** Run a command inside a pod's network namespace (with its resolv.conf), bounded by timeoutMs. */
  execInPod(namespace: string, name: string, argv: readonly string[], opts?: { timeoutMs?: number; input?: string }): Promise<ExecResult>;
  /** Run a command inside the node's network namespace. */
  execInNode(argv: readonly string[], opts?: { timeoutMs?: number; input?: string }): Promise<ExecResult>;
  /** Forward more ports of the node namespace to the harness's loopback: target host:port -> 127.0.0.1:port. */
  forward(targets: readonly string[]): Promise<Record<string, string>>;
  /** Stop everything and remove all traces; throws if anything is left (listing it). */
  stop(): Promise<CleanReport>;
}

class StartError extends Error {}

interface RunState {
  runId: string;
  nodeNetns: string;
  workDir: string;
  processes: ManagedProcess[];
  stopped: boolean;
  keepWorkDir: boolean;
  log: (line: string) => void;
}

const ManifestSchema = z.object({
  nsforward: z.string(),
  etcd: z.string(),
  kube: z.string(),
  kubelet: z.string().optional(),
  coredns: z.string().optional(),
});
type Binaries = z.infer<typeof ManifestSchema>;

/** Binaries from the build cache (building missing ones unless build=false). */
export function resolveBinaries(
  build: boolean,
  log: (l: string) => void,
  components: readonly string[] = ['nsforward', 'etcd', 'kube', 'kubelet', 'coredns'],
): Binaries {
  const script = join(E2E_DIR, 'build.sh');
  const args = [...(build ? [] : ['--paths']), ...components];
  if (build) log('e2e/build.sh: checking the build cache (a cold build of Kubernetes takes tens of minutes on 2 cores)');
  // Progress (stderr) goes to the console: a cold build runs for tens of minutes.
  const r = spawnSync(script, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 3 * 60 * 60 * 1000 });
  const last = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  if (r.status !== 0)
    throw new StartError(
      `e2e/build.sh ${args.join(' ')} failed (exit ${r.status ?? r.signal}); its messages are above${build ? '' : ' (run `npm run e2e:build`)'}`,
    );
  return ManifestSchema.parse(JSON.parse(last));
}

const required = (path: string | undefined, what: string): string => {
  if (path === undefined) throw new StartError(`no ${what} binary`);
  return path;
};

const RUN_PREFIX = 'sxs-e2e-';

/**
 * Remove what runs of dead harness processes left behind (a harness killed with SIGKILL cannot
 * clean up): namespaces and /etc/netns dirs named sxs-e2e-<pid>-… whose pid is gone.
 */
export function sweepStaleRuns(log: (l: string) => void = () => {}): string[] {
  const removed: string[] = [];
  const stale = (name: string): boolean => {
    const pid = Number(/^sxs-e2e-(\d+)-/.exec(name)?.[1] ?? NaN);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && !isAlive(pid);
  };
  // Pod namespaces first, the node namespace (holding the components) last.
  const names = netnsNames()
    .filter(stale)
    .sort((a, b) => Number(a.endsWith('-node')) - Number(b.endsWith('-node')));
  for (const name of names) {
    destroyNetns(name);
    removed.push(`netns ${name}`);
  }
  if (existsSync('/etc/netns')) {
    for (const d of readdirSync('/etc/netns')) {
      if (d.startsWith(RUN_PREFIX) && stale(d)) {
        rmSync(join('/etc/netns', d), { recursive: true, force: true });
        removed.push(`/etc/netns/${d}`);
      }
    }
  }
  for (const d of readdirSync(tmpdir())) {
    if (d.startsWith(RUN_PREFIX) && stale(`${d}-`)) {
      rmSync(join(tmpdir(), d), { recursive: true, force: true });
      removed.push(join(tmpdir(), d));
    }
  }
  if (removed.length > 0) log(`removed leftovers of dead runs: ${removed.join(', ')}`);
  return removed;
}

function createNodeNetns(name: string): void {
  const ip = (args: string[]): string => runOrThrow('ip', args);
  ip(['netns', 'add', name]);
  const inNs = (args: string[]): string => ip(['-n', name, ...args]);
  // The node IP lives on lo: this machine's kernel has no dummy interfaces (CONFIG_DUMMY unset),
  // and an address on lo is as local as one on a dummy. The Service CIDR gets a route too, so a
  // connect from the node namespace passes routing and reaches kube-proxy's OUTPUT DNAT.
  inNs(['link', 'set', 'lo', 'up']);
  inNs(['addr', 'add', `${NODE_IP}/32`, 'dev', 'lo']);
  inNs(['route', 'add', SERVICE_CIDR, 'dev', 'lo']);
  runOrThrow('ip', ['netns', 'exec', name, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
}

/** Everything the run made, removed; synchronous, idempotent. */
function teardownSync(state: RunState, reason: string): void {
  if (state.stopped) return;
  state.stopped = true;
  state.log(`tearing down ${state.runId} (${reason})`);
  // Reverse start order: kube-proxy and CoreDNS first, etcd and the forwarder last.
  for (const p of [...state.processes].reverse()) {
    const how = p.stopSync();
    if (how === 'killed') state.log(`${p.name} did not stop on SIGTERM; killed`);
  }
  // Whatever is still in a namespace of this run (pods the kubelet could not stop) goes with it.
  const mine = netnsNames().filter((n) => n.startsWith(`${state.runId}-`));
  for (const n of mine.filter((n) => n !== state.nodeNetns)) destroyNetns(n);
  if (mine.includes(state.nodeNetns)) destroyNetns(state.nodeNetns);
  if (existsSync('/etc/netns')) {
    for (const d of readdirSync('/etc/netns'))
      if (d.startsWith(`${state.runId}-`)) rmSync(join('/etc/netns', d), { recursive: true, force: true });
  }
  if (!state.keepWorkDir) rmSync(state.workDir, { recursive: true, force: true });
  else state.log(`kept ${state.workDir} (logs in ${join(state.workDir, 'logs')})`);
}

/** What of a run is still there: namespaces, /etc/netns dirs, processes, mounts. */
export function leftoversOf(runId: string, pids: readonly number[]): string[] {
  const left: string[] = [];
  for (const n of netnsNames()) if (n.startsWith(`${runId}-`)) left.push(`netns ${n}`);
  if (existsSync('/etc/netns')) for (const d of readdirSync('/etc/netns')) if (d.startsWith(`${runId}-`)) left.push(`/etc/netns/${d}`);
  for (const pid of pids) if (isAlive(pid)) left.push(`process ${pid}`);
  for (const m of mountsMentioning(runId)) left.push(`mount ${m}`);
  return left;
}

/** Lines of `iptables-save`/`nft list ruleset` in the harness's namespace mentioning KUBE (kube-proxy's chains). */
export function hostKubeRules(): string[] {
  const lines: string[] = [];
  for (const [cmd, args] of [
    ['iptables-save', []],
    ['nft', ['list', 'ruleset']],
  ] as const) {
    const r = run(cmd, args);
    if (r.ok) lines.push(...r.stdout.split('\n').filter((l) => /kube/i.test(l)));
  }
  return lines;
}

function httpGetStatus(
  url: string,
  opts: { ca?: string; token?: string; insecure?: boolean } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(
      {
        host: u.hostname,
        port: u.port,
        path: `${u.pathname}${u.search}`,
        method: 'GET',
        timeout: 3000,
        ...(u.protocol === 'https:' ? { ca: opts.ca, rejectUnauthorized: opts.insecure !== true } : {}),
        headers: opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {},
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', (e) => resolve({ status: 0, body: e.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, body: e.message }));
    req.end();
  });
}

async function waitFor(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  proc?: ManagedProcess,
  lastError?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc !== undefined && !proc.running()) {
      throw new StartError(`${proc.name} exited while waiting for ${what}; last lines of ${proc.logFile}:\n${proc.logTail()}`);
    }
    if (await check()) return;
    if (Date.now() > deadline) {
      const detail = lastError?.() ?? '';
      throw new StartError(
        `timed out after ${timeoutMs} ms waiting for ${what}${detail !== '' ? ` (${detail})` : ''}${proc !== undefined ? `; last lines of ${proc.logFile}:\n${proc.logTail()}` : ''}`,
      );
    }
    await sleep(150);
  }
}

function spawnCollect(cmd: string, args: readonly string[], opts: { timeoutMs?: number; input?: string }): Promise<ExecResult> {
  return new Promise((resolve) => {
    const spawnOpts: SpawnOptions = { stdio: ['pipe', 'pipe', 'pipe'] };
    const child = spawn(cmd, args, spawnOpts);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: null, signal: null, stdout, stderr: stderr + e.message });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    // A command that exits without reading its stdin (most do) closes the pipe: EPIPE on this end
    // is no failure of the command, whose exit status is what counts.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(opts.input ?? '');
  });
}

/** Starts nsforward; resolves with its {target: 127.0.0.1:port} map. */
async function startForwarder(state: RunState, binary: string, name: string, targets: readonly string[]): Promise<Record<string, string>> {
  const logFile = join(state.workDir, 'logs', `${name}.log`);
  const child = spawn(binary, ['--netns', `/run/netns/${state.nodeNetns}`, ...targets], {
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) throw new StartError('could not start nsforward');
  let errText = '';
  child.stderr?.on('data', (c: Buffer) => {
    errText += c.toString('utf8');
    writeFileSync(logFile, errText);
  });
  const proc: ManagedProcess = {
    name,
    pid,
    logFile,
    child,
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    running: () => child.exitCode === null && child.signalCode === null && isAlive(pid),
    logTail: () => errText,
    stopSync: () => {
      killQuietly(pid, 'SIGTERM');
      for (let i = 0; i < 50 && isAlive(pid); i++) sleepSync(20);
      if (isAlive(pid)) killQuietly(pid, 'SIGKILL');
      return 'terminated';
    },
  };
  state.processes.push(proc);
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    child.once('exit', () => reject(new StartError(`nsforward exited: ${errText}`)));
    setTimeout(() => reject(new StartError(`nsforward printed no ports within 10 s: ${errText}`)), 10_000);
  });
  return z.record(z.string(), z.string()).parse(JSON.parse(line));
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const t0 = Date.now();
  const log = options.log ?? ((l: string) => process.stderr.write(`[e2e-cluster] ${l}\n`));
  const proxyMode = options.proxyMode ?? 'iptables';
  const withScheduler = options.scheduler ?? true;
  const withKubelet = options.kubelet ?? true;
  const withDns = options.dns ?? true;
  const componentTimeoutMs = options.componentTimeoutMs ?? 90_000;

  const pre = checkPrerequisites({ proxyMode });
  if (!pre.ok) throw new StartError(`cannot run the e2e cluster on this machine; missing:\n  - ${pre.missing.join('\n  - ')}`);
  sweepStaleRuns(log);
  const bins = resolveBinaries(options.build ?? true, log, [
    'nsforward',
    'etcd',
    'kube',
    ...(withKubelet ? ['kubelet'] : []),
    ...(withDns ? ['coredns'] : []),
  ]);
  const timings: Record<string, number> = { binaries: Date.now() - t0 };
  const tStart = Date.now();

  const runId = `${RUN_PREFIX}${process.pid}`;
  for (const n of netnsNames())
    if (n.startsWith(`${runId}-`))
      throw new StartError(`a cluster of this process is already running (netns ${n}); one startCluster() per process`);
  const workDir = options.workDir ?? mkdtempSync(join(tmpdir(), `${runId}-`));
  for (const d of ['logs', 'pki', 'etcd', 'config', 'kubelet']) mkdirSync(join(workDir, d), { recursive: true });
  const state: RunState = {
    runId,
    nodeNetns: `${runId}-node`,
    workDir,
    processes: [],
    stopped: false,
    keepWorkDir: options.keepWorkDir ?? false,
    log,
  };

  const onSignal = (signal: NodeJS.Signals): void => {
    teardownSync(state, signal);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  const onExit = (): void => teardownSync(state, 'process exit');
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', onExit);
  const unhook = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', onExit);
  };

  try {
    createNodeNetns(state.nodeNetns);
    const pki: ClusterPki = createPki(join(workDir, 'pki'), {
      ips: [NODE_IP, KUBERNETES_SERVICE_IP, '127.0.0.1'],
      dns: ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', `kubernetes.default.svc.${CLUSTER_DOMAIN}`, 'localhost'],
    });
    const cfg = (f: string): string => join(workDir, 'config', f);
    const kubeconfigFor = (who: ComponentIdentity): string =>
      writeKubeconfig(cfg(`${who}.kubeconfig`), API_NODE_URL, pki.caCertPem, pki.tokens[who], COMPONENT_IDENTITIES[who].user);

    const fwd = await startForwarder(state, bins.nsforward, 'nsforward', [
      `${NODE_IP}:${PORTS.apiserver}`,
      `127.0.0.1:${PORTS.etcd}`,
      `127.0.0.1:${PORTS.kcm}`,
      `127.0.0.1:${PORTS.scheduler}`,
      `127.0.0.1:${PORTS.proxyHealth}`,
      `127.0.0.1:${PORTS.corednsReady}`,
    ]);
    const hostPort = (target: string): string => {
      const v = fwd[target];
      if (v === undefined) throw new Error(`not forwarded: ${target}`);
      return v;
    };
    const apiHostURL = `https://${hostPort(`${NODE_IP}:${PORTS.apiserver}`)}`;
    const logDir = join(workDir, 'logs');
    const start = (spec: ProcessSpec): ManagedProcess => {
      const p = startProcess({ netns: state.nodeNetns, ...spec }, logDir);
      state.processes.push(p);
      return p;
    };
    const mark = (name: string): void => {
      timings[name] = Date.now() - tStart;
      log(`${name} healthy after ${timings[name]} ms`);
    };

    // etcd (v3.6; kube-apiserver's storage). fsync off: a test cluster's data need not survive a crash.
    const etcd = start({
      name: 'etcd',
      command: bins.etcd,
      args: [
        '--name=e2e',
        `--data-dir=${join(workDir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${PORTS.etcd}`,
        `--advertise-client-urls=http://127.0.0.1:${PORTS.etcd}`,
        `--listen-peer-urls=http://127.0.0.1:${PORTS.etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${PORTS.etcdPeer}`,
        `--initial-cluster=e2e=http://127.0.0.1:${PORTS.etcdPeer}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
    });
    await waitFor(
      'etcd /health',
      componentTimeoutMs,
      async () => {
        const r = await httpGetStatus(`http://${hostPort(`127.0.0.1:${PORTS.etcd}`)}/health`);
        return r.status === 200 && r.body.includes('"true"');
      },
      etcd,
    );
    mark('etcd');

    // kube-apiserver: token file + Node,RBAC; ServiceAccount tokens signed with the run's key.
    // TaintNodesByCondition is off: it taints every new Node not-ready and only the node-lifecycle
    // controller (not run: it would evict on a missed lease) takes the taint off.
    const apiserver = start({
      name: 'kube-apiserver',
      command: bins.kube,
      args: [
        'kube-apiserver',
        `--etcd-servers=http://127.0.0.1:${PORTS.etcd}`,
        '--bind-address=0.0.0.0',
        `--secure-port=${PORTS.apiserver}`,
        `--advertise-address=${NODE_IP}`,
        `--tls-cert-file=${pki.servingCert}`,
        `--tls-private-key-file=${pki.servingKey}`,
        `--client-ca-file=${pki.caCert}`,
        `--token-auth-file=${pki.tokenAuthFile}`,
        '--anonymous-auth=false',
        '--authorization-mode=Node,RBAC',
        `--service-account-issuer=https://kubernetes.default.svc.${CLUSTER_DOMAIN}`,
        `--service-account-key-file=${pki.serviceAccountPublicKey}`,
        `--service-account-signing-key-file=${pki.serviceAccountPrivateKey}`,
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        '--enable-admission-plugins=NodeRestriction',
        '--disable-admission-plugins=TaintNodesByCondition',
        '--allow-privileged=true',
        '--profiling=false',
        `--cert-dir=${join(workDir, 'pki', 'apiserver-certs')}`,
        '--endpoint-reconciler-type=lease',
      ],
    });
    const adminApi = apiClient(apiHostURL, pki.caCertPem, pki.tokens.admin);
    let lastReadyz = '';
    await waitFor(
      'kube-apiserver /readyz',
      componentTimeoutMs,
      async () => {
        const r = await httpGetStatus(`${apiHostURL}/readyz`, { ca: pki.caCertPem, token: pki.tokens.admin });
        lastReadyz = `${r.status} ${r.body
          .split('\n')
          .filter((l) => l.includes('failed'))
          .join('; ')}`;
        return r.status === 200;
      },
      apiserver,
      () => `last /readyz: ${lastReadyz}`,
    );
    mark('kube-apiserver');

    await bootstrapObjects(adminApi, proxyMode !== 'none');

    // kube-controller-manager: each controller under its own ServiceAccount (TokenRequest), as kubeadm runs it.
    const kcm = start({
      name: 'kube-controller-manager',
      command: bins.kube,
      args: [
        'kube-controller-manager',
        `--kubeconfig=${kubeconfigFor('controllerManager')}`,
        `--authentication-kubeconfig=${kubeconfigFor('controllerManager')}`,
        `--authorization-kubeconfig=${kubeconfigFor('controllerManager')}`,
        // No front proxy: do not look up the request-header CA (kube-system/extension-apiserver-authentication).
        '--authentication-skip-lookup=true',
        '--bind-address=127.0.0.1',
        `--secure-port=${PORTS.kcm}`,
        `--cert-dir=${join(workDir, 'pki', 'kcm-certs')}`,
        '--leader-elect=false',
        '--use-service-account-credentials=true',
        `--root-ca-file=${pki.caCert}`,
        `--service-account-private-key-file=${pki.serviceAccountPrivateKey}`,
        `--controllers=${CONTROLLERS.join(',')}`,
        `--cluster-cidr=${CLUSTER_CIDR}`,
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        '--profiling=false',
      ],
    });

    let kubelet: ManagedProcess | undefined;
    if (withKubelet) {
      kubelet = start({
        name: 'process-kubelet',
        command: required(bins.kubelet, 'process-kubelet'),
        stopGraceMs: 40_000,
        args: [
          `--kubeconfig=${kubeconfigFor('kubelet')}`,
          `--node-name=${NODE_NAME}`,
          `--node-ip=${NODE_IP}`,
          `--pod-cidr=${POD_CIDR}`,
          `--netns-prefix=${runId}-`,
          `--state-dir=${join(workDir, 'kubelet')}`,
          `--cluster-dns=${proxyMode !== 'none' ? CLUSTER_DNS_IP : NODE_IP}`,
          `--cluster-domain=${CLUSTER_DOMAIN}`,
        ],
      });
    }
    let scheduler: ManagedProcess | undefined;
    if (withScheduler) {
      writeFileSync(
        cfg('scheduler.json'),
        JSON.stringify({
          apiVersion: 'kubescheduler.config.k8s.io/v1',
          kind: 'KubeSchedulerConfiguration',
          clientConnection: { kubeconfig: kubeconfigFor('scheduler') },
          leaderElection: { leaderElect: false },
        }),
      );
      scheduler = start({
        name: 'kube-scheduler',
        command: bins.kube,
        args: [
          'kube-scheduler',
          `--config=${cfg('scheduler.json')}`,
          `--authentication-kubeconfig=${kubeconfigFor('scheduler')}`,
          `--authorization-kubeconfig=${kubeconfigFor('scheduler')}`,
          '--authentication-skip-lookup=true',
          '--bind-address=127.0.0.1',
          `--secure-port=${PORTS.scheduler}`,
          `--cert-dir=${join(workDir, 'pki', 'scheduler-certs')}`,
        ],
      });
    }
    let coredns: ManagedProcess | undefined;
    if (withDns) {
      writeFileSync(
        cfg('Corefile'),
        [
          `.:53 {`,
          `    bind ${NODE_IP}`,
          '    errors',
          `    health 127.0.0.1:${PORTS.corednsHealth}`,
          `    ready 127.0.0.1:${PORTS.corednsReady}`,
          `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
          `        kubeconfig ${kubeconfigFor('coredns')} e2e`,
          '        pods insecure',
          '        fallthrough in-addr.arpa ip6.arpa',
          '        ttl 30',
          '    }',
          // As kubeadm v1.34 writes it (cmd/kubeadm/app/phases/addons/dns/manifests.go; since v1.32,
          // kubernetes#128359): the cache skips the cluster domain, whose answers the kubernetes
          // plugin serves from its informers. Older kubeadm Corefiles cached them for the ttl (30 s),
          // NXDOMAIN included — see docs/executor-recipe.md on the DNS wait.
          `    cache 30 {`,
          `        disable success ${CLUSTER_DOMAIN}`,
          `        disable denial ${CLUSTER_DOMAIN}`,
          '    }',
          '    loadbalance',
          '}',
          '',
        ].join('\n'),
      );
      coredns = start({ name: 'coredns', command: required(bins.coredns, 'coredns'), args: ['-conf', cfg('Corefile')] });
    }

    await waitFor(
      'kube-controller-manager /healthz',
      componentTimeoutMs,
      async () => {
        const r = await httpGetStatus(`https://${hostPort(`127.0.0.1:${PORTS.kcm}`)}/healthz`, { insecure: true });
        return r.status === 200;
      },
      kcm,
    );
    mark('kube-controller-manager');
    await waitFor(
      'ServiceAccount default/default (serviceaccount-controller)',
      componentTimeoutMs,
      async () => {
        return (await adminApi.raw('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status === 200;
      },
      kcm,
    );
    mark('default-serviceaccount');

    if (scheduler !== undefined) {
      const s = scheduler;
      await waitFor(
        'kube-scheduler /healthz',
        componentTimeoutMs,
        async () => {
          const r = await httpGetStatus(`https://${hostPort(`127.0.0.1:${PORTS.scheduler}`)}/healthz`, { insecure: true });
          return r.status === 200;
        },
        s,
      );
      mark('kube-scheduler');
    }
    if (kubelet !== undefined) {
      await waitFor(
        `Node ${NODE_NAME} Ready (process kubelet)`,
        componentTimeoutMs,
        async () => {
          const r = await adminApi.raw('GET', `/api/v1/nodes/${NODE_NAME}`);
          if (r.status !== 200) return false;
          const node = r.body as { status?: { conditions?: { type: string; status: string }[] } };
          return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
        },
        kubelet,
      );
      mark('process-kubelet');
    }
    if (proxyMode !== 'none') {
      // kube-proxy after the Node exists: it reads the node IP from it and otherwise backs off ~1 min
      // (cmd/kube-proxy/app/server.go). conntrack zeros: leave the host-global sysctls alone.
      writeFileSync(
        cfg('kube-proxy.json'),
        JSON.stringify({
          apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
          kind: 'KubeProxyConfiguration',
          clientConnection: { kubeconfig: kubeconfigFor('proxy') },
          hostnameOverride: NODE_NAME,
          bindAddress: NODE_IP,
          mode: proxyMode,
          clusterCIDR: CLUSTER_CIDR,
          healthzBindAddress: `127.0.0.1:${PORTS.proxyHealth}`,
          metricsBindAddress: '127.0.0.1:10249',
          conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
        }),
      );
      const proxy = start({ name: 'kube-proxy', command: bins.kube, args: ['kube-proxy', `--config=${cfg('kube-proxy.json')}`] });
      await waitFor(
        'kube-proxy /healthz',
        componentTimeoutMs,
        async () => {
          const r = await httpGetStatus(`http://${hostPort(`127.0.0.1:${PORTS.proxyHealth}`)}/healthz`);
          return r.status === 200;
        },
        proxy,
      );
      mark('kube-proxy');
    }
    if (coredns !== undefined) {
      await waitFor(
        'CoreDNS /ready',
        componentTimeoutMs,
        async () => {
          const r = await httpGetStatus(`http://${hostPort(`127.0.0.1:${PORTS.corednsReady}`)}/ready`);
          return r.status === 200;
        },
        coredns,
      );
      mark('coredns');
    }
    timings['total'] = Date.now() - tStart;
    log(`cluster ${runId} up in ${timings['total']} ms (binaries: ${timings['binaries']} ms)`);

    const components = new Map(state.processes.map((p) => [p.name, p]));
    const cluster: Cluster = {
      runId,
      nodeNetns: state.nodeNetns,
      nodeName: NODE_NAME,
      nodeIP: NODE_IP,
      serviceCIDR: SERVICE_CIDR,
      podCIDR: POD_CIDR,
      clusterDNS: proxyMode !== 'none' ? CLUSTER_DNS_IP : NODE_IP,
      clusterDomain: CLUSTER_DOMAIN,
      workDir,
      apiServerNodeURL: API_NODE_URL,
      apiServerHostURL: apiHostURL,
      caCertPem: pki.caCertPem,
      caCertFile: pki.caCert,
      tokens: pki.tokens,
      api: adminApi,
      components,
      timings,
      apiAs: (token) => apiClient(apiHostURL, pki.caCertPem, token),
      kubeConfig: (token = pki.tokens.admin) => {
        const kc = new KubeConfig();
        kc.loadFromOptions({
          clusters: [{ name: 'e2e', server: apiHostURL, caData: Buffer.from(pki.caCertPem).toString('base64'), skipTLSVerify: false }],
          users: [{ name: 'e2e', token }],
          contexts: [{ name: 'e2e', cluster: 'e2e', user: 'e2e' }],
          currentContext: 'e2e',
        });
        return kc;
      },
      kubeconfigFile: (name, token, where) =>
        writeKubeconfig(cfg(`${name}.${where}.kubeconfig`), where === 'host' ? apiHostURL : API_NODE_URL, pki.caCertPem, token, name),
      serviceAccountToken: async (namespace, name, opts = {}) => {
        const res = await adminApi.call<{ status?: { token?: string } }>(
          'POST',
          `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
          {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: { audiences: opts.audiences ?? null, expirationSeconds: opts.expirationSeconds ?? 3600 },
          },
        );
        const token = res.status?.token;
        if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
        return token;
      },
      createNamespace: async (name) => {
        await ensure(adminApi, '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
        await waitFor(
          `ServiceAccount ${name}/default`,
          30_000,
          async () => (await adminApi.raw('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)).status === 200,
        );
      },
      createTenant: async (namespace, name) => {
        await ensure(adminApi, `/api/v1/namespaces/${namespace}/serviceaccounts`, {
          apiVersion: 'v1',
          kind: 'ServiceAccount',
          metadata: { name },
        });
        await ensure(adminApi, `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/roles`, {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: `${name}-pods` },
          rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['create', 'delete'] }],
        });
        await ensure(adminApi, `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: `${name}-pods` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${name}-pods` },
          subjects: [{ kind: 'ServiceAccount', name, namespace }],
        });
        return { serviceAccount: `system:serviceaccount:${namespace}:${name}`, token: await cluster.serviceAccountToken(namespace, name) };
      },
      podRuntime: async (namespace, name, timeoutMs = 30_000) => {
        let info: PodRuntimeInfo | undefined;
        await waitFor(
          `the process kubelet to run pod ${namespace}/${name}`,
          timeoutMs,
          async () => {
            info = readPodRuntime(join(workDir, 'kubelet'), namespace, name);
            return info !== undefined;
          },
          kubelet,
        );
        if (info === undefined) throw new Error('unreachable');
        return info;
      },
      execInPod: async (namespace, name, argv, opts = {}) => {
        const info = await cluster.podRuntime(namespace, name);
        return spawnCollect('ip', ['netns', 'exec', info.netns, ...argv], opts);
      },
      execInNode: (argv, opts = {}) => spawnCollect('nsenter', [`--net=/run/netns/${state.nodeNetns}`, '--', ...argv], opts),
      forward: (targets) => startForwarder(state, bins.nsforward, `nsforward-${state.processes.length}`, targets),
      stop: async () => {
        const pids = state.processes.map((p) => p.pid);
        teardownSync(state, 'stop()');
        unhook();
        const leftovers = leftoversOf(runId, pids);
        if (leftovers.length > 0) throw new Error(`teardown of ${runId} left:\n  ${leftovers.join('\n  ')}`);
        return { clean: true, leftovers };
      },
    };
    return cluster;
  } catch (err) {
    state.keepWorkDir = true;
    teardownSync(state, `start failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    unhook();
    throw err;
  }
}

const PodRuntimeSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  uid: z.string(),
  netns: z.string(),
  podIP: z.string(),
  logDir: z.string(),
});

/** The process kubelet's record of a pod it runs (`<state-dir>/pods/<namespace>_<name>.json`). */
function readPodRuntime(stateDir: string, namespace: string, name: string): PodRuntimeInfo | undefined {
  const file = join(stateDir, 'pods', `${namespace}_${name}.json`);
  if (!existsSync(file)) return undefined;
  try {
    const parsed = PodRuntimeSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // being written
  }
}

/** Objects the components need that a kubeadm cluster would have: CoreDNS's RBAC and the kube-dns Service. */
async function bootstrapObjects(api: ApiClient, withKubeDnsService: boolean): Promise<void> {
  // CoreDNS's upstream ClusterRole (coredns/deployment kubernetes/coredns.yaml.sed, system:coredns).
  await ensure(api, '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:coredns' },
    rules: [
      { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ],
  });
  await ensure(api, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'system:coredns' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: COMPONENT_IDENTITIES.coredns.user }],
  });
  if (!withKubeDnsService) return;
  // CoreDNS runs in the node namespace, not as a pod: kube-dns is a selectorless Service whose
  // EndpointSlice (managed by the harness) points at the node IP, so pods reach DNS through
  // kube-proxy at the ClusterIP, as on a kubeadm cluster.
  await ensure(api, '/api/v1/namespaces/kube-system/services', {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'kube-dns', labels: { 'k8s-app': 'kube-dns' } },
    spec: {
      clusterIP: CLUSTER_DNS_IP,
      ports: [
        { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
        { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
      ],
    },
  });
  await ensure(api, '/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices', {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'kube-dns-node',
      labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': 'e2e-harness' },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [NODE_IP], conditions: { ready: true, serving: true, terminating: false }, nodeName: NODE_NAME }],
    ports: [
      { name: 'dns', port: 53, protocol: 'UDP' },
      { name: 'dns-tcp', port: 53, protocol: 'TCP' },
    ],
  });
}
