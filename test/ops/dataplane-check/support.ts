/**
 * Helpers of the dataplane-check suites (knative/dataplane-check; docs/dataplanes.md): running the
 * script under each shell, parsing its verdicts, a fake kubectl, and the manifests built by kustomize.
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
import { typecheckVirtual } from '../typecheck-virtual.ts';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { kustomizeObjects, requireKubectl, skipWithoutKubectl } from '../kustomize.ts';
export { requireKubectl };

export const execFileAsync = promisify(execFile);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const DIR = 'knative/dataplane-check';
export const SCRIPT = path.join(ROOT, DIR, 'dataplane-check.sh');
export const SCRIPT_TEXT = readFileSync(SCRIPT, 'utf8');
export const NAME = 'spark-exec-svc-dataplane-check';
export const SELECTOR_LABEL = 'spark-exec-svc/dataplane-check';

/** Every setting the script reads (its header documents each). */
export const SCRIPT_SETTINGS = [
  'NAMESPACE',
  'PORT',
  'ATTEMPTS',
  'CONNECT_TIMEOUT_SECONDS',
  'FAST_MS',
  'PROGRAM_DELAY_SECONDS',
  'CLUSTERIP_WAIT_SECONDS',
  'CHECK_DELETED',
  'INTERNAL_TRAFFIC_POLICY',
  'OWNER_POD_NAME',
  'OWNER_POD_UID',
  'NODE_NAME',
  'KUBECTL',
  'CURL',
];

// ---------------------------------------------------------------------------
// Tools.
export const EXTRA_BIN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== ''), ...EXTRA_BIN_DIRS];
  return dirs.map((d) => path.join(d, name)).find((p) => existsSync(p));
}
/** true: kubectl is missing outside CI (the reason is printed); under CI=true the tests run and fail. */
export const SKIP_KUBECTL = skipWithoutKubectl('dataplane-check.test', 'the manifest checks');
export const CURL = findBinary('curl');
export const IP = findBinary('ip');
export const IPTABLES = findBinary('iptables');
export const BUSYBOX = findBinary('busybox');
export const SHELLCHECK = findBinary('shellcheck');
export const IS_ROOT = typeof process.getuid === 'function' && process.getuid() === 0;

/** The shells the script must work in: argv prefixes. */
export const SHELLS: { name: string; argv: string[] }[] = [{ name: 'sh', argv: [findBinary('sh') ?? '/bin/sh'] }];
if (BUSYBOX !== undefined && spawnSync(BUSYBOX, ['sh', '-c', 'exit 0']).status === 0) {
  SHELLS.push({ name: 'busybox sh', argv: [BUSYBOX, 'sh'] });
} else {
  console.warn(
    '[dataplane-check.test] busybox not found: the script is tested under sh only (alpine/k8s runs BusyBox ash; apt-get install -y busybox)',
  );
}
if (CURL === undefined) console.warn('[dataplane-check.test] SKIPPING the script tests: no curl (apt-get install -y curl)');

// ---------------------------------------------------------------------------
// Running the script.
export interface Attempt {
  n: number;
  outcome: string;
  ms: number;
  reason: string;
}
export interface Verdict {
  verdict: string;
  attempts: number;
  refused: number;
  timeout: number;
  other: number;
  maxMs: number;
  target: string;
}
export interface RunResult {
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

export function parseVerdict(stdout: string, label: string): Verdict | undefined {
  const m = new RegExp(
    `^${label}=(\\S+) attempts=(\\d+) refused=(\\d+) timeout=(\\d+) other=(\\d+) max_ms=([\\d.]+) target=(\\S+)$`,
    'm',
  ).exec(stdout);
  if (m === null) return undefined;
  return {
    verdict: m[1]!,
    attempts: Number(m[2]),
    refused: Number(m[3]),
    timeout: Number(m[4]),
    other: Number(m[5]),
    maxMs: Number(m[6]),
    target: m[7]!,
  };
}

export function parseAttempts(lines: string[]): Attempt[] {
  const out: Attempt[] = [];
  for (const line of lines) {
    const m = /^dataplane-check: attempt (\d+)\/\d+ to \S+: (\S+) after ([\d.]+) ms(?: \((.*)\))?$/.exec(line);
    if (m !== null) out.push({ n: Number(m[1]), outcome: m[2]!, ms: Number(m[3]), reason: m[4] ?? '' });
  }
  return out;
}

export interface RunOptions {
  shell: string[];
  args?: string[];
  env?: Record<string, string>;
  /** Run inside this network namespace (ip netns exec). */
  netns?: string;
  /** Called with each stdout line; may return a signal to send to the script. */
  onLine?: (line: string) => NodeJS.Signals | undefined;
  timeoutMs?: number;
}

export function runScript(opts: RunOptions): Promise<RunResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !SCRIPT_SETTINGS.includes(k)) env[k] = v;
  for (const k of ['http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'all_proxy', 'no_proxy', 'NO_PROXY'])
    delete env[k];
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
        code,
        signal,
        stdout,
        stderr,
        elapsedMs: performance.now() - started,
        attempts: parseAttempts(cut < 0 ? lines : lines.slice(0, cut)),
        deletedAttempts: cut < 0 ? [] : parseAttempts(lines.slice(cut + 1)),
        verdict: parseVerdict(stdout, 'VERDICT'),
        deletedVerdict: parseVerdict(stdout, 'DELETED_VERDICT'),
      });
    });
  });
}

/** A loopback port nothing listens on (the kernel answers a connect with RST: refused at once). */
export async function closedPort(): Promise<number> {
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
export const FAKE_KUBECTL = `#!/bin/sh
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

export interface FakeCluster {
  dir: string;
  env: Record<string, string>;
  calls(): string[][];
  created(): Record<string, unknown> | undefined;
  dispose(): void;
}
export function fakeCluster(extra: Record<string, string> = {}): FakeCluster {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dpc-fake-kubectl-'));
  const bin = path.join(dir, 'kubectl');
  writeFileSync(bin, FAKE_KUBECTL);
  chmodSync(bin, 0o755);
  return {
    dir,
    env: { PATH: `${dir}${path.delimiter}${process.env['PATH'] ?? ''}`, FAKE_KUBECTL_DIR: dir, NAMESPACE: 'spark', ...extra },
    calls: () =>
      existsSync(path.join(dir, 'calls.log'))
        ? readFileSync(path.join(dir, 'calls.log'), 'utf8')
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => l.split(' '))
        : [],
    created: () =>
      existsSync(path.join(dir, 'created.json'))
        ? (JSON.parse(readFileSync(path.join(dir, 'created.json'), 'utf8')) as Record<string, unknown>)
        : undefined,
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
/** The verb of a recorded call (first argument that is not a --flag). */
export const verbOf = (call: string[]) => call.find((a) => !a.startsWith('--'));

// ---------------------------------------------------------------------------
// Type check (excess properties), as test/manifests.test.ts does it.
export const TYPES: Record<string, { module: string; name: string }> = {
  'v1/ServiceAccount': { module: 'kubernetes-models/v1/ServiceAccount', name: 'IServiceAccount' },
  'v1/ConfigMap': { module: 'kubernetes-models/v1/ConfigMap', name: 'IConfigMap' },
  'v1/Service': { module: 'kubernetes-models/v1/Service', name: 'IService' },
  'rbac.authorization.k8s.io/v1/Role': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1/Role', name: 'IRole' },
  'rbac.authorization.k8s.io/v1/RoleBinding': {
    module: 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding',
    name: 'IRoleBinding',
  },
  'batch/v1/Job': { module: 'kubernetes-models/batch/v1/Job', name: 'IJob' },
};
export const MODELS: Record<string, { new (data: never): { validate(): void } }> = {
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'batch/v1/Job': Job,
};
export type Json = Record<string, unknown>;
export interface K8sObject extends Json {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}
export const keyOf = (o: { apiVersion: string; kind: string }) => `${o.apiVersion}/${o.kind}`;

export function excessPropertyErrors(objs: K8sObject[]): string[] {
  const virtual = path.join(ROOT, 'test', '__dataplane_check_types__.virtual.ts');
  const keys = Object.keys(TYPES);
  const lines = keys.map((k, i) => `import type { ${TYPES[k]!.name} as T${i} } from '${TYPES[k]!.module}';`);
  for (const [i, o] of objs.entries()) lines.push(`export const o${i}: T${keys.indexOf(keyOf(o))} = ${JSON.stringify(o)};`);
  const text = lines.join('\n');
  return typecheckVirtual(virtual, text).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

export function schemaErrors(objs: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objs) {
    const Model = MODELS[keyOf(o)];
    if (Model === undefined) {
      problems.push(`${keyOf(o)} ${o.metadata.name}: no validator`);
      continue;
    }
    try {
      new Model(o as never).validate();
    } catch (e) {
      problems.push(`${keyOf(o)} ${o.metadata.name}: ${(e as Error).message}`);
    }
  }
  return problems;
}

export async function kustomize(dir: string): Promise<K8sObject[]> {
  const { stdout } = await execFileAsync(requireKubectl(), ['kustomize', dir], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  return loadAll(stdout).filter((d) => d !== null && d !== undefined) as K8sObject[];
}
/** The function's install as a user builds it, with knative/base/image.env set (test/ops/kustomize.ts). */
export const functionInstall = (): Promise<K8sObject[]> => kustomizeObjects<K8sObject>(requireKubectl(), 'knative/base');

// ===========================================================================
// 1. Manifests.
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}
export interface JobObj extends K8sObject {
  spec: {
    backoffLimit?: number;
    activeDeadlineSeconds?: number;
    ttlSecondsAfterFinished?: number;
    template: {
      spec: {
        serviceAccountName?: string;
        restartPolicy?: string;
        terminationGracePeriodSeconds?: number;
        securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
        containers: {
          name: string;
          image?: string;
          command?: string[];
          args?: string[];
          env?: EnvVar[];
          securityContext?: {
            allowPrivilegeEscalation?: boolean;
            readOnlyRootFilesystem?: boolean;
            privileged?: boolean;
            capabilities?: { drop?: string[]; add?: string[] };
          };
          resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
          volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
        }[];
        volumes?: { name: string; configMap?: { name: string }; emptyDir?: unknown }[];
      };
    };
  };
}
