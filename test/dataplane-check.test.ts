/**
 * The dataplane check (knative/dataplane-check): a Job users run on their own cluster to learn
 * whether its dataplane refuses connections to a Service without endpoints (docs/dataplanes.md).
 *
 *  1. Manifests: `kubectl kustomize knative/dataplane-check`, every object validated with the
 *     published JSON schemas of kubernetes-models and type-checked against its TypeScript
 *     interface (as test/manifests.test.ts does); RBAC, the script in the ConfigMap, the Job's
 *     settings and deadlines. Skipped without kubectl.
 *  2. The script's Kubernetes side, against a fake `kubectl` on PATH that records its calls and
 *     answers with a ClusterIP: the Service it creates (selects no pod, shaped like the
 *     function's, owned by the Job's pod), the create -> get -> delete order, and that the
 *     Service is deleted on every failure and on SIGTERM. Needs only curl.
 *  3. The script's classification, in a network namespace this test creates (root + iproute2 +
 *     iptables + curl; skipped with the reason otherwise), where iptables REJECTs
 *     (icmp-port-unreachable as kube-proxy, tcp-reset, icmp-host-unreachable) or DROPs
 *     connects to test addresses: the verdicts and the measured connect times; and the whole
 *     check with the fake kubectl, where deleting the Service turns its ClusterIP's REJECT
 *     into a DROP (what kube-proxy nftables and Cilium do to a deleted Service's ClusterIP).
 *
 * Every script test runs under each POSIX shell found: dash (`sh` on Debian) and BusyBox
 * `sh` (the ash that alpine/k8s, the Job's image, runs). Debian: apt-get install -y curl
 * iproute2 iptables busybox (busybox and shellcheck are optional).
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { desiredExecutorService } from '../shared/service-spec.ts';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../shared/labels.ts';
import { startEmulator } from './kube-emulator/index.ts';
import type { KubeEmulator } from './kube-emulator/index.ts';
import { kustomizeObjects } from './support/kustomize.ts';

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIR = 'knative/dataplane-check';
const SCRIPT = path.join(ROOT, DIR, 'dataplane-check.sh');
const SCRIPT_TEXT = readFileSync(SCRIPT, 'utf8');
const NAME = 'spark-exec-svc-dataplane-check';
const SELECTOR_LABEL = 'spark-exec-svc/dataplane-check';

/** Every setting the script reads (its header documents each). */
const SCRIPT_SETTINGS = [
  'NAMESPACE', 'PORT', 'ATTEMPTS', 'CONNECT_TIMEOUT_SECONDS', 'FAST_MS', 'PROGRAM_DELAY_SECONDS',
  'CLUSTERIP_WAIT_SECONDS', 'CHECK_DELETED', 'INTERNAL_TRAFFIC_POLICY', 'OWNER_POD_NAME', 'OWNER_POD_UID',
  'NODE_NAME', 'KUBECTL', 'CURL',
];

// ---------------------------------------------------------------------------
// Tools.
const EXTRA_BIN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
function findBinary(name: string): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== ''), ...EXTRA_BIN_DIRS];
  return dirs.map((d) => path.join(d, name)).find((p) => existsSync(p));
}
const KUBECTL = [process.env['KUBECTL'], '/usr/bin/kubectl', findBinary('kubectl')].find((c): c is string => c !== undefined && c !== '' && existsSync(c));
const CURL = findBinary('curl');
const IP = findBinary('ip');
const IPTABLES = findBinary('iptables');
const BUSYBOX = findBinary('busybox');
const SHELLCHECK = findBinary('shellcheck');
const IS_ROOT = typeof process.getuid === 'function' && process.getuid() === 0;

/** The shells the script must work in: argv prefixes. */
const SHELLS: { name: string; argv: string[] }[] = [{ name: 'sh', argv: [findBinary('sh') ?? '/bin/sh'] }];
if (BUSYBOX !== undefined && spawnSync(BUSYBOX, ['sh', '-c', 'exit 0']).status === 0) {
  SHELLS.push({ name: 'busybox sh', argv: [BUSYBOX, 'sh'] });
} else {
  console.warn('[dataplane-check.test] busybox not found: the script is tested under sh only (alpine/k8s runs BusyBox ash; apt-get install -y busybox)');
}
if (KUBECTL === undefined) console.warn('[dataplane-check.test] SKIPPING the manifest checks: no kubectl (kubectl >= 1.27 with kustomize v5 is needed)');
if (CURL === undefined) console.warn('[dataplane-check.test] SKIPPING the script tests: no curl (apt-get install -y curl)');

// ---------------------------------------------------------------------------
// Running the script.
interface Attempt { n: number; outcome: string; ms: number; reason: string }
interface Verdict { verdict: string; attempts: number; refused: number; timeout: number; other: number; maxMs: number; target: string }
interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  elapsedMs: number;
  attempts: Attempt[];
  verdict?: Verdict;
  deletedVerdict?: Verdict;
  /** Attempts of the deleted-Service probe (after the DELETED_VERDICT's own attempts start). */
  deletedAttempts: Attempt[];
}

function parseVerdict(stdout: string, label: string): Verdict | undefined {
  const m = new RegExp(`^${label}=(\\S+) attempts=(\\d+) refused=(\\d+) timeout=(\\d+) other=(\\d+) max_ms=([\\d.]+) target=(\\S+)$`, 'm').exec(stdout);
  if (m === null) return undefined;
  return { verdict: m[1]!, attempts: Number(m[2]), refused: Number(m[3]), timeout: Number(m[4]), other: Number(m[5]), maxMs: Number(m[6]), target: m[7]! };
}

function parseAttempts(lines: string[]): Attempt[] {
  const out: Attempt[] = [];
  for (const line of lines) {
    const m = /^dataplane-check: attempt (\d+)\/\d+ to \S+: (\S+) after ([\d.]+) ms(?: \((.*)\))?$/.exec(line);
    if (m !== null) out.push({ n: Number(m[1]), outcome: m[2]!, ms: Number(m[3]), reason: m[4] ?? '' });
  }
  return out;
}

interface RunOptions {
  shell: string[];
  args?: string[];
  env?: Record<string, string>;
  /** Run inside this network namespace (ip netns exec). */
  netns?: string;
  /** Called with each stdout line; may return a signal to send to the script. */
  onLine?: (line: string) => NodeJS.Signals | undefined;
  timeoutMs?: number;
}

function runScript(opts: RunOptions): Promise<RunResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !SCRIPT_SETTINGS.includes(k)) env[k] = v;
  for (const k of ['http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'all_proxy', 'no_proxy', 'NO_PROXY']) delete env[k];
  Object.assign(env, opts.env ?? {});
  const argv = [...(opts.netns !== undefined ? [IP!, 'netns', 'exec', opts.netns] : []), ...opts.shell, SCRIPT, ...(opts.args ?? [])];
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let pending = '';
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      pending += d;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const sig = opts.onLine?.(line);
        if (sig !== undefined) child.kill(sig);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      const lines = stdout.split('\n');
      const cut = lines.findIndex((l) => l.startsWith('VERDICT='));
      resolve({
        code, signal, stdout, stderr, elapsedMs: performance.now() - started,
        attempts: parseAttempts(cut < 0 ? lines : lines.slice(0, cut)),
        deletedAttempts: cut < 0 ? [] : parseAttempts(lines.slice(cut + 1)),
        verdict: parseVerdict(stdout, 'VERDICT'),
        deletedVerdict: parseVerdict(stdout, 'DELETED_VERDICT'),
      });
    });
  });
}

/** A loopback port nothing listens on (the kernel answers a connect with RST: refused at once). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// ---------------------------------------------------------------------------
// The fake kubectl: records each call (one line of arguments), keeps the manifest given to
// `create -f`, answers `get` with FAKE_CLUSTER_IP (empty for the first FAKE_EMPTY_GETS calls),
// and runs FAKE_ON_DELETE on `delete` (inside the script's network namespace, so it can change
// the rules there).
const FAKE_KUBECTL = `#!/bin/sh
d=$FAKE_KUBECTL_DIR
printf '%s\\n' "$*" >>"$d/calls.log"
verb=
for a in "$@"; do case $a in --*) ;; *) verb=$a; break ;; esac; done
case $verb in
  create)
    prev=
    for a in "$@"; do [ "$prev" = -f ] && cp "$a" "$d/created.json"; prev=$a; done
    if [ -n "\${FAKE_CREATE_FAIL:-}" ]; then echo 'Error from server (Forbidden): services is forbidden' >&2; exit 1; fi
    echo service/created ;;
  get)
    n=$(cat "$d/gets" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$d/gets"
    [ "$n" -le "\${FAKE_EMPTY_GETS:-0}" ] && exit 0
    printf '%s' "\${FAKE_CLUSTER_IP:-}" ;;
  delete)
    if [ -n "\${FAKE_ON_DELETE:-}" ]; then sh -c "$FAKE_ON_DELETE" || exit 1; fi
    echo 'service deleted' ;;
  *) echo "fake kubectl: unexpected call: $*" >&2; exit 1 ;;
esac
`;

interface FakeCluster {
  dir: string;
  env: Record<string, string>;
  calls(): string[][];
  created(): Record<string, unknown> | undefined;
  dispose(): void;
}
function fakeCluster(extra: Record<string, string> = {}): FakeCluster {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dpc-fake-kubectl-'));
  const bin = path.join(dir, 'kubectl');
  writeFileSync(bin, FAKE_KUBECTL);
  chmodSync(bin, 0o755);
  return {
    dir,
    env: { PATH: `${dir}${path.delimiter}${process.env['PATH'] ?? ''}`, FAKE_KUBECTL_DIR: dir, NAMESPACE: 'spark', ...extra },
    calls: () => existsSync(path.join(dir, 'calls.log'))
      ? readFileSync(path.join(dir, 'calls.log'), 'utf8').split('\n').filter((l) => l !== '').map((l) => l.split(' '))
      : [],
    created: () => existsSync(path.join(dir, 'created.json'))
      ? JSON.parse(readFileSync(path.join(dir, 'created.json'), 'utf8')) as Record<string, unknown>
      : undefined,
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
/** The verb of a recorded call (first argument that is not a --flag). */
const verbOf = (call: string[]) => call.find((a) => !a.startsWith('--'));

// ---------------------------------------------------------------------------
// Type check (excess properties), as test/manifests.test.ts does it.
const TYPES: Record<string, { module: string; name: string }> = {
  'v1/ServiceAccount': { module: 'kubernetes-models/v1/ServiceAccount', name: 'IServiceAccount' },
  'v1/ConfigMap': { module: 'kubernetes-models/v1/ConfigMap', name: 'IConfigMap' },
  'v1/Service': { module: 'kubernetes-models/v1/Service', name: 'IService' },
  'rbac.authorization.k8s.io/v1/Role': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1/Role', name: 'IRole' },
  'rbac.authorization.k8s.io/v1/RoleBinding': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding', name: 'IRoleBinding' },
  'batch/v1/Job': { module: 'kubernetes-models/batch/v1/Job', name: 'IJob' },
};
const MODELS: Record<string, { new (data: never): { validate(): void } }> = {
  'v1/ServiceAccount': ServiceAccount, 'v1/ConfigMap': ConfigMap, 'v1/Service': Service,
  'rbac.authorization.k8s.io/v1/Role': Role, 'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding, 'batch/v1/Job': Job,
};
type Json = Record<string, unknown>;
interface K8sObject extends Json { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } }
const keyOf = (o: { apiVersion: string; kind: string }) => `${o.apiVersion}/${o.kind}`;

function excessPropertyErrors(objs: K8sObject[]): string[] {
  const virtual = path.join(ROOT, 'test', '__dataplane_check_types__.virtual.ts');
  const keys = Object.keys(TYPES);
  const lines = keys.map((k, i) => `import type { ${TYPES[k]!.name} as T${i} } from '${TYPES[k]!.module}';`);
  for (const [i, o] of objs.entries()) lines.push(`export const o${i}: T${keys.indexOf(keyOf(o))} = ${JSON.stringify(o)};`);
  const text = lines.join('\n');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true, noEmit: true, skipLibCheck: true, types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (f === virtual ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, ...rest));
  host.fileExists = (f) => f === virtual || fileExists(f);
  host.readFile = (f) => (f === virtual ? text : readFile(f));
  return ts.getPreEmitDiagnostics(ts.createProgram([virtual], options, host)).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

function schemaErrors(objs: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objs) {
    const Model = MODELS[keyOf(o)];
    if (Model === undefined) { problems.push(`${keyOf(o)} ${o.metadata.name}: no validator`); continue; }
    try { new Model(o as never).validate(); } catch (e) { problems.push(`${keyOf(o)} ${o.metadata.name}: ${(e as Error).message}`); }
  }
  return problems;
}

async function kustomize(dir: string): Promise<K8sObject[]> {
  const { stdout } = await execFileAsync(KUBECTL!, ['kustomize', dir], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  return loadAll(stdout).filter((d) => d !== null && d !== undefined) as K8sObject[];
}
/** The function's install as a user builds it, with knative/base/image.env set (test/support/kustomize.ts). */
const functionInstall = (): Promise<K8sObject[]> => kustomizeObjects<K8sObject>(KUBECTL!, 'knative/base');

// ===========================================================================
// 1. Manifests.
interface EnvVar { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }
interface JobObj extends K8sObject {
  spec: {
    backoffLimit?: number; activeDeadlineSeconds?: number; ttlSecondsAfterFinished?: number;
    template: { spec: {
      serviceAccountName?: string; restartPolicy?: string; terminationGracePeriodSeconds?: number;
      securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
      containers: {
        name: string; image?: string; command?: string[]; args?: string[]; env?: EnvVar[];
        securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; privileged?: boolean; capabilities?: { drop?: string[]; add?: string[] } };
        resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
        volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
      }[];
      volumes?: { name: string; configMap?: { name: string }; emptyDir?: unknown }[];
    } };
  };
}

describe.skipIf(KUBECTL === undefined)('knative/dataplane-check manifests', () => {
  let objs: K8sObject[] = [];
  beforeAll(async () => { objs = await kustomize(DIR); });
  const job = () => objs.find((o) => o.kind === 'Job') as JobObj;
  const container = () => job().spec.template.spec.containers[0]!;
  const env = () => Object.fromEntries((container().env ?? []).map((e) => [e.name, e]));

  it('builds a ServiceAccount, Role, RoleBinding, ConfigMap and Job, all in namespace spark', () => {
    expect(objs.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Job', 'Role', 'RoleBinding', 'ServiceAccount']);
    for (const o of objs) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('spark');
  });

  it('every object passes its published JSON schema and has no field its type lacks', () => {
    expect(schemaErrors(objs)).toEqual([]);
    expect(excessPropertyErrors(objs)).toEqual([]);
    // The type check does catch a misspelt field.
    const bad = structuredClone(job()) as Json;
    ((bad['spec'] as Json))['backofLimit'] = 0;
    expect(excessPropertyErrors([bad as K8sObject]).some((e) => e.includes('backofLimit'))).toBe(true);
  });

  it('RBAC: the Job\'s ServiceAccount may only create, get and delete Services in its namespace', () => {
    const sa = job().spec.template.spec.serviceAccountName;
    expect(sa).toBe(NAME);
    expect(objs.some((o) => o.kind === 'ServiceAccount' && o.metadata.name === sa)).toBe(true);
    const bindings = objs.filter((o) => o.kind === 'RoleBinding') as (K8sObject & { roleRef: { kind: string; name: string }; subjects: { kind: string; name: string; namespace?: string }[] })[];
    expect(bindings).toHaveLength(1);
    const b = bindings[0]!;
    expect(b.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, namespace: 'spark' }]);
    expect(b.roleRef.kind).toBe('Role');
    const role = objs.find((o) => o.kind === 'Role' && o.metadata.name === b.roleRef.name) as K8sObject & { rules: Json[] };
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['services'], verbs: ['create', 'get', 'delete'] }]);
  });

  it('the ConfigMap carries the script byte for byte, and the Job runs it from there', () => {
    const cm = objs.find((o) => o.kind === 'ConfigMap') as K8sObject & { data: Record<string, string> };
    expect(cm.metadata.name).toMatch(new RegExp(`^${NAME}-[a-z0-9]{10}$`)); // generated, with a content hash
    expect(cm.data).toEqual({ 'dataplane-check.sh': SCRIPT_TEXT });
    const vol = job().spec.template.spec.volumes?.find((v) => v.configMap?.name === cm.metadata.name);
    expect(vol, 'a volume from the generated ConfigMap').toBeDefined();
    const mount = container().volumeMounts?.find((m) => m.name === vol!.name);
    expect(mount?.readOnly).toBe(true);
    expect(container().command).toEqual(['sh', `${mount!.mountPath}/dataplane-check.sh`]);
    expect(container().args).toBeUndefined();
  });

  it('the Job runs once, keeps its log, and its deadlines cover the script\'s worst case', () => {
    const spec = job().spec;
    const pod = spec.template.spec;
    expect(spec.backoffLimit).toBe(0);
    expect(pod.restartPolicy).toBe('Never');
    expect(spec.ttlSecondsAfterFinished).toBeGreaterThanOrEqual(600);
    const n = (k: string) => Number(env()[k]?.value);
    const kubectlCall = 10; // --request-timeout of every kubectl call
    const probe = n('ATTEMPTS') * (n('CONNECT_TIMEOUT_SECONDS') + 2); // curl --max-time per attempt
    const worst = kubectlCall /* create */ + n('CLUSTERIP_WAIT_SECONDS') * (kubectlCall + 1) /* get, pause */
      + 2 * n('PROGRAM_DELAY_SECONDS') + 2 * probe + 3 * kubectlCall + 2 /* delete, retried */;
    expect(worst).toBeGreaterThan(100);
    expect(spec.activeDeadlineSeconds, `worst case ${worst} s plus an image pull`).toBeGreaterThanOrEqual(worst + 120);
    // On SIGTERM the script only deletes its Service: up to 3 kubectl calls and 2 one-second pauses.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(3 * kubectlCall + 2 + 5);
  });

  it('settings: only ones the script reads, from the downward API where they name the pod, and valid for the script', async () => {
    const e = env();
    for (const name of Object.keys(e)) {
      if (name === 'HOME') continue;
      expect(SCRIPT_SETTINGS, name).toContain(name);
    }
    for (const name of SCRIPT_SETTINGS) expect(SCRIPT_TEXT, `${name} is read by the script`).toContain(`\${${name}`);
    expect(e['NAMESPACE']?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    expect(e['OWNER_POD_NAME']?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(e['OWNER_POD_UID']?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.uid');
    expect(e['NODE_NAME']?.valueFrom?.fieldRef?.fieldPath).toBe('spec.nodeName');
    expect(e['INTERNAL_TRAFFIC_POLICY']?.value, 'as the function\'s Services').toBe('Cluster');
    expect(e['PORT']?.value).toBe('7079');
    // HOME (kubectl's cache) is on a writable emptyDir; the root filesystem is read-only.
    const tmp = job().spec.template.spec.volumes?.find((v) => v.emptyDir !== undefined);
    expect(container().volumeMounts?.find((m) => m.name === tmp?.name)?.mountPath).toBe(e['HOME']?.value);
    // The values pass the script's own validation: probe a closed port with exactly these settings.
    if (CURL === undefined) return;
    const values = Object.fromEntries(Object.entries(e).filter(([, v]) => v.value !== undefined).map(([k, v]) => [k, v.value!]));
    const r = await runScript({ shell: SHELLS[0]!.argv, args: ['probe', '127.0.0.1', String(await closedPort())], env: values });
    expect(r.stderr).toBe('');
    expect(r.verdict?.verdict).toBe('reject');
    expect(r.verdict?.attempts).toBe(Number(e['ATTEMPTS']?.value));
  });

  it('runs non-root, read-only, without privileges, with bounded resources, from a pinned image', () => {
    const pod = job().spec.template.spec;
    const c = container();
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(c.securityContext?.privileged).not.toBe(true);
    expect(c.securityContext?.capabilities?.add).toBeUndefined();
    expect(c.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.resources?.limits).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.image).toMatch(/^alpine\/k8s:\d+\.\d+\.\d+$|@sha256:[0-9a-f]{64}$/);
  });

  it('does not collide with the function\'s own install (knative/base)', async () => {
    const base = await functionInstall();
    const names = new Set(base.map((o) => `${o.kind}/${o.metadata.name}`));
    for (const o of objs) expect(names.has(`${o.kind}/${o.metadata.name}`), `${o.kind}/${o.metadata.name}`).toBe(false);
  });

  it('a wrapping kustomization moves it to another namespace', async () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'dpc-wrap-'));
    try {
      writeFileSync(path.join(tmp, 'kustomization.yaml'), [
        'apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', 'namespace: team-a',
        'resources:', `  - ${path.relative(tmp, path.join(ROOT, DIR))}`,
        'images:', '  - name: alpine/k8s', '    newName: registry.example.com/mirror/k8s', '    newTag: "1.34.1"', '',
      ].join('\n'));
      const moved = await kustomize(tmp);
      for (const o of moved) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('team-a');
      const b = moved.find((o) => o.kind === 'RoleBinding') as K8sObject & { subjects: { namespace?: string }[] };
      expect(b.subjects[0]?.namespace).toBe('team-a');
      const j = moved.find((o) => o.kind === 'Job') as JobObj;
      expect(j.spec.template.spec.containers[0]!.image).toBe('registry.example.com/mirror/k8s:1.34.1');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('the function\'s default cool-down exceeds the cool-down rule of docs/dataplanes.md', async () => {
    // JVM DNS cache (networkaddress.cache.ttl) 30 s + CoreDNS cache up to 30 s + proxy programming
    // lag (allow 10 s) + Spark's memory of the lost executor (spark.network.timeout 120 s).
    const rule = 30 + 30 + 10 + 120;
    const base = await functionInstall();
    const ksvc = base.find((o) => o.kind === 'Service' && o.apiVersion.startsWith('serving.knative.dev/')) as K8sObject & { spec: { template: { spec: { containers: { env?: EnvVar[] }[] } } } };
    const cooldown = Number(ksvc.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'COOLDOWN_SECONDS')?.value);
    expect(cooldown === 0 || cooldown > rule, `COOLDOWN_SECONDS ${cooldown}`).toBe(true);
    const doc = readFileSync(path.join(ROOT, 'docs/dataplanes.md'), 'utf8');
    for (const term of ['networkaddress.cache.ttl', 'COOLDOWN_SECONDS', 'spark.network.timeout', String(rule)]) expect(doc).toContain(term);
  });
});

// ===========================================================================
// 2. The script against a fake kubectl (no root needed).
describe.skipIf(CURL === undefined)('dataplane-check.sh', () => {
  it.skipIf(SHELLCHECK === undefined)(`passes shellcheck as POSIX sh${SHELLCHECK === undefined ? ' (SKIPPED: no shellcheck)' : ''}`, () => {
    const r = spawnSync(SHELLCHECK!, ['-s', 'sh', SCRIPT], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('docs/dataplanes.md explains how to run it and every verdict', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/dataplanes.md'), 'utf8');
    for (const term of ['kubectl apply -k knative/dataplane-check', 'VERDICT=reject', 'VERDICT=drop', 'VERDICT=inconclusive', 'DELETED_VERDICT', 'service-no-backend-response', 'internalTrafficPolicy']) {
      expect(doc, term).toContain(term);
    }
    for (const name of SCRIPT_SETTINGS.filter((n) => !['KUBECTL', 'CURL'].includes(n))) expect(doc, name).toContain(name);
  });

  describe.each(SHELLS)('under $name', ({ argv: shell }) => {
    const fast = { ATTEMPTS: '2', CONNECT_TIMEOUT_SECONDS: '0.5', PROGRAM_DELAY_SECONDS: '0', CLUSTERIP_WAIT_SECONDS: '3' };

    it('creates a Service that selects no pod, shaped like the function\'s, probes it, deletes it, probes its old ClusterIP', async () => {
      const port = await closedPort();
      const k = fakeCluster({ ...fast, PORT: String(port), FAKE_CLUSTER_IP: '127.0.0.1', OWNER_POD_NAME: 'spark-exec-svc-dataplane-check-x7k2p', OWNER_POD_UID: '4f2c0a9e-8d1b-4c3e-9f70-1a2b3c4d5e6f', NODE_NAME: 'node-1' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.verdict).toMatchObject({ verdict: 'reject', attempts: 2, refused: 2, target: `127.0.0.1:${port}` });
        expect(r.deletedVerdict).toMatchObject({ verdict: 'reject', refused: 2 });
        expect(r.stdout).toContain('REJECT: fast fail works');
        expect(r.stdout).toContain('node node-1');
        // create -> get -> delete, each in namespace spark, each bounded by a request timeout.
        const calls = k.calls();
        expect(calls.map(verbOf)).toEqual(['create', 'get', 'delete']);
        for (const c of calls) {
          expect(c).toContain('--request-timeout=10s');
          expect(c.join(' ')).toContain('--namespace spark');
        }
        // The deleted-Service probe came after the delete.
        expect(r.stdout.indexOf('deleted Service')).toBeLessThan(r.stdout.indexOf('DELETED_VERDICT='));
        expect(r.stdout.indexOf('VERDICT=')).toBeLessThan(r.stdout.indexOf('deleted Service'));

        const svc = k.created() as K8sObject & { spec: Json; metadata: Json };
        expect(schemaErrors([svc])).toEqual([]);
        expect(excessPropertyErrors([svc])).toEqual([]);
        const name = svc.metadata.name;
        expect(name).toMatch(/^spark-exec-svc-dataplane-check-[0-9a-f]{8}$/);
        expect(calls[1]).toContain(name);
        expect(calls[2]).toContain(name);
        expect(calls[2]).toContain('--ignore-not-found');
        expect(svc.metadata.namespace).toBe('spark');
        // Selects on a label no pod has: the Service never gets endpoints.
        expect(svc.spec['selector']).toEqual({ [SELECTOR_LABEL]: name.slice(-8) });
        // Not one of the function's Services: its sweep must never adopt or delete it.
        expect((svc.metadata.labels as Record<string, string>)[MANAGED_BY_LABEL]).not.toBe(MANAGED_BY_VALUE);
        // Same type and port shape as the Service the function makes for an executor.
        const fn = desiredExecutorService('spark', {
          appId: 'spark-0123456789abcdef0123456789abcdef', execId: '1',
          executor: { name: 'e', uid: 'u1' }, owner: { name: 'd', uid: 'u2' },
        }, port);
        expect(svc.spec['type']).toBe(fn.spec.type);
        expect(svc.spec['ports']).toEqual(fn.spec.ports);
        expect(svc.spec['internalTrafficPolicy']).toBe('Cluster');
        // Owned by the Job's pod (garbage-collected with it), without blockOwnerDeletion.
        expect(svc.metadata['ownerReferences']).toEqual([{ apiVersion: 'v1', kind: 'Pod', name: 'spark-exec-svc-dataplane-check-x7k2p', uid: '4f2c0a9e-8d1b-4c3e-9f70-1a2b3c4d5e6f' }]);
      } finally {
        k.dispose();
      }
    });

    it('waits for the ClusterIP; without owner settings the Service has no owner; CHECK_DELETED=false deletes on exit', async () => {
      const port = await closedPort();
      const k = fakeCluster({ ...fast, PORT: String(port), FAKE_CLUSTER_IP: '127.0.0.1', FAKE_EMPTY_GETS: '2', CHECK_DELETED: 'false', INTERNAL_TRAFFIC_POLICY: 'Local' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(0);
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'get', 'get', 'delete']);
        expect(r.deletedVerdict).toBeUndefined();
        const svc = k.created() as K8sObject & { spec: Json; metadata: Json };
        expect(svc.metadata['ownerReferences']).toBeUndefined();
        expect(svc.spec['internalTrafficPolicy']).toBe('Local');
        expect(schemaErrors([svc])).toEqual([]);
      } finally {
        k.dispose();
      }
    });

    it('no ClusterIP in time: error, and the Service is deleted', async () => {
      const k = fakeCluster({ ...fast, CLUSTERIP_WAIT_SECONDS: '1', FAKE_CLUSTER_IP: '' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('got no ClusterIP');
        expect(r.verdict).toBeUndefined();
        const verbs = k.calls().map(verbOf);
        expect(verbs[0]).toBe('create');
        expect(verbs.at(-1)).toBe('delete');
        expect(verbs.filter((v) => v === 'delete')).toHaveLength(1);
      } finally {
        k.dispose();
      }
    });

    it('create fails: error with the API\'s message, and a delete is still tried (the create may have happened)', async () => {
      const k = fakeCluster({ ...fast, FAKE_CREATE_FAIL: '1', FAKE_CLUSTER_IP: '127.0.0.1' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('services is forbidden');
        expect(k.calls().map(verbOf)).toEqual(['create', 'delete']);
        expect(k.calls()[1]).toContain('--ignore-not-found');
      } finally {
        k.dispose();
      }
    });

    it('a failing delete is retried, then reported with the command to run by hand', async () => {
      const port = await closedPort();
      const k = fakeCluster({ ...fast, PORT: String(port), FAKE_CLUSTER_IP: '127.0.0.1', FAKE_ON_DELETE: 'exit 1', OWNER_POD_NAME: 'p', OWNER_POD_UID: 'abc-123' });
      try {
        const r = await runScript({ shell, env: k.env });
        expect(r.code).toBe(1); // the deleted-Service probe needs the delete
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete', 'delete', 'delete']);
        expect(r.stdout).toContain('WARNING: could not delete Service spark/');
        expect(r.stdout).toContain('garbage collection removes it');
        expect(r.verdict?.verdict).toBe('reject');
      } finally {
        k.dispose();
      }
    });

    it('SIGTERM (Job deadline, pod deletion) deletes the Service at once', async () => {
      const k = fakeCluster({ ...fast, FAKE_CLUSTER_IP: '127.0.0.1', PROGRAM_DELAY_SECONDS: '30' });
      try {
        let signalledAt = 0;
        const r = await runScript({
          shell, env: k.env,
          onLine: (line) => {
            if (!line.includes('waiting 30s for the proxy')) return undefined;
            signalledAt = performance.now();
            return 'SIGTERM';
          },
        });
        expect(signalledAt).toBeGreaterThan(0);
        expect(r.code).toBe(143);
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
        expect(r.elapsedMs, 'did not sit out the 30 s wait').toBeLessThan(10_000);
        expect(r.verdict).toBeUndefined();
      } finally {
        k.dispose();
      }
    });

    it('refuses bad settings before touching the cluster', async () => {
      const bads: Record<string, string>[] = [{ INTERNAL_TRAFFIC_POLICY: 'Nodes' }, { ATTEMPTS: '0' }, { PORT: '70000' }, { CONNECT_TIMEOUT_SECONDS: '1s' },
        { FAST_MS: '5000', CONNECT_TIMEOUT_SECONDS: '2' }, { CHECK_DELETED: 'yes' }, { NAMESPACE: 'Not_A_Namespace' }];
      for (const bad of bads) {
        const k = fakeCluster({ ...fast, FAKE_CLUSTER_IP: '127.0.0.1', ...bad });
        try {
          const r = await runScript({ shell, env: k.env });
          expect(r.code, JSON.stringify(bad)).toBe(1);
          expect(r.stderr, JSON.stringify(bad)).toMatch(/^dataplane-check: error: /);
          expect(k.calls(), JSON.stringify(bad)).toEqual([]);
        } finally {
          k.dispose();
        }
      }
    });

    it('never connects through an HTTP proxy from the environment', async () => {
      // A "proxy" that accepts everything: through it every connect would succeed.
      const proxy = net.createServer((s) => s.destroy());
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
      try {
        const r = await runScript({
          shell, args: ['probe', '127.0.0.1', String(await closedPort())],
          env: { ...fast, http_proxy: proxyUrl, HTTP_PROXY: proxyUrl, ALL_PROXY: proxyUrl },
        });
        expect(r.verdict?.verdict).toBe('reject');
        expect(r.code).toBe(0);
      } finally {
        proxy.close();
      }
    });

    it('a listener that accepts is not a refusal: inconclusive, exit 3', async () => {
      const server = net.createServer((s) => s.destroy());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const r = await runScript({ shell, args: ['probe', '127.0.0.1', String((server.address() as net.AddressInfo).port)], env: fast });
        expect(r.verdict).toMatchObject({ verdict: 'inconclusive', other: 2 });
        expect(r.attempts.every((a) => a.reason.startsWith('connected'))).toBe(true);
        expect(r.stdout).toContain('2 connect(s) were ACCEPTED');
        expect(r.code).toBe(3);
      } finally {
        server.close();
      }
    });
  });
});

// ===========================================================================
// 2b. The real kubectl against the project's API-server emulator (test/kube-emulator): every call
// the script makes is one kubectl accepts, the Service passes the API server's strict decoding
// and validation, and the owner reference really garbage-collects the Service.
describe.skipIf(CURL === undefined || KUBECTL === undefined)('dataplane-check.sh with the real kubectl against the API-server emulator', () => {
  let emu: KubeEmulator;
  let dir = '';
  beforeAll(async () => {
    emu = await startEmulator();
    dir = mkdtempSync(path.join(os.tmpdir(), 'dpc-emu-'));
    emu.writeKubeconfig(path.join(dir, 'kubeconfig'));
  });
  afterAll(async () => {
    await emu.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  // The probe's answer depends on this machine's network (the emulator's ClusterIPs are not
  // routed here): these tests look at the Kubernetes side only.
  const env = () => ({
    KUBECONFIG: path.join(dir, 'kubeconfig'), HOME: dir, TMPDIR: dir, KUBECTL: KUBECTL!, NAMESPACE: 'spark',
    ATTEMPTS: '1', CONNECT_TIMEOUT_SECONDS: '0.3', PROGRAM_DELAY_SECONDS: '0',
  });
  interface Stored { metadata: { name: string; uid: string; ownerReferences?: unknown[] } }
  const checkServices = () => (emu.listObjects('services', 'spark') as unknown as Stored[]).filter((s) => s.metadata.name.startsWith(`${NAME}-`));
  const pod = (name: string) => emu.seed({
    kind: 'Pod', apiVersion: 'v1',
    metadata: { name, namespace: 'spark' },
    spec: { containers: [{ name: 'check', image: 'alpine/k8s:1.34.1' }] },
    status: { phase: 'Running' },
  }) as Stored;

  it('create, get and delete go through; the Service gets a ClusterIP from the service CIDR; nothing is left', async () => {
    const owner = pod('dpc-run-1');
    emu.resetRequests();
    const r = await runScript({ shell: SHELLS.at(-1)!.argv, env: { ...env(), OWNER_POD_NAME: owner.metadata.name, OWNER_POD_UID: owner.metadata.uid } });
    expect(r.stderr).toBe('');
    expect([0, 2, 3]).toContain(r.code); // a verdict, whichever
    expect(r.verdict?.target).toMatch(/^10\.(9[6-9]|10\d|11[01])\.\d+\.\d+:7079$/);
    expect(r.deletedVerdict?.target).toBe(r.verdict?.target);
    expect(r.stdout).toContain('deleted Service spark/');
    const svcCalls = emu.requests.filter((q) => q.resource === 'services');
    expect(svcCalls.filter((q) => q.verb === 'create').map((q) => q.status)).toEqual([201]);
    expect(svcCalls.filter((q) => q.verb === 'get' && q.status === 200).length).toBeGreaterThanOrEqual(1);
    expect(svcCalls.filter((q) => q.verb === 'delete').map((q) => q.status)).toContain(200);
    // Only services, only in its namespace.
    expect(emu.requests.filter((q) => q.resource !== undefined && q.resource !== 'services')).toEqual([]);
    expect(svcCalls.every((q) => q.namespace === 'spark')).toBe(true);
    expect(checkServices()).toEqual([]);
  });

  it('killed with SIGKILL it cannot clean up, but the Service is owned by its pod: deleting the pod collects it', async () => {
    const owner = pod('dpc-run-2');
    const r = await runScript({
      shell: SHELLS.at(-1)!.argv,
      env: { ...env(), PROGRAM_DELAY_SECONDS: '30', OWNER_POD_NAME: owner.metadata.name, OWNER_POD_UID: owner.metadata.uid },
      onLine: (line) => (line.includes('waiting 30s for the proxy') ? 'SIGKILL' : undefined),
    });
    expect(r.signal).toBe('SIGKILL');
    const left = checkServices();
    expect(left).toHaveLength(1);
    expect(left[0]!.metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Pod', name: 'dpc-run-2', uid: owner.metadata.uid }]);
    emu.deleteObject('pods', 'spark', 'dpc-run-2'); // what ttlSecondsAfterFinished does to the Job's pod
    expect(checkServices()).toEqual([]);
  });
});

// ===========================================================================
// 3. Classification in a network namespace: iptables REJECT vs DROP.
const T = 0.4; // connect timeout, seconds
const N = 3; // attempts
const NS_PREFIX = 'sxs-dpc-';

function netnsPrerequisites(): { ok: boolean; reason: string } {
  if (!IS_ROOT) return { ok: false, reason: 'not root' };
  if (IP === undefined) return { ok: false, reason: 'no ip (iproute2)' };
  if (IPTABLES === undefined) return { ok: false, reason: 'no iptables' };
  if (CURL === undefined) return { ok: false, reason: 'no curl' };
  const probe = `${NS_PREFIX}probe-${process.pid}`;
  const add = spawnSync(IP, ['netns', 'add', probe], { encoding: 'utf8' });
  if (add.status !== 0) return { ok: false, reason: `ip netns add failed: ${add.stderr.trim()}` };
  spawnSync(IP, ['netns', 'del', probe]);
  return { ok: true, reason: '' };
}
const pre = netnsPrerequisites();
const skipNote = pre.ok ? '' : ` (SKIPPED: ${pre.reason}; needs root + iproute2 + iptables + curl)`;
if (!pre.ok) console.warn(`[dataplane-check.test] netns tests skipped: ${pre.reason}`);

/** Addresses in the namespace and what iptables does to TCP connects to them (port 7079). */
const RULES = {
  '127.0.2.1': ['REJECT', '--reject-with', 'icmp-port-unreachable'], // kube-proxy iptables, Calico eBPF, Cilium >= 1.15
  '127.0.2.2': ['REJECT', '--reject-with', 'tcp-reset'],
  '127.0.2.3': ['REJECT', '--reject-with', 'icmp-host-unreachable'], // EHOSTUNREACH, as Cilium's socket LB returns
  '127.0.1.1': ['DROP'], // older Cilium, internalTrafficPolicy: Local, ICMP blocked by policy
} as const;
const MEASURED: { shell: string; kase: string; verdict: string; ms: number[] }[] = [];

describe.skipIf(!pre.ok)(`dataplane-check.sh in a network namespace${skipNote}`, () => {
  const ns = `${NS_PREFIX}${process.pid}`;
  const ipt = (...args: string[]) => {
    const r = spawnSync(IP!, ['netns', 'exec', ns, IPTABLES!, '-w', '5', ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`iptables ${args.join(' ')}: ${r.stderr}`);
  };
  beforeAll(() => {
    // Namespaces left behind by a run that was killed: remove those whose pid is gone.
    for (const line of spawnSync(IP!, ['netns', 'list'], { encoding: 'utf8' }).stdout.split('\n')) {
      const m = new RegExp(`^(${NS_PREFIX}(\\d+))\\b`).exec(line.trim());
      if (m === null) continue;
      let alive = true;
      try { process.kill(Number(m[2]), 0); } catch (e) { alive = (e as NodeJS.ErrnoException).code === 'EPERM'; }
      if (!alive) spawnSync(IP!, ['netns', 'del', m[1]!]);
    }
    spawnSync(IP!, ['netns', 'del', ns]);
    const add = spawnSync(IP!, ['netns', 'add', ns], { encoding: 'utf8' });
    if (add.status !== 0) throw new Error(add.stderr);
    spawnSync(IP!, ['-n', ns, 'link', 'set', 'lo', 'up']);
    ipt('-N', 'SXS-DPC');
    for (const [addr, target] of Object.entries(RULES)) ipt('-A', 'SXS-DPC', '-d', `${addr}/32`, '-p', 'tcp', '--dport', '7079', '-j', ...target);
    // Mixed: every other connect dropped, the rest rejected.
    ipt('-A', 'SXS-DPC', '-d', '127.0.3.1/32', '-p', 'tcp', '--dport', '7079', '-m', 'statistic', '--mode', 'nth', '--every', '2', '--packet', '0', '-j', 'DROP');
    ipt('-A', 'SXS-DPC', '-d', '127.0.3.1/32', '-p', 'tcp', '--dport', '7079', '-j', 'REJECT');
    // The ClusterIPs of the whole-check runs: one chain each, so a fake delete can rewrite it.
    for (const [chain, addr, target] of [['SXS-CIP-A', '127.0.2.10', 'REJECT'], ['SXS-CIP-B', '127.0.1.10', 'DROP'], ['SXS-CIP-C', '127.0.2.11', 'REJECT']] as const) {
      ipt('-N', chain);
      ipt('-A', chain, '-d', `${addr}/32`, '-p', 'tcp', '--dport', '7079', '-j', target);
      ipt('-A', 'SXS-DPC', '-j', chain);
    }
    ipt('-A', 'OUTPUT', '-j', 'SXS-DPC');
  });
  afterAll(() => {
    spawnSync(IP!, ['netns', 'del', ns]);
    if (MEASURED.length > 0) {
      console.log('[dataplane-check.test] measured connect times (ms), netns, T=%s s:\n%s', T,
        MEASURED.map((m) => `  ${m.shell.padEnd(10)} ${m.kase.padEnd(38)} ${m.verdict.padEnd(13)} ${m.ms.map((x) => x.toFixed(1)).join(', ')}`).join('\n'));
    }
  });
  const env = { ATTEMPTS: String(N), CONNECT_TIMEOUT_SECONDS: String(T) };

  describe.each(SHELLS)('under $name', ({ name: shellName, argv: shell }) => {
    it.each([
      ['127.0.2.1', 'REJECT icmp-port-unreachable (kube-proxy)', 'Connection refused'],
      ['127.0.2.2', 'REJECT tcp-reset', 'Connection refused'],
      ['127.0.2.3', 'REJECT icmp-host-unreachable', 'No route to host'],
    ])('%s, %s: verdict reject, every connect refused within milliseconds, exit 0', async (addr, kase, reason) => {
      const r = await runScript({ shell, netns: ns, args: ['probe', addr, '7079'], env });
      MEASURED.push({ shell: shellName, kase, verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.verdict).toMatchObject({ verdict: 'reject', attempts: N, refused: N, timeout: 0, other: 0, target: `${addr}:7079` });
      expect(r.attempts).toHaveLength(N);
      for (const a of r.attempts) {
        expect(a.outcome).toBe('refused');
        expect(a.reason).toBe(reason);
        expect(a.ms).toBeLessThan(100);
      }
      expect(r.stdout).toContain('REJECT: fast fail works');
    });

    it('127.0.1.1, DROP: verdict drop, every connect waits the whole timeout, exit 2 with what to change', async () => {
      const r = await runScript({ shell, netns: ns, args: ['probe', '127.0.1.1', '7079'], env });
      MEASURED.push({ shell: shellName, kase: 'DROP', verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
      expect(r.code).toBe(2);
      expect(r.verdict).toMatchObject({ verdict: 'drop', attempts: N, refused: 0, timeout: N, other: 0 });
      for (const a of r.attempts) {
        expect(a.outcome).toBe('timeout');
        expect(a.ms).toBeGreaterThanOrEqual(T * 1000 * 0.95);
        expect(a.ms).toBeLessThan(T * 1000 + 500);
      }
      expect(r.elapsedMs).toBeGreaterThanOrEqual(N * T * 1000 * 0.95);
      for (const hint of ['service-no-backend-response=reject', 'internalTrafficPolicy: Local', 'ICMP', 'PROGRAM_DELAY_SECONDS']) expect(r.stdout).toContain(hint);
    });

    it('127.0.3.1, every other connect dropped: verdict inconclusive, exit 3', async () => {
      const r = await runScript({ shell, netns: ns, args: ['probe', '127.0.3.1', '7079'], env: { ...env, ATTEMPTS: '4' } });
      MEASURED.push({ shell: shellName, kase: 'mixed (nth DROP, else REJECT)', verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
      expect(r.code).toBe(3);
      expect(r.verdict).toMatchObject({ verdict: 'inconclusive', attempts: 4, refused: 2, timeout: 2 });
      expect(r.stdout).toContain('INCONCLUSIVE');
    });

    it('whole check: Service refused at once; deleted, its old ClusterIP is dropped (nftables/Cilium) -> cool-down advice', async () => {
      const k = fakeCluster({
        ...env, PROGRAM_DELAY_SECONDS: '0', PORT: '7079', FAKE_CLUSTER_IP: '127.0.2.10',
        // What kube-proxy nftables does once the Service is gone: "Drop traffic to unallocated ClusterIPs".
        FAKE_ON_DELETE: `${IPTABLES} -w 5 -R SXS-CIP-A 1 -d 127.0.2.10/32 -p tcp --dport 7079 -j DROP`,
      });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        MEASURED.push({ shell: shellName, kase: 'whole check: Service (REJECT)', verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
        MEASURED.push({ shell: shellName, kase: 'whole check: deleted Service (DROP)', verdict: r.deletedVerdict?.verdict ?? '?', ms: r.deletedAttempts.map((a) => a.ms) });
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.verdict).toMatchObject({ verdict: 'reject', refused: N, target: '127.0.2.10:7079' });
        for (const a of r.attempts) expect(a.ms).toBeLessThan(100);
        expect(r.deletedVerdict).toMatchObject({ verdict: 'drop', timeout: N, target: '127.0.2.10:7079' });
        for (const a of r.deletedAttempts) expect(a.ms).toBeGreaterThanOrEqual(T * 1000 * 0.95);
        expect(r.stdout).toContain('Keep COOLDOWN_SECONDS above');
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
      } finally {
        ipt('-R', 'SXS-CIP-A', '1', '-d', '127.0.2.10/32', '-p', 'tcp', '--dport', '7079', '-j', 'REJECT');
        k.dispose();
      }
    });

    it('whole check: a dataplane that drops: exit 2, and the Service is still deleted', async () => {
      const k = fakeCluster({ ...env, PROGRAM_DELAY_SECONDS: '0', PORT: '7079', FAKE_CLUSTER_IP: '127.0.1.10', CHECK_DELETED: 'false' });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        MEASURED.push({ shell: shellName, kase: 'whole check: Service (DROP)', verdict: r.verdict?.verdict ?? '?', ms: r.attempts.map((a) => a.ms) });
        expect(r.code).toBe(2);
        expect(r.verdict).toMatchObject({ verdict: 'drop', timeout: N });
        expect(r.stdout).toContain('DROP: fast fail does NOT work here');
        expect(k.calls().map(verbOf)).toEqual(['create', 'get', 'delete']);
      } finally {
        k.dispose();
      }
    });

    it('whole check: a dataplane that also rejects a deleted Service\'s ClusterIP', async () => {
      const k = fakeCluster({ ...env, PROGRAM_DELAY_SECONDS: '0', PORT: '7079', FAKE_CLUSTER_IP: '127.0.2.11' });
      try {
        const r = await runScript({ shell, netns: ns, env: k.env });
        expect(r.code).toBe(0);
        expect(r.verdict?.verdict).toBe('reject');
        expect(r.deletedVerdict?.verdict).toBe('reject');
        expect(r.stdout).toContain('deleting early does not bring the');
      } finally {
        k.dispose();
      }
    });
  });
});
