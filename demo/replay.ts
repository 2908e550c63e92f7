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
import { keepUnits, paragraph } from '../testkit/text-layout.ts';

/** Prints `text` wrapped to 100 columns (a terminal beside an editor), continuation lines indented by `hang`. */
const say = (first: string, text: string, hang = ' '.repeat(first.length)): void => {
  for (const line of paragraph(first, text, undefined, hang)) console.log(line);
};

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
    // Its JSON log lines (errors only here) would not fit the demo's 100 columns.
    LOG_LEVEL: 'error',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const url = `http://127.0.0.1:${port}/`;

let failed = false;
try {
  // Generous: on a loaded machine the .ts entry can take several seconds to start.
  await waitForHttpOk(`http://127.0.0.1:${port}/health/readiness`, { child, timeoutMs: 60_000 });
  say('', `spark-exec-svc demo: API server emulator at ${emulator.url}, function at ${url} (pid ${child.pid})`);
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
  console.log('');
  say('', `Lifecycle replayed in ${ms.toFixed(1)} ms (${emulator.requests.length} API requests seen by the emulator).`);
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
  console.log('');
  const [number, ...rest] = title.split(' ');
  say(`${number} `, rest.join(' '));
}

async function send(verb: 'add' | 'update' | 'delete', pod: PodBody): Promise<PostedReply> {
  const t0 = performance.now();
  const reply = await postPodEvent(url, verb, pod);
  const ms = (performance.now() - t0).toFixed(1);
  if (reply.status !== 200 || reply.data === undefined) throw new Error(`function answered ${reply.status}: ${reply.text}`);
  const services = reply.data.outcomes.map(
    (o) => `${o.service}: ${o.action}${o.detail === undefined || o.detail === '' ? '' : ` (${o.detail})`}`,
  );
  const answer = `${reply.type} [${ms} ms]${services.length === 0 && reply.data.reason !== undefined ? ` (${reply.data.reason})` : ''}`;
  say(`   ${verb.padEnd(6)} `, keepUnits(`${pod.metadata.name} -> ${answer}`), '          ');
  for (const s of services) say('          ', s, '            ');
  return reply;
}

/** What `kubectl get svc` would show, plus the endpoints a real cluster would compute from the selector. */
function table(): void {
  const services = emulator.listObjects('services', NAMESPACE, 'app.kubernetes.io/managed-by=spark-exec-svc');
  if (services.length === 0) {
    console.log('   (no Services of ours left)');
    return;
  }
  // kubectl-style columns within 100: the owner (the same driver for all) is said once above them,
  // the gone mark as its time of day.
  const owners = new Set(
    services.map((s) => (s as { metadata: { ownerReferences?: Array<{ name: string }> } }).metadata.ownerReferences?.[0]?.name ?? '-'),
  );
  say('   ', `owned by: ${[...owners].join(', ')}`);
  const row = (cells: readonly string[]) => `   ${cells.map((c, i) => c.padEnd([49, 12, 5, 10, 0][i] ?? 0)).join(' ')}`.trimEnd();
  console.log(row(['SERVICE', 'CLUSTER-IP', 'PORT', 'ENDPOINTS', 'GONE-AT (UTC)']));
  for (const svc of services as Array<{
    metadata: { name: string; annotations?: Record<string, string> };
    spec: { clusterIP?: string; selector: Record<string, string>; ports: Array<{ port: number }> };
  }>) {
    const selector = Object.entries(svc.spec.selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const endpoints = emulator.listObjects('pods', NAMESPACE, selector).length;
    const goneAt = svc.metadata.annotations?.['spark-exec-svc/executor-gone-at'];
    console.log(
      row([
        svc.metadata.name,
        svc.spec.clusterIP ?? '',
        String(svc.spec.ports[0]?.port ?? ''),
        String(endpoints),
        goneAt === undefined ? '-' : goneAt.slice(11),
      ]),
    );
  }
}
