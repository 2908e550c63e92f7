/**
 * The measuring client. Connects to each target of each case ONE AT A TIME (like a Spark
 * executor walking a list of peer locations) with a connect timeout, and records how long
 * each connect took to fail (or succeed).
 *
 * Usage (spawned by run.ts, normally via `ip netns exec NAME node client.ts PLAN_JSON`):
 *   node proof/fast-fail/client.ts '{"timeoutMs":2000,"cases":[...]}'
 * Prints one line `FAST-FAIL-RESULT {json}` on stdout.
 *
 * Then, if the plan has Spark scenarios, it runs each as a reduce task would (see runSparkScenario
 * and spark-fetch-model.ts): first connects one peer after another, a driver check after every
 * failed connect, background retries after retryWait, give-up at the first final failure.
 *
 * Every connect is bounded by timeoutMs (our own timer destroys the socket, the way
 * Netty's CONNECT_TIMEOUT_MILLIS fails Spark's connect), the number of attempts is bounded
 * by the plan, and a watchdog ends the process if anything still hangs.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { RESULT_PREFIX, sparkPlanBoundMs } from './types.ts';
import type {
  Attempt,
  CaseAttempts,
  CasePlan,
  ClientPlan,
  ClientResult,
  SparkAttempt,
  SparkPlan,
  SparkScenarioPlan,
  SparkScenarioResult,
  TargetPlan,
} from './types.ts';

const MAX_ATTEMPTS = 1000;

function connectOnce(target: TargetPlan, timeoutMs: number, signal?: AbortSignal): Promise<Attempt> {
  return new Promise((resolve) => {
    const label = `${target.host}:${target.port}`;
    const start = performance.now();
    let settled = false;
    const socket = new net.Socket();
    const finish = (outcome: Attempt['outcome'], code: string): void => {
      if (settled) return;
      settled = true;
      const ms = performance.now() - start;
      clearTimeout(timer);
      socket.destroy();
      resolve({ target: label, outcome, code, ms });
    };
    const timer = setTimeout(() => finish('timeout', 'CONNECT_TIMEOUT'), timeoutMs);
    if (signal !== undefined) {
      if (signal.aborted) {
        finish('aborted', 'ABORTED');
        return;
      }
      signal.addEventListener('abort', () => finish('aborted', 'ABORTED'), { once: true });
    }
    socket.once('connect', () => finish('connected', 'OK'));
    socket.once('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? 'UNKNOWN';
      finish(code === 'ECONNREFUSED' ? 'refused' : 'error', code);
    });
    socket.connect({ host: target.host, port: target.port });
  });
}

async function runCase(plan: CasePlan, timeoutMs: number): Promise<CaseAttempts> {
  let server: net.Server | undefined;
  let targets = plan.targets;
  try {
    if (plan.serveLocal === true) {
      const first = plan.targets[0];
      if (first === undefined) throw new Error(`case ${plan.id}: serveLocal needs one target`);
      const srv = net.createServer((sock) => sock.destroy());
      server = srv;
      const port = await new Promise<number>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen({ host: first.host, port: first.port }, () => {
          const addr = srv.address();
          if (addr === null || typeof addr === 'string') reject(new Error('no TCP address'));
          else resolve(addr.port);
        });
      });
      targets = plan.targets.map((t) => ({ host: t.host, port }));
    }
    const attempts: Attempt[] = [];
    // Sequential on purpose: attempt i+1 starts only after attempt i has failed.
    for (const target of targets) attempts.push(await connectOnce(target, timeoutMs));
    return { id: plan.id, attempts };
  } finally {
    server?.close();
  }
}

/**
 * A stand-in for the driver's BlockManagerMasterEndpoint: answers `IsExecutorAlive(execId)` with
 * whether it still knows the executor. One line per ask, `<id> <execId>` -> `<id> true|false`,
 * over one long-lived connection (as an executor's RPC connection to its driver is).
 */
class Driver {
  readonly dead = new Set<string>();
  private server: net.Server | undefined;
  private conn: net.Socket | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, (alive: boolean) => void>();

  async start(host: string): Promise<void> {
    const server = net.createServer((sock) => {
      let buf = '';
      sock.on('data', (d: Buffer) => {
        buf += d.toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const [id = '', execId = ''] = buf.slice(0, nl).split(' ');
          buf = buf.slice(nl + 1);
          sock.write(`${id} ${this.dead.has(execId) ? 'false' : 'true'}\n`);
        }
      });
      sock.on('error', () => {});
    });
    this.server = server;
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port: 0 }, () => {
        const addr = server.address();
        if (addr === null || typeof addr === 'string') reject(new Error('driver: no TCP address'));
        else resolve(addr.port);
      });
    });
    const conn = net.connect({ host, port });
    conn.setNoDelay(true);
    this.conn = conn;
    await new Promise<void>((resolve, reject) => {
      conn.once('connect', () => resolve());
      conn.once('error', reject);
    });
    let buf = '';
    conn.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const [id = '', answer = ''] = buf.slice(0, nl).split(' ');
        buf = buf.slice(nl + 1);
        const done = this.pending.get(Number(id));
        this.pending.delete(Number(id));
        done?.(answer === 'true');
      }
    });
  }

  /** IsExecutorAlive(execId): resolves with the driver's answer. */
  isExecutorAlive(execId: string): Promise<boolean> {
    const conn = this.conn;
    if (conn === undefined) return Promise.reject(new Error('driver not started'));
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      conn.write(`${id} ${execId}\n`);
    });
  }

  stop(): void {
    this.conn?.destroy();
    this.server?.close();
  }
}

/**
 * One reduce task fetching from K lost peers, following Spark's fetch path (rule numbers as in
 * spark-fetch-model.ts):
 *  - the "task thread" makes the first attempt to each peer in turn and waits for it: connect,
 *    then on failure the IsExecutorAlive ask (rules 1, 2, 4);
 *  - "dead" -> the peer fails for good (ExecutorDeadException, not retried); otherwise, while
 *    retries are left, a retry runs retryWait later in the background (rule 3);
 *  - after the first wave the task waits for the first final failure and gives up (rule 5).
 * Background retries still pending at give-up are cancelled (Spark lets them run and ignores them).
 */
async function runSparkScenario(sc: SparkScenarioPlan, driver: Driver): Promise<SparkScenarioResult> {
  const execIds = sc.targets.map((_, i) => `lost-${sc.id}-${i + 1}`);
  driver.dead.clear();
  if (sc.driverKnows) for (const id of execIds) driver.dead.add(id);
  const abort = new AbortController();
  const timers = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<void>>();
  const attempts: SparkAttempt[] = [];
  let failure: { peer: number; reason: SparkScenarioResult['failingReason'] } | null = null;
  let wake: (() => void) | null = null;
  const t0 = performance.now();
  const rel = (): number => performance.now() - t0;

  const failForGood = (peer: number, reason: SparkScenarioResult['failingReason']): void => {
    // results.put(FailureFetchResult(...)): the first one is what next() will throw.
    if (failure === null) failure = { peer, reason };
    wake?.();
  };

  // RetryingBlockTransferor.transferAllOutstanding for one peer, attempt n (1-based).
  const transfer = async (peer: number, n: number): Promise<void> => {
    const target = sc.targets[peer] as TargetPlan;
    const startMs = rel();
    const a = await connectOnce(target, sc.connectTimeoutMs, abort.signal);
    const connectEndMs = rel();
    const base = { peer, attempt: n, startMs, connectEndMs, outcome: a.outcome, code: a.code, connectMs: a.ms };
    if (a.outcome === 'aborted' || a.outcome === 'connected') {
      attempts.push({ ...base, endMs: connectEndMs, rpcMs: null, driverSaysDead: null });
      return;
    }
    // NettyBlockTransferService: catch IOException -> askSync(IsExecutorAlive(execId)).
    const rpcStart = performance.now();
    const alive = await driver.isExecutorAlive(execIds[peer] as string);
    const endMs = rel();
    attempts.push({ ...base, endMs, rpcMs: performance.now() - rpcStart, driverSaysDead: !alive });
    if (!alive) {
      failForGood(peer, 'executor-dead');
      return;
    }
    // shouldRetry: an IOException and retryCount (= n - 1) < maxRetries -> initiateRetry.
    if (n - 1 < sc.maxRetries && !abort.signal.aborted) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        const p = transfer(peer, n + 1).finally(() => running.delete(p));
        running.add(p);
      }, sc.retryWaitMs);
      timers.add(timer);
      return;
    }
    failForGood(peer, 'retries-exhausted');
  };

  // initialize() -> fetchUpToMaxBytes() -> sendRequest for each peer: the first attempt blocks.
  for (let i = 0; i < sc.targets.length; i++) await transfer(i, 1);
  const waveEndMs = rel();
  // next() -> results.take(): wait for the first FailureFetchResult.
  if (failure === null) await new Promise<void>((resolve) => (wake = resolve));
  const giveUpMs = rel();
  abort.abort();
  for (const t of timers) clearTimeout(t);
  timers.clear();
  await Promise.all([...running]);
  const f = failure as { peer: number; reason: SparkScenarioResult['failingReason'] } | null;
  if (f === null) throw new Error(`scenario ${sc.id}: woke without a failure`);
  attempts.sort((x, y) => x.startMs - y.startMs);
  return { id: sc.id, giveUpMs, waveEndMs, failingPeer: f.peer, failingReason: f.reason, attempts };
}

async function runSpark(plan: SparkPlan): Promise<SparkScenarioResult[]> {
  const driver = new Driver();
  await driver.start(plan.driverHost);
  try {
    const out: SparkScenarioResult[] = [];
    for (const sc of plan.scenarios) out.push(await runSparkScenario(sc, driver));
    return out;
  } finally {
    driver.stop();
  }
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: client.ts PLAN_JSON');
  const plan = JSON.parse(raw) as ClientPlan;
  const total = plan.cases.reduce((n, c) => n + c.targets.length, 0);
  if (!(plan.timeoutMs > 0) || total > MAX_ATTEMPTS) throw new Error('invalid plan');
  // Watchdog: every attempt ends by timeoutMs; allow generous slack, then give up.
  const watchdog = setTimeout(
    () => {
      process.stderr.write('fast-fail client: watchdog fired, exiting\n');
      process.exit(3);
    },
    total * (plan.timeoutMs + 1000) + sparkPlanBoundMs(plan.spark) + 5000,
  );
  watchdog.unref();
  // Parent-death detection: the orchestrator holds our stdin pipe open and never writes.
  // If it dies (even by SIGKILL), the pipe closes and we stop instead of running on.
  if (!process.stdin.isTTY) {
    process.stdin.on('data', () => {});
    process.stdin.once('end', () => process.exit(4));
    process.stdin.once('close', () => process.exit(4));
  }
  const cases: CaseAttempts[] = [];
  for (const c of plan.cases) cases.push(await runCase(c, plan.timeoutMs));
  const result: ClientResult = { node: process.version, cases };
  if (plan.spark !== undefined) result.spark = await runSpark(plan.spark);
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`, () => process.exit(0));
}

main().catch((err: unknown) => {
  process.stderr.write(`fast-fail client: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(2);
});
