/**
 * knative/dataplane-check as kustomize builds it: the Job, its RBAC and settings, checked against
 * the Kubernetes types and schemas (docs/dataplanes.md "The dataplane check"); and the script run
 * with the real kubectl against the API-server emulator.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator } from '../../../packages/kube-emulator/index.ts';
import type { KubeEmulator } from '../../../packages/kube-emulator/index.ts';
import {
  ROOT,
  DIR,
  SCRIPT_TEXT,
  NAME,
  SCRIPT_SETTINGS,
  SKIP_KUBECTL,
  requireKubectl,
  CURL,
  SHELLS,
  runScript,
  closedPort,
  type Json,
  type K8sObject,
  excessPropertyErrors,
  schemaErrors,
  kustomize,
  functionInstall,
  type EnvVar,
  type JobObj,
} from './support.ts';
describe.skipIf(SKIP_KUBECTL)('knative/dataplane-check manifests', () => {
  let objs: K8sObject[] = [];
  beforeAll(async () => {
    objs = await kustomize(DIR);
  });
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
    (bad['spec'] as Json)['backofLimit'] = 0;
    expect(excessPropertyErrors([bad as K8sObject]).some((e) => e.includes('backofLimit'))).toBe(true);
  });

  it("RBAC: the Job's ServiceAccount may only create, get and delete Services in its namespace", () => {
    const sa = job().spec.template.spec.serviceAccountName;
    expect(sa).toBe(NAME);
    expect(objs.some((o) => o.kind === 'ServiceAccount' && o.metadata.name === sa)).toBe(true);
    const bindings = objs.filter((o) => o.kind === 'RoleBinding') as (K8sObject & {
      roleRef: { kind: string; name: string };
      subjects: { kind: string; name: string; namespace?: string }[];
    })[];
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

  it("the Job runs once, keeps its log, and its deadlines cover the script's worst case", () => {
    const spec = job().spec;
    const pod = spec.template.spec;
    expect(spec.backoffLimit).toBe(0);
    expect(pod.restartPolicy).toBe('Never');
    expect(spec.ttlSecondsAfterFinished).toBeGreaterThanOrEqual(600);
    const n = (k: string) => Number(env()[k]?.value);
    const kubectlCall = 10; // --request-timeout of every kubectl call
    const probe = n('ATTEMPTS') * (n('CONNECT_TIMEOUT_SECONDS') + 2); // curl --max-time per attempt
    const worst =
      kubectlCall /* create */ +
      n('CLUSTERIP_WAIT_SECONDS') * (kubectlCall + 1) /* get, pause */ +
      2 * n('PROGRAM_DELAY_SECONDS') +
      2 * probe +
      3 * kubectlCall +
      2 /* delete, retried */;
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
    expect(e['INTERNAL_TRAFFIC_POLICY']?.value, "as the function's Services").toBe('Cluster');
    expect(e['PORT']?.value).toBe('7079');
    // HOME (kubectl's cache) is on a writable emptyDir; the root filesystem is read-only.
    const tmp = job().spec.template.spec.volumes?.find((v) => v.emptyDir !== undefined);
    expect(container().volumeMounts?.find((m) => m.name === tmp?.name)?.mountPath).toBe(e['HOME']?.value);
    // The values pass the script's own validation: probe a closed port with exactly these settings.
    if (CURL === undefined) return;
    const values = Object.fromEntries(
      Object.entries(e)
        .filter(([, v]) => v.value !== undefined)
        .map(([k, v]) => [k, v.value!]),
    );
    const r = await runScript({ shell: SHELLS[0]!.argv, args: ['probe', '127.0.0.1', String(await closedPort())], env: values });
    expect(r.stderr).toBe('');
    expect(r.verdict?.verdict).toBe('reject');
    expect(r.verdict?.attempts).toBe(Number(e['ATTEMPTS']?.value));
  });

  it('runs non-root, read-only, without privileges, with bounded resources, from a pinned image', () => {
    const pod = job().spec.template.spec;
    const c = container();
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.securityContext?.privileged).not.toBe(true);
    expect(c.securityContext?.capabilities?.add).toBeUndefined();
    expect(c.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.resources?.limits).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.image).toMatch(/^alpine\/k8s:\d+\.\d+\.\d+$|@sha256:[0-9a-f]{64}$/);
  });

  it("does not collide with the function's own install (knative/base)", async () => {
    const base = await functionInstall();
    const names = new Set(base.map((o) => `${o.kind}/${o.metadata.name}`));
    for (const o of objs) expect(names.has(`${o.kind}/${o.metadata.name}`), `${o.kind}/${o.metadata.name}`).toBe(false);
  });

  it('a wrapping kustomization moves it to another namespace', async () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'dpc-wrap-'));
    try {
      writeFileSync(
        path.join(tmp, 'kustomization.yaml'),
        [
          'apiVersion: kustomize.config.k8s.io/v1beta1',
          'kind: Kustomization',
          'namespace: team-a',
          'resources:',
          `  - ${path.relative(tmp, path.join(ROOT, DIR))}`,
          'images:',
          '  - name: alpine/k8s',
          '    newName: registry.example.com/mirror/k8s',
          '    newTag: "1.34.1"',
          '',
        ].join('\n'),
      );
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

  it("the function's default cool-down exceeds the cool-down rule of docs/dataplanes.md", async () => {
    // JVM DNS cache (networkaddress.cache.ttl) 30 s + CoreDNS cache up to 30 s + proxy programming
    // lag (allow 10 s) + Spark's memory of the lost executor (spark.network.timeout 120 s).
    const rule = 30 + 30 + 10 + 120;
    const base = await functionInstall();
    const ksvc = base.find((o) => o.kind === 'Service' && o.apiVersion.startsWith('serving.knative.dev/')) as K8sObject & {
      spec: { template: { spec: { containers: { env?: EnvVar[] }[] } } };
    };
    const cooldown = Number(ksvc.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'COOLDOWN_SECONDS')?.value);
    expect(cooldown === 0 || cooldown > rule, `COOLDOWN_SECONDS ${cooldown}`).toBe(true);
    const doc = readFileSync(path.join(ROOT, 'docs/dataplanes.md'), 'utf8');
    for (const term of ['networkaddress.cache.ttl', 'COOLDOWN_SECONDS', 'spark.network.timeout', String(rule)]) expect(doc).toContain(term);
  });
});

// ===========================================================================
// 2b. The real kubectl against the project's API-server emulator (test/kube-emulator): every call
// the script makes is one kubectl accepts, the Service passes the API server's strict decoding
// and validation, and the owner reference really garbage-collects the Service.
describe.skipIf(CURL === undefined || SKIP_KUBECTL)('dataplane-check.sh with the real kubectl against the API-server emulator', () => {
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
    KUBECONFIG: path.join(dir, 'kubeconfig'),
    HOME: dir,
    TMPDIR: dir,
    KUBECTL: requireKubectl(),
    NAMESPACE: 'spark',
    ATTEMPTS: '1',
    CONNECT_TIMEOUT_SECONDS: '0.3',
    PROGRAM_DELAY_SECONDS: '0',
  });
  interface Stored {
    metadata: { name: string; uid: string; ownerReferences?: unknown[] };
  }
  const checkServices = () =>
    (emu.listObjects('services', 'spark') as unknown as Stored[]).filter((s) => s.metadata.name.startsWith(`${NAME}-`));
  const pod = (name: string) =>
    emu.seed({
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: { name, namespace: 'spark' },
      spec: { containers: [{ name: 'check', image: 'alpine/k8s:1.34.1' }] },
      status: { phase: 'Running' },
    }) as Stored;

  it('create, get and delete go through; the Service gets a ClusterIP from the service CIDR; nothing is left', async () => {
    const owner = pod('dpc-run-1');
    emu.resetRequests();
    const r = await runScript({
      shell: SHELLS.at(-1)!.argv,
      env: { ...env(), OWNER_POD_NAME: owner.metadata.name, OWNER_POD_UID: owner.metadata.uid },
    });
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
