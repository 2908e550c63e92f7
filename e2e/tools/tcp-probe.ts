/**
 * Connects to HOST:PORT every INTERVAL ms (each attempt bounded by TIMEOUT ms) for DURATION ms
 * and prints one JSON line per attempt: {t: epoch ms at the attempt's start, ms: how long it took,
 * outcome: 'connected' | 'refused' | 'timeout' | 'unreachable' | <errno code>, data?: first line}.
 * Run inside a pod's network namespace (`ip netns exec`), so it measures what a pod sees.
 * Usage: tcp-probe.ts HOST PORT [INTERVAL=20] [TIMEOUT=300] [DURATION=30000] [--until-refused]
 */
import { connect } from 'node:net';

const [host, portArg, intervalArg, timeoutArg, durationArg] = process.argv.slice(2);
const port = Number(portArg);
const interval = Number(intervalArg ?? 20);
const timeout = Number(timeoutArg ?? 300);
const duration = Number(durationArg ?? 30_000);
const untilRefused = process.argv.includes('--until-refused');
if (host === undefined || !Number.isInteger(port)) {
  process.stderr.write('usage: tcp-probe.ts HOST PORT [INTERVAL] [TIMEOUT] [DURATION] [--until-refused]\n');
  process.exit(2);
}

function attempt(): Promise<{ t: number; ms: number; outcome: string; data?: string }> {
  const t = Date.now();
  return new Promise((resolve) => {
    let data = '';
    let settled = false;
    const done = (outcome: string): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve({ t, ms: Date.now() - t, outcome, ...(data !== '' ? { data: data.split('\n')[0] } : {}) });
    };
    const socket = connect({ host, port });
    socket.setTimeout(timeout, () => done('timeout'));
    socket.on('connect', () => socket.setTimeout(timeout, () => done('connected')));
    socket.on('data', (c: Buffer) => (data += c.toString('utf8')));
    socket.on('end', () => done('connected'));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      const code = e.code ?? 'error';
      done(code === 'ECONNREFUSED' ? 'refused' : code === 'EHOSTUNREACH' || code === 'ENETUNREACH' ? 'unreachable' : code);
    });
  });
}

const end = Date.now() + duration;
while (Date.now() < end) {
  const r = await attempt();
  process.stdout.write(`${JSON.stringify(r)}\n`);
  if (untilRefused && r.outcome === 'refused') break;
  const wait = r.t + interval - Date.now();
  if (wait > 0) await new Promise((res) => setTimeout(res, wait));
}
