/**
 * The "loopback" fallback environment (no root, no `ip`/`iptables`, or namespaces not
 * permitted): host loopback only (127.0.0.1), no firewall rules.
 *   (a) drop   -> a listener whose accept queue is full (see blocked-listener.ts): Linux
 *                 silently drops the SYN, so the connect hangs until the client's timeout.
 *   (b) reject -> cannot be reproduced without a firewall rule: SKIPPED (said so plainly), and
 *                 so are the Spark rows for the executor's Service.
 *   (c) closed -> a port that was just bound and released: RST.
 *   (d) live   -> a listener inside the client.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CleanupStack } from './sys.ts';
import type { CasePlan } from './types.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FILL_TIMEOUT_MS = 300;
const MAX_FILL_CONNECTS = 8;

export interface LoopbackEnv {
  plans: CasePlan[];
  notes: string[];
}

function tryConnect(port: number, timeoutMs: number): Promise<net.Socket | null> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(null);
    });
  });
}

async function startBlockedListener(holdMs: number, cleanup: CleanupStack): Promise<number> {
  const child = spawn(process.execPath, [path.join(HERE, 'blocked-listener.ts'), String(holdMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanup.add('kill blocked listener', () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('blocked listener did not start within 10 s')), 10_000);
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      const m = /PORT (\d+)/.exec(buf);
      if (m !== null) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`blocked listener exited early (${code})`));
    });
  });
}

async function releasedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen({ host: '127.0.0.1', port: 0 }, () => resolve());
  });
  const addr = srv.address();
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  if (addr === null || typeof addr === 'string') throw new Error('no TCP address');
  return addr.port;
}

export async function setupLoopback(opts: {
  peers: number;
  timeoutMs: number;
  /** How much longer the blocked listener must stay blocked (the Spark scenarios run after the cases). */
  extraHoldMs?: number;
  cleanup: CleanupStack;
  log: (line: string) => void;
}): Promise<LoopbackEnv> {
  const { peers, timeoutMs, cleanup } = opts;
  const notes: string[] = [];
  const holdMs = peers * (timeoutMs + 1000) * 2 + (opts.extraHoldMs ?? 0) + 20_000;
  const port = await startBlockedListener(holdMs, cleanup);
  // Fill the accept queue of the blocked listener until a SYN goes unanswered.
  const fillers: net.Socket[] = [];
  cleanup.add('close queue fillers', () => fillers.forEach((s) => s.destroy()));
  let saturated = false;
  for (let i = 0; i < MAX_FILL_CONNECTS && !saturated; i++) {
    const s = await tryConnect(port, FILL_TIMEOUT_MS);
    if (s === null) saturated = true;
    else fillers.push(s);
  }
  const plans: CasePlan[] = [
    { id: 'live', targets: Array.from({ length: peers }, () => ({ host: '127.0.0.1', port: 0 })), serveLocal: true },
  ];
  const closedPort = await releasedPort();
  plans.push({ id: 'closed', targets: Array.from({ length: peers }, () => ({ host: '127.0.0.1', port: closedPort })) });
  if (saturated) {
    notes.push(
      `drop: 127.0.0.1:${port} is a listener that never accept()s; its accept queue was filled with ` +
        `${fillers.length} connections, so the kernel silently drops new SYNs (tcp_abort_on_overflow=0). ` +
        'All "lost peers" are this one port.',
    );
    plans.push({ id: 'drop', targets: Array.from({ length: peers }, () => ({ host: '127.0.0.1', port })) });
  } else {
    notes.push(`drop: could not saturate the accept queue after ${MAX_FILL_CONNECTS} connects; case (a) skipped`);
  }
  notes.push(
    'reject: needs an iptables REJECT rule (root + a network namespace); case (b) skipped in loopback mode. ' +
      'Case (c) (RST) is the nearest stand-in: it also fails on the first packet with ECONNREFUSED.',
  );
  return { plans, notes };
}
