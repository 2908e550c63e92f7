import { execFile, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startEmulator } from '../../packages/kube-emulator/index.ts';
import { podEventType, postCloudEvent } from '../../testkit/apiserversource.ts';
import { freePort, waitForHttpOk } from '../../testkit/process.ts';
import { driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The container runs one bundled file with no node_modules: `npm run bundle` (scripts/bundle.ts)
 * → main.cjs, its loader start.cjs and main.cjs's V8 code cache. Build it exactly as the
 * Dockerfile does, run `node start.cjs` from a read-only directory without node_modules, and
 * serve an event.
 */
describe('the container artifact (rolldown bundle + code cache)', () => {
  it('builds, starts without node_modules, creates a Service, and stops on SIGTERM', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sxs-bundle-'));
    await run(process.execPath, [join(ROOT, 'scripts', 'bundle.ts'), out], { cwd: ROOT });
    expect(statSync(join(out, 'main.cjs')).size).toBeGreaterThan(100_000);
    expect(statSync(join(out, 'main.cjs.cache')).size).toBeGreaterThan(100_000);
    // The Dockerfile's last stage makes the cache again with the image's node: the same command.
    await run(process.execPath, [join(out, 'start.cjs'), '--write-code-cache'], { cwd: out });
    const shipped = Object.fromEntries(readdirSync(out).map((f) => [f, readFileSync(join(out, f))]));

    const emulator = await startEmulator();
    const kubeconfig = join(out, 'kubeconfig');
    emulator.writeKubeconfig(kubeconfig);
    const port = await freePort();
    chmodSync(out, 0o555); // as readOnlyRootFilesystem; start.cjs must not try to write
    const child = spawn(process.execPath, [join(out, 'start.cjs')], {
      cwd: out, // no node_modules anywhere up from here
      env: { PATH: process.env['PATH'] ?? '', KUBECONFIG: kubeconfig, PORT: String(port), WATCH_NAMESPACES: 'spark', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitForHttpOk(`http://127.0.0.1:${port}/health/readiness`, { child });
      const appId = sparkAppId(5);
      const driver = emulator.seed(driverPod({ namespace: 'spark', appId })) as { metadata: { name: string; uid: string } };
      const exec = emulator.seed(executorPod({ namespace: 'spark', appId, execId: '1', driver: driver.metadata, blockManagerPort: 7079 }));
      const reply = await postCloudEvent(`http://127.0.0.1:${port}/`, { type: podEventType('add'), data: exec });
      expect(reply.status, output).toBe(200);
      expect(reply.type).toBe('spark-exec-svc.service.created');
      expect(emulator.listObjects('services', 'spark')).toHaveLength(1);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      // The code cache was accepted (start.cjs warns otherwise) and nothing was written next to it.
      expect(output).not.toContain('code cache not used');
      expect(
        Object.fromEntries(
          readdirSync(out)
            .filter((f) => f !== 'kubeconfig')
            .map((f) => [f, readFileSync(join(out, f))]),
        ),
      ).toEqual(shipped);
    } finally {
      child.kill('SIGKILL');
      chmodSync(out, 0o755);
      await emulator.stop();
    }
  });

  it('a code cache made for another main.cjs is not used: a warning, and the function still starts', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sxs-bundle-stale-'));
    await run(process.execPath, [join(ROOT, 'scripts', 'bundle.ts'), out], { cwd: ROOT });
    const cache = readFileSync(join(out, 'main.cjs.cache'));
    cache[0] = cache[0]! ^ 1; // the crc32 of the source it was made for
    writeFileSync(join(out, 'main.cjs.cache'), cache);
    // Never called: the function only needs a kubeconfig to start.
    const kubeconfig = join(out, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
    );
    const port = await freePort();
    const child = spawn(process.execPath, [join(out, 'start.cjs')], {
      cwd: out,
      env: { PATH: process.env['PATH'] ?? '', KUBECONFIG: kubeconfig, PORT: String(port), WATCH_NAMESPACES: 'spark', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await waitForHttpOk(`http://127.0.0.1:${port}/health/readiness`, { child });
      expect(output).toContain('"msg":"code cache not used"');
      expect(output).toContain('was made for another main.cjs');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
