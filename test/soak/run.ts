/**
 * npm run soak — replays generated Spark applications through the running function (real HTTP,
 * loopback only, the project's API-server emulator) with random API faults, redelivers 5xx
 * answers as Knative would, runs a sweep, and compares the Services with what a correct system
 * must have. Bounded in count (--apps) and time (--max-seconds). Exit code 1 on any mismatch or
 * security-audit finding.
 *
 *   npm run soak -- --apps 200 --fault-rate 0.05 --seed 1 --max-seconds 120
 *                   [--concurrency 8] [--max-redeliveries 5] [--event-deadline-ms 1000]
 *
 * Everything runs in this one process (function, emulator, driver), so max RSS is theirs together.
 */
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../../shared/ops/log.ts';
import type { Fault } from '../../packages/kube-emulator/index.ts';
import { startEmulator } from '../../packages/kube-emulator/index.ts';
import type { PostedReply } from '../../testkit/apiserversource.ts';
import { startHarness } from '../../testkit/harness.ts';
import { auditRequests } from '../../testkit/audit.ts';
import { type RecordedEvent, World, deliver, expectedServicesOf, int, planApps, rngFrom, seedForeignServices } from '../model/world.ts';
import { postSweep } from '../../testkit/apiserversource.ts';
import { convergenceProblems } from '../../testkit/oracle.ts';

const { values } = parseArgs({
  options: {
    apps: { type: 'string', default: '200' },
    'fault-rate': { type: 'string', default: '0.05' },
    seed: { type: 'string', default: '1' },
    'max-seconds': { type: 'string', default: '120' },
    concurrency: { type: 'string', default: '8' },
    'max-redeliveries': { type: 'string', default: '5' },
    'event-deadline-ms': { type: 'string', default: '1000' },
  },
});
const APPS = positiveInt(values.apps, 'apps');
const FAULT_RATE = Number(values['fault-rate']);
const SEED = Number(values.seed);
const MAX_SECONDS = Number(values['max-seconds']);
const CONCURRENCY = positiveInt(values.concurrency, 'concurrency');
const MAX_REDELIVERIES = Number(values['max-redeliveries']);
// Short on purpose (the default is 20 s): a 429 with Retry-After: 1 or a slow answer then ends the
// event with 503, and Knative's redelivery path is exercised too.
const EVENT_DEADLINE_MS = positiveInt(values['event-deadline-ms'], 'event-deadline-ms');
if (!(FAULT_RATE >= 0 && FAULT_RATE < 1)) fail('--fault-rate must be within [0, 1)');
if (!Number.isInteger(SEED)) fail('--seed must be an integer');
if (!(MAX_SECONDS > 0)) fail('--max-seconds must be > 0');

const WATCHED = ['spark', 'spark-b'];
const UNWATCHED = ['other'];
const DEFAULT_PORT = 7079;

const started = performance.now();
const elapsed = (): number => (performance.now() - started) / 1000;
const overTime = (): boolean => elapsed() > MAX_SECONDS;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const stats = {
  events: 0,
  deliveries: 0,
  redeliveries: 0,
  deadLettered: 0,
  rejected4xx: 0,
  connectionErrors: 0,
  undelivered: 0,
};
const logCounts = { debug: 0, info: 0, warn: 0, error: 0 };
const countingLogger: Logger = {
  debug: () => void logCounts.debug++,
  info: () => void logCounts.info++,
  warn: () => void logCounts.warn++,
  error: () => void logCounts.error++,
};

const emulator = await startEmulator();
const h = await startHarness(
  {
    WATCH_NAMESPACES: WATCHED.join(','),
    COOLDOWN_SECONDS: String(7 * 24 * 3600),
    BLOCK_MANAGER_PORT: String(DEFAULT_PORT),
    EVENT_DEADLINE_MS: String(EVENT_DEADLINE_MS),
    REQUEST_TIMEOUT_MS: String(Math.max(50, Math.min(500, EVENT_DEADLINE_MS))),
    LOG_LEVEL: 'info',
  },
  { emulator, logger: countingLogger },
);

// The plan and the state changes come from one seeded stream (reproducible); the delivery order
// from another, since it also depends on timing.
const rng = rngFrom(SEED);
const deliveryRng = rngFrom(SEED ^ 0x5eed);
const apps = planApps(rng, APPS, { watched: WATCHED, unwatched: UNWATCHED, prefix: 'soak' });
const foreign = seedForeignServices(emulator, apps, rng, 'soak-foreign');
const world = new World(emulator, `soak-${SEED}`);

// Faults: each kind fires with rate/8 per request; the first rule that rolls true wins, so the
// total is ≈ the rate. The long delay exceeds REQUEST_TIMEOUT_MS: a client-side timeout.
emulator.faults.seed(SEED);
const kinds: Fault[] = [
  { kind: 'status', code: 429, retryAfterSeconds: 1 },
  { kind: 'status', code: 429 },
  { kind: 'status', code: 500 },
  { kind: 'status', code: 503 },
  { kind: 'reset' },
  { kind: 'delay', ms: 1200 },
  { kind: 'delay', ms: 150 },
  { kind: 'conflict' },
];
if (FAULT_RATE > 0)
  for (const fault of kinds) emulator.faults.add({ times: Number.POSITIVE_INFINITY, probability: FAULT_RATE / kinds.length, fault });

/** Delivers like Knative: a 5xx or a broken connection is redelivered with backoff, up to MAX_REDELIVERIES times. */
async function deliverLikeKnative(event: RecordedEvent): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    stats.deliveries++;
    let reply: PostedReply | undefined;
    try {
      reply = await deliver(h.url, event);
    } catch {
      stats.connectionErrors++;
    }
    if (reply !== undefined && reply.status < 300) return;
    if (reply !== undefined && reply.status < 500) {
      stats.rejected4xx++;
      process.stderr.write(`unexpected ${reply.status} for ${event.id}: ${reply.text}\n`);
      return;
    }
    if (attempt >= MAX_REDELIVERIES || overTime()) {
      stats.deadLettered++;
      return;
    }
    stats.redeliveries++;
    await sleep(50 * 2 ** attempt);
  }
}

// Producer: applies the lifecycles (apps interleaved) and queues each event 1–3 times; workers
// deliver queued events in random order, concurrently with the state changes still happening.
const pending: RecordedEvent[] = [];
let producing = true;
const producer = (async () => {
  await world.runAll(apps, rng, async (recorded) => {
    stats.events += recorded.length;
    for (const event of recorded) for (let c = int(rng, 1, 3); c > 0; c--) pending.push(event);
    while (pending.length > CONCURRENCY * 8 && !overTime()) await sleep(2);
    if (overTime()) throw new Error('time limit');
  });
})()
  .catch((error: unknown) => {
    if (!(error instanceof Error && error.message === 'time limit')) throw error;
  })
  .finally(() => {
    producing = false;
  });
const workers = Array.from({ length: CONCURRENCY }, async () => {
  while (producing || pending.length > 0) {
    if (overTime()) {
      stats.undelivered += pending.splice(0).length;
      return;
    }
    if (pending.length === 0) {
      await sleep(1);
      continue;
    }
    const [event] = pending.splice(Math.floor(deliveryRng() * pending.length), 1);
    await deliverLikeKnative(event!);
  }
});
await Promise.all([producer, ...workers]);
const stoppedEarly = overTime();

const expected = expectedServicesOf(world, WATCHED, DEFAULT_PORT);
const namespaces = [...WATCHED, ...UNWATCHED];
const beforeSweep = convergenceProblems(emulator, expected, namespaces, foreign);

// The periodic sweep (PingSource), still under faults, redelivered like any event.
let swept = false;
for (let attempt = 0; attempt <= MAX_REDELIVERIES && !swept; attempt++) {
  stats.deliveries++;
  try {
    swept = (await postSweep(h.url, `soak-sweep-${attempt}`)).status === 200;
  } catch {
    stats.connectionErrors++;
  }
  if (!swept) {
    stats.redeliveries++;
    await sleep(50 * 2 ** attempt);
  }
}
const afterSweep = convergenceProblems(emulator, expected, namespaces, foreign);
const audit = auditRequests(emulator.requests, { namespaces: WATCHED, foreign });
setFlagsFromString('--expose-gc');
(runInNewContext('gc') as () => void)();
const heapAfterGc = process.memoryUsage().heapUsed;

const report: Array<[string, string | number]> = [
  [
    'apps',
    `${APPS} (seed ${SEED}, ${world.executors.size} executors, ${apps.filter((a) => UNWATCHED.includes(a.namespace)).length} in an unwatched namespace)`,
  ],
  ['fault rate', `${FAULT_RATE} (429 ± Retry-After, 500, 503, reset, delay, conflict); event deadline ${EVENT_DEADLINE_MS} ms`],
  ['events generated', stats.events],
  ['deliveries (HTTP POSTs, incl. duplicates and redeliveries)', stats.deliveries],
  ['events handled 2xx / failed 5xx', `${h.metrics.eventsHandled} / ${h.metrics.eventsFailed}`],
  ['API requests', emulator.requests.length],
  ['faults injected', emulator.faults.injected()],
  ['retries inside events', h.metrics.retries],
  ['redeliveries (5xx or connection error)', stats.redeliveries],
  ['dead-lettered after max redeliveries', stats.deadLettered],
  ['unexpected 4xx', stats.rejected4xx],
  ['undelivered (time limit)', stats.undelivered],
  [
    'Services expected / present',
    `${expected.size} / ${namespaces.flatMap((ns) => emulator.listObjects('services', ns)).length - foreign.length} (+${foreign.length} foreign)`,
  ],
  ['mismatches before the sweep', beforeSweep.length],
  ['sweep', swept ? 'ok' : 'failed'],
  ['final mismatches', afterSweep.length],
  ['security audit findings', audit.length],
  ['max RSS (function + emulator + driver)', `${(process.resourceUsage().maxRSS / 1024).toFixed(1)} MiB`],
  ['heap in use at the end, after GC', `${(heapAfterGc / 1024 / 1024).toFixed(1)} MiB`],
  ['elapsed', `${elapsed().toFixed(1)} s${stoppedEarly ? ` (stopped early: --max-seconds ${MAX_SECONDS})` : ''}`],
];
const width = Math.max(...report.map(([k]) => k.length));
process.stdout.write(`spark-exec-svc soak\n${report.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n')}\n`);
for (const line of [
  ...beforeSweep.map((m) => `before sweep: ${m}`),
  ...afterSweep.map((m) => `final: ${m}`),
  ...audit.map((a) => `audit: ${a}`),
].slice(0, 40)) {
  process.stdout.write(`  ${line}\n`);
}

await h.close();
await emulator.stop();
process.exit(afterSweep.length > 0 || audit.length > 0 || stats.rejected4xx > 0 || !swept ? 1 : 0);

function positiveInt(text: string | undefined, name: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) fail(`--${name} must be a positive integer`);
  return n;
}

function fail(message: string): never {
  process.stderr.write(`soak: ${message}\n`);
  process.exit(2);
}
