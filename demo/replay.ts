/**
 * `npm start`: the embedded default. Starts the Kubernetes API-server emulator (packages/kube-emulator) on loopback,
 * runs the real function entry point (functions/executor-service/main.ts) against it as a child
 * process, replays one Spark application's life as ApiServerSource CloudEvents over HTTP (testkit), and
 * prints what happened to each Service. No cluster needed.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../packages/kube-emulator/index.ts';
import { type PostedReply, postPodEvent } from '../testkit/apiserversource.ts';
import { freePort, waitForHttpOk } from '../testkit/process.ts';
import { type PodBody, driverPod, executorPod, nonSparkPod, sparkAppId } from '../testkit/spark-pods.ts';

const NAMESPACE = 'spark';
const EXECUTORS = 3;
const BLOCK_MANAGER_PORT = 7079;

const entry = fileURLToPath(new URL('../functions/executor-service/main.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'spark-exec-svc-demo-'));
const emulator = await startEmulator();
const kubeconfig = join(dir, 'kubeconfig');
emulator.writeKubeconfig(kubeconfig);
const port = await freePort();
const child = spawn(process.execPath, [entry], {
  env: {
    ...process.env,
    KUBECONFIG: kubeconfig,
    PORT: String(port),
    WATCH_NAMESPACES: NAMESPACE,
    COOLDOWN_SECONDS: '300',
    LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const url = `http://127.0.0.1:${port}/`;

let failed = false;
try {
  // Generous: on a loaded machine the .ts entry can take several seconds to start.
  await waitForHttpOk(`http://127.0.0.1:${port}/health/readiness`, { child, timeoutMs: 60_000 });
  console.log(`spark-exec-svc demo: API server emulator at ${emulator.url}, function at ${url} (pid ${child.pid})`);
  const started = performance.now();
  const appId = sparkAppId(Date.now() % 100000);

  step('1. The driver pod appears (opted in with label spark-exec-svc/enabled=true)');
  const driver = emulator.seed(driverPod({ namespace: NAMESPACE, appId })) as PodBody;
  await send('add', driver);

  step(`2. ${EXECUTORS} executors appear (Spark sets an ownerReference to the driver, spark.blockManager.port=${BLOCK_MANAGER_PORT})`);
  const driverRef = { name: driver.metadata.name, uid: driver.metadata.uid! };
  const executors: PodBody[] = [];
  for (let i = 1; i <= EXECUTORS; i++) {
    const pod = emulator.seed(
      executorPod({ namespace: NAMESPACE, appId, execId: String(i), driver: driverRef, blockManagerPort: BLOCK_MANAGER_PORT }),
    ) as PodBody;
    executors.push(pod);
    await send('add', pod);
  }
  table();

  step('3. At-least-once delivery: the add of executor 1 arrives again; a non-Spark pod changes');
  await send('add', executors[0]!);
  await send('update', emulator.seed(nonSparkPod(NAMESPACE, 'nginx-7d9c')) as PodBody);

  step('4. Executor 2 is decommissioned: its pod is deleted; the Service stays (no endpoints: peers get "connection refused")');
  const lost = executors[1]!;
  emulator.deleteObject('pods', NAMESPACE, lost.metadata.name);
  await send('delete', lost);
  table();

  step('5. The driver is deleted: Kubernetes garbage collection removes every Service it owns');
  // A real cluster's garbage collector runs after the delete, so the driver's delete event usually
  // finds the Services still there: the function reads that their owner is gone and leaves them to GC.
  const releaseGarbageCollection = emulator.holdGarbageCollection();
  emulator.deleteObject('pods', NAMESPACE, driver.metadata.name);
  await send('delete', driver);
  releaseGarbageCollection();
  console.log('   (then the garbage collector runs)');
  table();

  const ms = performance.now() - started;
  console.log(`\nLifecycle replayed in ${ms.toFixed(1)} ms (${emulator.requests.length} API requests seen by the emulator).`);
} catch (error) {
  failed = true;
  console.error('demo failed:', error);
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  await emulator.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

function step(title: string): void {
  console.log(`\n${title}`);
}

async function send(verb: 'add' | 'update' | 'delete', pod: PodBody): Promise<PostedReply> {
  const t0 = performance.now();
  const reply = await postPodEvent(url, verb, pod);
  const ms = (performance.now() - t0).toFixed(1);
  if (reply.status !== 200 || reply.data === undefined) throw new Error(`function answered ${reply.status}: ${reply.text}`);
  const services = reply.data.outcomes.map(
    (o) => `${o.service}: ${o.action}${o.detail === undefined || o.detail === '' ? '' : ` (${o.detail})`}`,
  );
  console.log(
    `   ${verb.padEnd(6)} ${pod.metadata.name.padEnd(44)} -> ${reply.type} [${ms} ms]${services.length > 0 ? `\n${services.map((s) => `          ${s}`).join('\n')}` : reply.data.reason === undefined ? '' : ` (${reply.data.reason})`}`,
  );
  return reply;
}

/** What `kubectl get svc` would show, plus the endpoints a real cluster would compute from the selector. */
function table(): void {
  const services = emulator.listObjects('services', NAMESPACE, 'app.kubernetes.io/managed-by=spark-exec-svc');
  if (services.length === 0) {
    console.log('   (no Services of ours left)');
    return;
  }
  console.log(
    `   ${'SERVICE'.padEnd(52)} ${'CLUSTER-IP'.padEnd(13)} ${'PORT'.padEnd(5)} ${'OWNER'.padEnd(24)} ${'ENDPOINTS'.padEnd(9)} EXECUTOR-GONE-AT`,
  );
  for (const svc of services as Array<{
    metadata: { name: string; ownerReferences?: Array<{ name: string }>; annotations?: Record<string, string> };
    spec: { clusterIP?: string; selector: Record<string, string>; ports: Array<{ port: number }> };
  }>) {
    const selector = Object.entries(svc.spec.selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const endpoints = emulator.listObjects('pods', NAMESPACE, selector).length;
    console.log(
      `   ${svc.metadata.name.padEnd(52)} ${(svc.spec.clusterIP ?? '').padEnd(13)} ${String(svc.spec.ports[0]?.port ?? '').padEnd(5)} ${(svc.metadata.ownerReferences?.[0]?.name ?? '-').slice(0, 24).padEnd(24)} ${String(endpoints).padEnd(9)} ${svc.metadata.annotations?.['spark-exec-svc/executor-gone-at'] ?? '-'}`,
    );
  }
}
