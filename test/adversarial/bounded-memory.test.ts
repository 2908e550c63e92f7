/**
 * Memory under hostile input: 10,000 Resource-mode executor events (add / update / delete) with
 * every field at its maximal length — pod names of 253 characters, UIDs of 128, owner names of
 * 253 and owner UIDs of 128, app ids of 63 — over thousands of distinct applications, most of
 * them about pods that do not exist, sent with bounded concurrency to the function running in
 * this process. Its per-process fact cache must stay within its documented ceiling
 * (sized for 1,000 executors: factCacheLimitsFor, the three kinds together), and the live heap after a forced GC may grow between
 * event 1,000 and event 10,000 by no more than that ceiling (≈ 4.3 MiB) plus a 16 MiB margin.
 *
 * The API-server emulator runs in a child process (bench/lib/procs.ts), so that its own store and
 * request log are not counted in this process's heap; the function is started here with
 * startFunctionServer and its own newProcessCaches(), so that the test holds the FactCache.
 * A few events whose owner UIDs are longer than 128 characters must be refused (400, no API call).
 */
import http from 'node:http';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmulatorProcess, cpuMs, ownCpuMs, startEmulatorProcess } from '../../bench/lib/procs.ts';
import { type FunctionServer, startFunctionServer } from '../../functions/executor-service/server.ts';
import { type Config, loadConfig } from '../../shared/ops/config.ts';
import { CoreV1KubeClient } from '../../shared/kube/client.ts';
import { ServerClock } from '../../shared/kube/server-clock.ts';
import { jsonLogger } from '../../shared/ops/log.ts';
import { type Metrics, newMetrics } from '../../shared/ops/metrics.ts';
import { newProcessCaches, type ProcessCaches } from '../../shared/triggers/process-state.ts';
import { factCacheLimitsFor } from '../../shared/engine/memory.ts';

// A process sized for 1,000 executors (MAX_SERVICES_PER_NAMESPACE × namespaces), so that 10,000
// hostile events fill it past its bounds.
const LIMITS = factCacheLimitsFor(1000);
import { buildKubeConfig } from '../../packages/kube-emulator/kubeconfig.ts';
import { podEventType, podSubject, postCloudEvent } from '../../testkit/apiserversource.ts';
import type { PodBody } from '../../testkit/spark-pods.ts';

const NS = 'spark';
/** MEMORY_EVENTS raises the count; the first heap sample stays at event 1,000. */
const EVENTS = Math.max(10_000, Number(process.env['MEMORY_EVENTS'] ?? 10_000));
const FIRST_SAMPLE = 1_000;
const CONCURRENCY = 16;
/**
 * Applications whose driver and executors exist: their events fill the caches with real facts
 * (1,700 pods and 1,360 Services of maximal size: past the byte bounds of the pods and the
 * Services kinds). More would mostly slow the emulator down: it matches every pod of the
 * namespace on each list.
 */
const EXISTING_APPS = 340;
const EXECUTORS_PER_EXISTING_APP = 4;
/** Distinct applications of the events about pods that do not exist. */
const PHANTOM_APPS = 3_000;
const MiB = 1024 * 1024;
const CACHE_CEILING_BYTES = LIMITS.bytes; // the three kinds together
const HEAP_MARGIN_BYTES = 16 * MiB;

// ---- maximal names ------------------------------------------------------------------------------

/** A 63-character application id (the longest label value), distinct per index. */
const appId = (i: number): string => `${'a'.repeat(55)}${String(i).padStart(8, '0')}`;

/** A 253-character DNS-1123 subdomain (the longest pod name): three 63-character labels and a 61-character one. */
function longName(kind: string, i: number): string {
  const tail = `${kind}-${i}`.padStart(61, 'x');
  return `${'p'.repeat(63)}.${'q'.repeat(63)}.${'r'.repeat(63)}.${tail}`;
}

/** A UID of `length` characters (128: the longest metadata.uid the function accepts). */
const longUid = (kind: string, i: number, length = 128): string => `${kind}-${i}-`.padEnd(length, 'u');

function driver(k: number): PodBody {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: longName('drv', k),
      namespace: NS,
      uid: longUid('drv', k),
      labels: { 'spark-role': 'driver', 'spark-app-selector': appId(k), 'spark-exec-svc/enabled': 'true' },
    },
    spec: { containers: [{ name: 'spark-kubernetes-driver', image: 'apache/spark:4.0.0' }] },
    status: { phase: 'Running' },
  };
}

function executor(opts: { name: string; uid: string; app: string; execId: string; owner: { name: string; uid: string } }): PodBody {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: opts.name,
      namespace: NS,
      uid: opts.uid,
      labels: { 'spark-role': 'executor', 'spark-app-selector': opts.app, 'spark-exec-id': opts.execId, 'spark-exec-svc/enabled': 'true' },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: opts.owner.name, uid: opts.owner.uid, controller: true }],
    },
    spec: {
      containers: [
        { name: 'spark-kubernetes-executor', image: 'apache/spark:4.0.0', env: [{ name: 'SPARK_EXECUTOR_ID', value: opts.execId }] },
      ],
    },
    status: { phase: 'Running', podIP: '10.244.1.7' },
  };
}

function existingExecutor(k: number, e: number): PodBody {
  const d = driver(k);
  return executor({
    name: longName(`e${e}`, k),
    uid: longUid(`e${e}`, k),
    app: appId(k),
    execId: String(e),
    owner: { name: d.metadata.name, uid: d.metadata.uid! },
  });
}

const VERBS = ['add', 'update', 'delete'] as const;

/** Event i, generated on demand (holding 10,000 pods of ~2 KB would itself weigh on the heap). */
function eventAt(i: number): { verb: (typeof VERBS)[number]; pod: PodBody } {
  const verb = VERBS[i % 3]!;
  // Three in ten are about pods that exist; the rest about pods that never did, each its own.
  if (((i * 2_654_435_761) >>> 0) % 10 < 3) {
    const k = i % EXISTING_APPS;
    const e = (Math.floor(i / EXISTING_APPS) % EXECUTORS_PER_EXISTING_APP) + 1;
    return { verb, pod: existingExecutor(k, e) };
  }
  const k = 100_000 + (i % PHANTOM_APPS);
  return {
    verb,
    pod: executor({
      name: longName('ghost', i),
      uid: longUid('ghost', i),
      app: appId(k),
      execId: String((i % 50) + 1),
      owner: { name: longName('ghost-drv', k), uid: longUid('ghost-drv', k) },
    }),
  };
}

/** One binary-mode CloudEvent over a kept-alive connection (the SDK and fetch would cost more than the function here). */
function send(verb: (typeof VERBS)[number], pod: PodBody, id: string): Promise<number> {
  const body = JSON.stringify(pod);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'ce-specversion': '1.0',
          'ce-id': id,
          'ce-type': podEventType(verb),
          'ce-source': 'https://10.96.0.1:443',
          'ce-subject': podSubject(NS, pod.metadata.name),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          if (res.statusCode !== 200 && failures.length < 5)
            failures.push(`${res.statusCode} ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`);
          resolve(res.statusCode ?? 0);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

// ---- the function in this process, the API server in a child ------------------------------------

let emulator: EmulatorProcess;
let fn: FunctionServer;
let url: string;
let port: number;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
let caches: ProcessCaches;
let metrics: Metrics;
let config: Config;
let errorLines = 0;
/** The first few answers other than 200, for the failure message. */
const failures: string[] = [];

beforeAll(async () => {
  emulator = await startEmulatorProcess();
  const drivers = Array.from({ length: EXISTING_APPS }, (_, k) => driver(k));
  for (let i = 0; i < drivers.length; i += 200) await emulator.seed(drivers.slice(i, i + 200));
  const executors = drivers.flatMap((_, k) => Array.from({ length: EXECUTORS_PER_EXISTING_APP }, (__, e) => existingExecutor(k, e + 1)));
  for (let i = 0; i < executors.length; i += 200) await emulator.seed(executors.slice(i, i + 200));
  config = loadConfig(
    { WATCH_NAMESPACES: NS, BLOCK_MANAGER_PORT: '7079', LOG_LEVEL: 'error', MAX_SERVICES_PER_NAMESPACE: '100000' },
    () => undefined,
  );
  caches = newProcessCaches(LIMITS);
  metrics = newMetrics();
  const clock = new ServerClock();
  fn = await startFunctionServer(
    {
      client: new CoreV1KubeClient(buildKubeConfig(emulator.url), config.requestTimeoutMs, clock),
      clock,
      config,
      log: jsonLogger('error', () => {
        errorLines++;
      }),
      metrics,
      caches,
    },
    { port: 0, host: '127.0.0.1' },
  );
  port = fn.port;
  url = `http://127.0.0.1:${port}/`;
}, 60_000);

afterAll(async () => {
  agent.destroy();
  await fn?.shutdown(1000);
  await emulator?.stop();
});

describe('memory: 10,000 hostile events', () => {
  it('keep the fact cache within its ceiling and the live heap flat', async () => {
    const gc = exposeGc();
    const heapAfterGc = (): number => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const statuses = new Map<number, number>();
    const cacheSamples: Array<{ events: number; entries: number; bytes: number; evictions: number }> = [];
    const run = async (from: number, to: number): Promise<void> => {
      let next = from;
      const lane = async (): Promise<void> => {
        while (next < to) {
          const i = next++;
          const { verb, pod } = eventAt(i);
          const status = await send(verb, pod, `mem-${i}`);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          if (i % 500 === 0) cacheSamples.push({ events: i, ...caches.facts.stats() });
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, lane));
    };

    const started = performance.now();
    const cpuStart = { own: ownCpuMs(), emulator: cpuMs(emulator.pid) };
    const heapAtStart = heapAfterGc();
    await run(0, FIRST_SAMPLE);
    const heapAtFirst = heapAfterGc();
    await run(FIRST_SAMPLE, EVENTS);
    const heapAtEnd = heapAfterGc();
    const seconds = (performance.now() - started) / 1000;
    const cpuPerEvent = { own: (ownCpuMs() - cpuStart.own) / EVENTS, emulator: (cpuMs(emulator.pid) - cpuStart.emulator) / EVENTS };
    const stats = caches.facts.stats();
    cacheSamples.push({ events: EVENTS, ...stats });

    const growth = heapAtEnd - heapAtFirst;
    const kinds = [
      ['pods', caches.facts.pods],
      ['services', caches.facts.services],
      ['claimants', caches.facts.claimants],
    ] as const;
    console.log(
      `memory: ${EVENTS} hostile events in ${seconds.toFixed(1)} s (concurrency ${CONCURRENCY}; CPU per event: ${cpuPerEvent.own.toFixed(2)} ms sender + function, ${cpuPerEvent.emulator.toFixed(2)} ms API server), answers ${JSON.stringify(Object.fromEntries(statuses))}; ` +
        `heapUsed after GC: ${(heapAtStart / MiB).toFixed(1)} MiB at 0, ${(heapAtFirst / MiB).toFixed(1)} MiB at ${FIRST_SAMPLE}, ${(heapAtEnd / MiB).toFixed(1)} MiB at ${EVENTS} ` +
        `(growth ${(growth / MiB).toFixed(1)} MiB, allowed ${((CACHE_CEILING_BYTES + HEAP_MARGIN_BYTES) / MiB).toFixed(0)} MiB); ` +
        `fact cache: ${stats.entries} entries (limit ${3 * LIMITS.entries}), ${(stats.bytes / MiB).toFixed(2)} MiB estimated (limit ${(CACHE_CEILING_BYTES / MiB).toFixed(0)} MiB), ${stats.evictions} evictions ` +
        `(${kinds.map(([name, lru]) => `${name} ${lru.size} / ${(lru.bytes / MiB).toFixed(2)} MiB / ${lru.evictions} evicted`).join(', ')})`,
    );

    // Every event is well-formed: answered 200 (a 503 would be a retryable failure, not expected here).
    expect(Object.fromEntries(statuses), failures.join('\n')).toEqual({ 200: EVENTS });
    expect(errorLines).toBe(0);
    // The input was hostile enough to fill the cache to its bounds: it had to evict.
    expect(stats.evictions).toBeGreaterThan(0);
    for (const sample of cacheSamples) {
      expect(sample.entries, `entries after ${sample.events} events`).toBeLessThanOrEqual(3 * LIMITS.entries);
      expect(sample.bytes, `estimated bytes after ${sample.events} events`).toBeLessThanOrEqual(CACHE_CEILING_BYTES);
    }
    // Nothing else is retained per event: the heap grows by at most what the bounded caches hold.
    expect(growth, `heap growth between event ${FIRST_SAMPLE} and event ${EVENTS}`).toBeLessThan(CACHE_CEILING_BYTES + HEAP_MARGIN_BYTES);
    // Nothing was left for in-flight bookkeeping.
    expect(caches.facts.podReads.size + caches.facts.claimantReads.size + caches.facts.countReads.size).toBe(0);
  }, 300_000);

  it('owner UIDs longer than 128 characters are answered 400, with no API call', async () => {
    const calls = async (): Promise<number> => Object.values(await emulator.countByVerb()).reduce((a, b) => a + b, 0);
    const before = await calls();
    const statuses: number[] = [];
    const texts: string[] = [];
    for (const [n, length] of [129, 1_000, 100_000].entries()) {
      const pod = executor({
        name: longName('long-owner-uid', n),
        uid: longUid('long-owner-uid', n),
        app: appId(900_000 + n),
        execId: '1',
        owner: { name: longName('long-owner', n), uid: longUid('long-owner', n, length) },
      });
      const reply = await postCloudEvent(url, {
        id: `long-owner-uid-${n}`,
        type: podEventType('add'),
        data: pod,
        subject: podSubject(NS, pod.metadata.name),
      });
      statuses.push(reply.status);
      texts.push(reply.text.slice(0, 300));
    }
    expect(statuses, texts.join('\n')).toEqual([400, 400, 400]);
    expect(await calls()).toBe(before);
  });
});
