/**
 * Section 5: memory. (a) The function's RSS (from /proc, as the kubelet sees it) while it
 * handles a long mix of adds, updates and deletes over many apps, sampled every 1,000 events.
 * (b) The two per-process caches, filled far past their capacity in this process: they must
 * stop at their bound, and their heap at the bound is their ceiling.
 */
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { DEFAULT_FACT_CACHE_LIMITS, FactCache, podKey, slotCacheKey } from '../../shared/engine/memory.ts';
import { serviceFactFromCreated, desiredExecutorService } from '../../shared/model/service-spec.ts';
import { podFact } from '../../shared/model/spark-pod.ts';
import { Pod } from '../../shared/model/k8s-objects.ts';
import { type AdapterEvent, AdapterSender, podEvent } from '../../testkit/apiserversource.ts';
import { type PodBody, appDriver, appExecutors } from '../../testkit/spark-pods.ts';
import { connectInspector } from '../lib/inspector.ts';
import { freePort, rssKiB, startEmulatorProcess, startFunctionProcess } from '../lib/procs.ts';
import { round } from '../lib/stats.ts';

export interface MemorySample {
  readonly events: number;
  /** After a forced full GC (through the inspector), as the kubelet would see it. */
  readonly rssKiB: number;
  readonly hwmKiB: number;
  /** Live JS heap after that GC: what is really retained. */
  readonly heapUsedKiB: number;
  readonly externalKiB: number;
}

export interface CacheCeiling {
  readonly name: string;
  readonly capacity: number;
  readonly inserted: number;
  readonly sizeAfter: number;
  readonly bytesPerEntry: number;
  readonly ceilingMiB: number;
}

export interface MemoryResult {
  readonly events: number;
  readonly apps: number;
  readonly executorsPerApp: number;
  readonly samples: readonly MemorySample[];
  readonly startRssKiB: number;
  readonly caches: readonly CacheCeiling[];
  readonly failures: readonly string[];
}

const NAMESPACE = 'bench';
const EXECUTORS_PER_APP = 8;
const LANES = 8;
const GROWTH_MARGIN_KIB = 5 * 1024;

/** The events of one app's life, in order (see the module comment); executors are seeded by then. */
function appEvents(driver: PodBody, executors: readonly PodBody[]): Array<{ event: AdapterEvent; before?: 'delete-driver' }> {
  const out: Array<{ event: AdapterEvent; before?: 'delete-driver' }> = [{ event: podEvent('add', driver) }];
  for (const e of executors) out.push({ event: podEvent('add', e) });
  for (const e of executors) out.push({ event: podEvent('update', e) });
  for (const e of executors.slice(0, executors.length / 2)) {
    out.push({ event: podEvent('update', { ...e, status: { ...e.status, podIP: '10.244.9.9' } }) });
  }
  for (const e of executors.slice(0, executors.length / 2))
    out.push({ event: podEvent('delete', { ...e, status: { ...e.status, phase: 'Succeeded' } }) });
  out.push({ event: podEvent('delete', driver), before: 'delete-driver' });
  return out;
}

export async function runMemory(options: {
  entry: string;
  events: number;
  resultsDir: string;
  log: (line: string) => void;
}): Promise<MemoryResult> {
  const failures: string[] = [];
  const emulator = await startEmulatorProcess();
  const samples: MemorySample[] = [];
  let startRss = 0;
  let apps = 0;
  try {
    const inspectPort = await freePort();
    const fn = await startFunctionProcess({
      entry: options.entry,
      kubeconfig: emulator.kubeconfig,
      logFile: join(options.resultsDir, 'function-memory.log'),
      inspectPort,
    });
    const poster = new AdapterSender(fn.url, { concurrency: LANES });
    const inspector = await connectInspector(inspectPort);
    // Checkpoints run between events: lanes wait while one is taken.
    let checkpoint: Promise<void> = Promise.resolve();
    const sample = async (events: number): Promise<void> => {
      const usage = await inspector.memoryAfterGc();
      const m = rssKiB(fn.pid);
      samples.push({
        events,
        rssKiB: m?.rss ?? 0,
        hwmKiB: m?.hwm ?? 0,
        heapUsedKiB: Math.round(usage.heapUsed / 1024),
        externalKiB: Math.round(usage.external / 1024),
      });
    };
    try {
      await sample(0);
      startRss = samples[0]!.rssKiB;
      let sent = 0;
      let nextSample = 1000;
      let errors = 0;
      const lane = async (): Promise<void> => {
        while (sent < options.events) {
          const seed = 10_000 + apps++;
          const [driver] = await emulator.seed([appDriver(NAMESPACE, seed)]);
          const executors = await emulator.seed(appExecutors(driver!, EXECUTORS_PER_APP));
          for (const { event, before } of appEvents(driver!, executors)) {
            if (sent >= options.events) return;
            if (before === 'delete-driver')
              await emulator.call({ op: 'delete', resource: 'pods', namespace: NAMESPACE, name: driver!.metadata.name });
            await checkpoint;
            sent++;
            const answer = await poster.post(event);
            if (answer.status !== 200) errors++;
            if (sent >= nextSample) {
              const at = nextSample;
              nextSample += 1000;
              checkpoint = checkpoint.then(() => sample(at));
              await checkpoint;
            }
          }
        }
      };
      await Promise.all(Array.from({ length: LANES }, lane));
      await checkpoint;
      if (errors > 0) failures.push(`memory: ${errors} of ${sent} events not answered 200`);
    } finally {
      inspector.close();
      poster.close();
      await fn.stop();
    }
  } finally {
    await emulator.stop();
  }
  const caches = cacheCeilings();
  for (const c of caches)
    if (c.sizeAfter > c.capacity) failures.push(`memory: ${c.name} holds ${c.sizeAfter} entries, more than its capacity ${c.capacity}`);
  // Live heap may grow by what the bounded caches can hold at most, plus a margin; more is a leak.
  const first = samples.find((m) => m.events === 1000);
  const last = samples[samples.length - 1];
  const allowedKiB = caches.reduce((a, c) => a + c.ceilingMiB * 1024, 0) + GROWTH_MARGIN_KIB;
  if (first !== undefined && last !== undefined && last.heapUsedKiB - first.heapUsedKiB > allowedKiB) {
    failures.push(
      `memory: live heap grew from ${(first.heapUsedKiB / 1024).toFixed(1)} MiB (1k events) to ${(last.heapUsedKiB / 1024).toFixed(1)} MiB (${last.events} events), ` +
        `more than the caches' ceiling + ${GROWTH_MARGIN_KIB / 1024} MiB: something retains memory per event`,
    );
  }
  return { events: options.events, apps, executorsPerApp: EXECUTORS_PER_APP, samples, startRssKiB: startRss, caches, failures };
}

function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/**
 * Fills the fact cache far past its bounds with hostile-sized entries (maximal names and UIDs,
 * many distinct apps) and measures its retained heap: it must stop at its entry and byte bounds.
 */
function cacheCeilings(): CacheCeiling[] {
  const gc = exposeGc();
  const heap = (): number => {
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };
  const before = heap();
  const facts = new FactCache();
  const inserts = 30_000;
  const now = Date.now();
  for (let i = 0; i < inserts; i++) {
    const appId = `${'a'.repeat(50)}${i}`.slice(-63);
    const execId = String((i % 500) + 1);
    const name = `${'p'.repeat(240)}-${i}`;
    const uid = `${'u'.repeat(120)}${i}`.slice(-128);
    const owner = { name: `${'d'.repeat(240)}-${i}`, uid: `${'o'.repeat(120)}${i}`.slice(-128) };
    const pod = Pod.parse({
      metadata: {
        name,
        namespace: 'spark-jobs',
        uid,
        labels: { 'spark-role': 'executor', 'spark-app-selector': appId, 'spark-exec-id': execId },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', controller: true, ...owner }],
      },
      status: { phase: 'Running' },
    });
    facts.pods.set(podKey('spark-jobs', name), { value: podFact(pod, 7079)!, at: now });
    const identity = { appId, execId, executor: { name, uid }, owner };
    const body = desiredExecutorService('spark-jobs', identity, 7079);
    facts.services.set(podKey('spark-jobs', body.metadata.name), {
      value: serviceFactFromCreated(body, uid, String(i), identity),
      at: now,
    });
    facts.claimants.set(slotCacheKey('spark-jobs', appId, execId), { value: [name], at: now });
  }
  const bytes = heap() - before;
  const capacity = DEFAULT_FACT_CACHE_LIMITS.entries * 3;
  const result = ceiling('FactCache (pods, services, claimants)', capacity, inserts * 3, facts.stats().entries, bytes);
  if (facts.stats().entries < 0) throw new Error('unreachable'); // keep it alive until measured
  return [result];
}

function ceiling(name: string, capacity: number, inserted: number, size: number, bytes: number): CacheCeiling {
  const perEntry = size === 0 ? 0 : bytes / size;
  return {
    name,
    capacity,
    inserted,
    sizeAfter: size,
    bytesPerEntry: Math.round(perEntry),
    ceilingMiB: round((perEntry * capacity) / (1024 * 1024), 2),
  };
}
