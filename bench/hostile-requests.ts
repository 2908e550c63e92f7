/**
 * What hostile requests cost the function (issue 17, class 9), measured on the real entry point
 * (functions/executor-service/main.ts as a child process) against the kube-emulator:
 *
 *   1. Slow bodies: C connections that send all but the last bytes of a 1 MiB body and stall;
 *      the child's peak RSS, and how long the function holds each connection (on a fresh process).
 *   2. CPU per body: N normal pod add events vs N hostile 1 MiB structured CloudEvents whose
 *      extension is nested ~500,000 levels deep (child's utime + stime from /proc/<pid>/stat).
 *
 *   node bench/hostile-requests.ts [--bodies 20] [--connections 200] [--env KEY=VALUE ...]
 *
 * Loopback only; everything it starts ends with it. A script, not a timed test: the tests
 * (test/adversarial/edge-limits.test.ts) assert bounds, this prints figures.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startEmulator } from '../packages/kube-emulator/index.ts';
import { podEventType, postCloudEvent } from '../testkit/apiserversource.ts';
import { freePort, waitForHttpOk } from '../testkit/process.ts';
import { driverPod, executorPod, sparkAppId } from '../testkit/spark-pods.ts';

const { values } = parseArgs({
  options: {
    bodies: { type: 'string', default: '20' },
    connections: { type: 'string', default: '200' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const BODIES = Number(values.bodies);
const CONNECTIONS = Number(values.connections);
const extraEnv = Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

const TICKS = 100; // USER_HZ on Linux
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS;
}
function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

/** A structured CloudEvent of about `bytes` whose extension `ext` is an array nested as deep as fits. */
export function deeplyNestedEvent(bytes: number): string {
  const head = '{"specversion":"1.0","id":"1","source":"/hostile","type":"dev.knative.apiserver.resource.add","ext":';
  const tail = ',"data":{}}';
  const depth = Math.floor((bytes - head.length - tail.length - 1) / 2);
  return `${head}${'['.repeat(depth)}1${']'.repeat(depth)}${tail}`;
}

const tmp = mkdtempSync(join(tmpdir(), 'hostile-'));
const emulator = await startEmulator();
const kubeconfig = join(tmp, 'kubeconfig');
emulator.writeKubeconfig(kubeconfig);
const port = await freePort();
const entry = fileURLToPath(new URL('../functions/executor-service/main.ts', import.meta.url));
const child = spawn(process.execPath, [entry], {
  env: {
    ...process.env,
    KUBECONFIG: kubeconfig,
    WATCH_NAMESPACES: 'spark',
    BLOCK_MANAGER_PORT: '7079',
    LOG_LEVEL: 'error',
    PORT: String(port),
    ...extraEnv,
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const url = `http://127.0.0.1:${port}/`;
try {
  await waitForHttpOk(`${url}health/readiness`, { child, timeoutMs: 60_000 });
  const pid = child.pid!;

  // 1. Slow bodies (first: on a fresh process).
  const rssIdle = rssMiB(pid);
  const bodyBytes = 1024 * 1024 - 1024;
  const started = Date.now();
  const closedAfter: number[] = [];
  const sockets: Socket[] = [];
  let peak = rssIdle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  await Promise.all(
    Array.from(
      { length: CONNECTIONS },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          sockets.push(socket);
          socket.on('error', () => undefined);
          // Read what the function answers (a 408), or 'close' never comes for a socket nobody reads.
          socket.on('data', () => undefined);
          socket.on('close', () => {
            closedAfter.push(Date.now() - started);
          });
          socket.on('connect', () => {
            socket.write(
              `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/cloudevents+json\r\ncontent-length: ${bodyBytes}\r\n\r\n`,
            );
            socket.write(Buffer.alloc(bodyBytes - 10, 0x20), () => resolve());
          });
          setTimeout(resolve, 5_000).unref();
        }),
    ),
  );
  const deadline = Date.now() + 120_000;
  while (closedAfter.length < CONNECTIONS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  clearInterval(sampler);
  closedAfter.sort((a, b) => a - b);
  const q = (p: number) => closedAfter[Math.min(closedAfter.length - 1, Math.floor(p * closedAfter.length))] ?? NaN;
  console.log(`slow bodies: ${CONNECTIONS} connections, ${bodyBytes - 10} of ${bodyBytes} bytes sent, then stalled`);
  console.log(`  RSS idle ${rssIdle.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB`);
  console.log(`  closed by the function: ${closedAfter.length}/${CONNECTIONS}; after min ${q(0)} ms, median ${q(0.5)} ms, max ${q(1)} ms`);
  for (const s of sockets) s.destroy();
  // 2. CPU per body.
  const appId = sparkAppId(1);
  const driver = emulator.seed(driverPod({ namespace: 'spark', appId })) as { metadata: { name: string; uid: string } };
  const executors = Array.from({ length: BODIES }, (_, i) =>
    emulator.seed(
      executorPod({
        namespace: 'spark',
        appId,
        execId: String(i + 1),
        driver: { name: driver.metadata.name, uid: driver.metadata.uid },
        blockManagerPort: 7079,
      }),
    ),
  ) as Array<{ metadata: { name: string; namespace: string } }>;
  for (let i = 0; i < 3; i++) await postCloudEvent(url, { type: podEventType('update'), data: executors[0], subject: 'spark/x' }); // warm-up
  let before = cpuMs(pid);
  for (const pod of executors) {
    const reply = await postCloudEvent(url, { type: podEventType('add'), data: pod, subject: `spark/${pod.metadata.name}` }, 'structured');
    if (reply.status >= 300) throw new Error(`normal event answered ${reply.status}: ${reply.text}`);
  }
  const normal = (cpuMs(pid) - before) / BODIES;
  const hostile = deeplyNestedEvent(1024 * 1024 - 512);
  const statuses = new Map<number, number>();
  before = cpuMs(pid);
  for (let i = 0; i < BODIES; i++) {
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body: hostile });
    await response.arrayBuffer();
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
  }
  const perHostile = (cpuMs(pid) - before) / BODIES;
  console.log(`CPU per normal add (structured, ${executors.length}):     ${normal.toFixed(1)} ms`);
  console.log(
    `CPU per hostile body (${hostile.length} B, depth ${Math.floor(hostile.length / 2)}): ${perHostile.toFixed(1)} ms  answers ${JSON.stringify(Object.fromEntries(statuses))}`,
  );

  const live = await fetch(`${url}health/liveness`).then(
    (r) => r.status,
    (e: Error) => e.message,
  );
  console.log(`  liveness afterwards: ${live}`);
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await emulator.stop();
  rmSync(tmp, { recursive: true, force: true });
}
