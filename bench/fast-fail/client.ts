/**
 * The measuring client. Connects to each target of each case ONE AT A TIME (like a Spark
 * executor walking a list of peer locations) with a connect timeout, and records how long
 * each connect took to fail (or succeed).
 *
 * Usage (spawned by run.ts, normally via `ip netns exec NAME node client.ts PLAN_JSON`):
 *   node bench/fast-fail/client.ts '{"timeoutMs":2000,"cases":[...]}'
 * Prints one line `FAST-FAIL-RESULT {json}` on stdout.
 *
 * Every connect is bounded by timeoutMs (our own timer destroys the socket, the way
 * Netty's CONNECT_TIMEOUT_MILLIS fails Spark's connect), the number of attempts is bounded
 * by the plan, and a watchdog ends the process if anything still hangs.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { RESULT_PREFIX } from './types.ts';
import type { Attempt, CaseAttempts, CasePlan, ClientPlan, ClientResult, TargetPlan } from './types.ts';

const MAX_ATTEMPTS = 1000;

function connectOnce(target: TargetPlan, timeoutMs: number): Promise<Attempt> {
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

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: client.ts PLAN_JSON');
  const plan = JSON.parse(raw) as ClientPlan;
  const total = plan.cases.reduce((n, c) => n + c.targets.length, 0);
  if (!(plan.timeoutMs > 0) || total > MAX_ATTEMPTS) throw new Error('invalid plan');
  // Watchdog: every attempt ends by timeoutMs; allow generous slack, then give up.
  const watchdog = setTimeout(() => {
    process.stderr.write('fast-fail client: watchdog fired, exiting\n');
    process.exit(3);
  }, total * (plan.timeoutMs + 1000) + 5000);
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
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`, () => process.exit(0));
}

main().catch((err: unknown) => {
  process.stderr.write(`fast-fail client: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(2);
});
