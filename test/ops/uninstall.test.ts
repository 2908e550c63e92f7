/**
 * The documented uninstall's one step that touches users' objects: scripts/delete-leftover-services.sh,
 * run with the real kubectl against the API-server emulator after the function made, marked and
 * left Services exactly as it does in a cluster. The rule (docs/deploy.md, "Uninstall"): never
 * delete a Service a live executor may still advertise; delete only those whose driver is gone
 * or finished, or whose executor is gone and marked for at least the cool-down.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { EXECUTOR_GONE_AT_ANNOTATION, MANAGED_BY_LABEL } from '../../shared/model/labels.ts';
import { executorServiceName } from '../../shared/model/naming.ts';
import { type KubeEmulator, startEmulator } from '../../packages/kube-emulator/index.ts';
import { startHarness } from '../../testkit/harness.ts';
import { type CommandResult, runCommand } from '../../testkit/process.ts';
import { requireKubectl, skipWithoutKubectl } from './kustomize.ts';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = path.join(ROOT, 'scripts/delete-leftover-services.sh');
const NS = 'spark';
const SKIP_KUBECTL = skipWithoutKubectl('uninstall.test', 'the uninstall script against the emulator');

interface Svc {
  metadata: {
    name: string;
    uid: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { name: string; uid: string }[];
  };
}

let emulator: KubeEmulator | undefined;
let work: string | undefined;
afterEach(async () => {
  await emulator?.stop();
  emulator = undefined;
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
  work = undefined;
});

const runScript = (args: string[], env: Record<string, string> = {}): Promise<CommandResult> =>
  runCommand('sh', [SCRIPT, ...args], { env });

/**
 * A namespace as an uninstall finds it, every Service made by the real function:
 *  - app "live": driver running; executor 1 running; executor 2 gone, marked 10 min ago (cool-down
 *    over); executor 3 gone, marked 10 s ago (in its cool-down); executor 4 being decommissioned
 *    (deletionTimestamp-like: still running);
 *  - app "done": driver Succeeded (Spark keeps the pod) before the function saw it: both Services left;
 *  - a Service of someone else, and one with our label but no owner.
 */
async function namespaceAfterUninstall(): Promise<{
  emu: KubeEmulator;
  env: Record<string, string>;
  live: { driver: PodBody; executors: PodBody[] };
  names: Record<'live1' | 'live2' | 'live3' | 'live4' | 'done1' | 'done2', string>;
}> {
  // The API server's clock, pinned while the marks are written in the past (the function dates them by it).
  let pinned: Date | undefined;
  const emu = await startEmulator({ clock: () => pinned ?? new Date() });
  emulator = emu;
  const h = await startHarness({ COOLDOWN_SECONDS: '300' }, { emulator: emu });
  const liveApp = sparkAppId(1);
  const doneApp = sparkAppId(2);
  const liveDriver = h.createPod(driverPod({ namespace: NS, appId: liveApp, name: 'live-driver' }));
  const doneDriver = h.createPod(driverPod({ namespace: NS, appId: doneApp, name: 'done-driver' }));
  const ref = (d: PodBody) => ({ name: d.metadata.name, uid: d.metadata.uid! });
  const liveExecutors = ['1', '2', '3', '4'].map((execId) =>
    h.createPod(executorPod({ namespace: NS, appId: liveApp, execId, driver: ref(liveDriver), blockManagerPort: 7079 })),
  );
  const doneExecutors = ['1', '2'].map((execId) =>
    h.createPod(executorPod({ namespace: NS, appId: doneApp, execId, driver: ref(doneDriver), blockManagerPort: 7079 })),
  );
  for (const pod of [...liveExecutors, ...doneExecutors]) expect((await h.send('add', pod)).status).toBe(200);
  expect(h.services(NS)).toHaveLength(6);

  const real = Date.now();
  for (const [pod, agoSeconds] of [
    [liveExecutors[1]!, 600],
    [liveExecutors[2]!, 10],
  ] as const) {
    pinned = new Date(real - agoSeconds * 1000);
    emu.deleteObject('pods', NS, pod.metadata.name);
    expect((await h.send('delete', pod)).type).toBe('spark-exec-svc.service.marked-gone');
  }
  pinned = undefined;
  // The done app's driver finishes while the function is already being uninstalled (no event).
  emu.patchObject('pods', NS, doneDriver.metadata.name, { status: { phase: 'Succeeded' } });
  for (const pod of doneExecutors) emu.deleteObject('pods', NS, pod.metadata.name);
  await h.close(); // the function is gone; the emulator stays

  emu.seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'someone-elses', namespace: NS, labels: { app: 'web' } },
    spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
  });
  emu.seed({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'ours-without-owner', namespace: NS, labels: { [MANAGED_BY_LABEL]: 'spark-exec-svc' } },
    spec: { selector: { app: 'x' }, ports: [{ port: 7079 }] },
  });

  work = mkdtempSync(path.join(tmpdir(), 'sxs-uninstall-'));
  const kubeconfig = path.join(work, 'kubeconfig');
  emu.writeKubeconfig(kubeconfig);
  const names = {
    live1: executorServiceName(liveApp, '1'),
    live2: executorServiceName(liveApp, '2'),
    live3: executorServiceName(liveApp, '3'),
    live4: executorServiceName(liveApp, '4'),
    done1: executorServiceName(doneApp, '1'),
    done2: executorServiceName(doneApp, '2'),
  };
  const marks = Object.fromEntries(
    (emu.listObjects('services', NS) as unknown as Svc[]).map((s) => [
      s.metadata.name,
      s.metadata.annotations?.[EXECUTOR_GONE_AT_ANNOTATION],
    ]),
  );
  expect(marks[names.live2]).toBeDefined();
  expect(marks[names.live3]).toBeDefined();
  expect(marks[names.live1]).toBeUndefined();
  return {
    emu,
    env: { KUBECTL: requireKubectl(), KUBECTL_ARGS: `--kubeconfig ${kubeconfig} --cache-dir ${path.join(work, 'cache')}` },
    live: { driver: liveDriver, executors: liveExecutors },
    names,
  };
}

const serviceNames = (emu: KubeEmulator) =>
  emu
    .listObjects('services', NS)
    .map((s) => (s as unknown as Svc).metadata.name)
    .sort();

describe.skipIf(SKIP_KUBECTL)('scripts/delete-leftover-services.sh against the API-server emulator', () => {
  it('deletes only Services of finished drivers and of executors gone past the cool-down; a live executor keeps its Service', async () => {
    const { emu, env, live, names } = await namespaceAfterUninstall();
    const before = serviceNames(emu);
    const r = await runScript([NS], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const after = serviceNames(emu);
    expect(before.filter((n) => !after.includes(n)).sort()).toEqual([names.live2, names.done1, names.done2].sort());
    expect(after).toEqual(expect.arrayContaining([names.live1, names.live3, names.live4, 'someone-elses', 'ours-without-owner']));
    // The invariant: every live executor of a live driver still has its Service, unmarked, owned by the driver.
    for (const pod of live.executors.filter((p) => emu.getObject('pods', NS, p.metadata.name) !== undefined)) {
      const svc = emu.getObject(
        'services',
        NS,
        executorServiceName(pod.metadata.labels['spark-app-selector']!, pod.metadata.labels['spark-exec-id']!),
      ) as unknown as Svc | undefined;
      expect(svc, pod.metadata.name).toBeDefined();
      expect(svc!.metadata.annotations?.[EXECUTOR_GONE_AT_ANNOTATION]).toBeUndefined();
      expect(svc!.metadata.ownerReferences?.[0]?.uid).toBe(live.driver.metadata.uid);
    }
    expect(r.stdout).toContain(`delete ${NS}/${names.done1}: its driver done-driver is gone or finished`);
    expect(r.stdout).toMatch(new RegExp(`delete ${NS}/${names.live2}: its executor \\S+ is gone, marked \\S+ \\(cool-down 300s over\\)`));
    expect(r.stdout).toContain(`${NS}: deleted 3, kept 4`);
    // Idempotent: a second run deletes nothing more.
    const again = await runScript([NS], env);
    expect(again.code).toBe(0);
    expect(serviceNames(emu)).toEqual(after);
    expect(again.stdout).toContain(`${NS}: deleted 0, kept 4`);
  });

  it('--dry-run deletes nothing and names what it would delete; a shorter --cooldown-seconds covers the recent mark too', async () => {
    const { emu, env, names } = await namespaceAfterUninstall();
    const before = serviceNames(emu);
    const dry = await runScript(['--dry-run', '--cooldown-seconds', '5', NS], env);
    expect(dry.code).toBe(0);
    expect(serviceNames(emu)).toEqual(before);
    for (const n of [names.live2, names.live3, names.done1, names.done2]) expect(dry.stdout).toContain(`would delete ${NS}/${n}`);
    expect(dry.stdout).toContain(`${NS}: would delete 4, kept 3`);
  });

  it('a failed read of a driver never counts as "gone": nothing is deleted and the exit status says so', async () => {
    const { emu, env } = await namespaceAfterUninstall();
    const before = serviceNames(emu);
    emu.faults.add({ verb: 'get', resource: 'pods', fault: { kind: 'status', code: 500 }, times: Infinity });
    const r = await runScript([NS], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot read driver pod/);
    expect(serviceNames(emu)).toEqual(before);
    expect(emu.countRequests({ verb: 'delete', resource: 'services' })).toBe(0);
  });

  it('each delete carries the uid and resourceVersion it decided on: a Service changed in between is left alone', async () => {
    const { emu, env, names } = await namespaceAfterUninstall();
    // A kubectl that lets someone annotate the Service just before the script's DELETE reaches the server.
    const racer = path.join(work!, 'racing-kubectl');
    writeFileSync(
      racer,
      [
        '#!/bin/sh',
        'for a in "$@"; do case "$a" in /api/v1/namespaces/*/services/*) ns=${a#/api/v1/namespaces/}; ns=${ns%%/*}; svc=${a##*/};',
        `  "$REAL_KUBECTL" $KUBECTL_ARGS -n "$ns" annotate service "$svc" example.com/touched=yes --overwrite >/dev/null ;; esac; done`,
        'exec "$REAL_KUBECTL" "$@"',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const r = await runScript([NS], { ...env, KUBECTL: racer, REAL_KUBECTL: requireKubectl() });
    expect(r.code).toBe(0);
    for (const n of [names.live2, names.done1, names.done2]) {
      expect(r.stdout).toContain(`keep   ${NS}/${n}: changed since it was read; left alone (run again)`);
      expect(emu.getObject('services', NS, n)).toBeDefined();
    }
    expect(r.stdout).toContain(`${NS}: deleted 0, kept 7`);
  });

  it('refuses bad usage with status 2', async () => {
    expect((await runScript([])).code).toBe(2);
    expect((await runScript(['--cooldown-seconds', 'soon', NS])).code).toBe(2);
  });
});

describe('scripts/delete-leftover-services.sh is plain POSIX sh', () => {
  const shellcheck = ['/usr/bin/shellcheck', '/bin/shellcheck'].find((p) => existsSync(p));
  it.skipIf(shellcheck === undefined)('passes shellcheck -s sh', async () => {
    const out = await new Promise<{ code: number; text: string }>((resolve) => {
      const c = spawn(shellcheck!, ['-s', 'sh', SCRIPT]);
      let text = '';
      c.stdout.on('data', (d: Buffer) => {
        text += d.toString();
      });
      c.on('close', (code) => resolve({ code: code ?? -1, text }));
    });
    expect(out.text).toBe('');
    expect(out.code).toBe(0);
  });
  it('is executable (docs/deploy.md runs it as scripts/delete-leftover-services.sh)', () => {
    expect(statSync(SCRIPT).mode & 0o111).toBe(0o111);
  });
});
