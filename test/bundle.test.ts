import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startEmulator } from './kube-emulator/index.ts';
import { podEventType, postCloudEvent } from './support/cloudevents.ts';
import { freePort, waitForHttpOk } from './support/process.ts';
import { driverPod, executorPod, sparkAppId } from './support/spark-pods.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The container runs one bundled file (`npm run bundle` → dist/main.mjs) with no node_modules:
 * build it exactly as the Dockerfile does, run it from an empty directory, and serve an event.
 */
describe('the container artifact (rolldown bundle)', () => {
  it('builds, starts without node_modules, creates a Service, and stops on SIGTERM', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sxs-bundle-'));
    const file = join(out, 'main.mjs');
    await run(join(ROOT, 'node_modules', '.bin', 'rolldown'), ['functions/executor-service/main.ts', '--platform', 'node', '--format', 'esm', '--file', file], { cwd: ROOT });
    expect(statSync(file).size).toBeGreaterThan(100_000);

    const emulator = await startEmulator();
    const kubeconfig = join(out, 'kubeconfig');
    emulator.writeKubeconfig(kubeconfig);
    const port = await freePort();
    const child = spawn(process.execPath, [file], {
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
    } finally {
      child.kill('SIGKILL');
      await emulator.stop();
    }
  });
});
