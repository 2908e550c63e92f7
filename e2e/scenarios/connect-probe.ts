/**
 * Connects to host:port again and again from wherever it runs (the harness starts it inside a pod's
 * network namespace with nsenter) and prints one JSON line per attempt whose outcome differs from
 * the one before: {"atMs": <wall clock ms>, "outcome": "connected" | "refused" | "timeout" | "<errno>"}.
 * Stops after the first attempt with outcome `--until`, or at the deadline. Bounded: one attempt at
 * a time, at most one per `intervalMs`, each given `timeoutMs`.
 *
 * Usage: node connect-probe.ts HOST PORT --until refused --interval-ms 20 --timeout-ms 1000 --deadline-ms 60000
 */
import { Socket } from 'node:net';
import { parseArgs } from 'node:util';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    until: { type: 'string' },
    'interval-ms': { type: 'string', default: '20' },
    'timeout-ms': { type: 'string', default: '1000' },
    'deadline-ms': { type: 'string', default: '60000' },
  },
});
const [host, portText] = positionals;
const port = Number(portText);
if (host === undefined || !Number.isInteger(port) || port < 1 || port > 65535) {
  process.stderr.write('usage: connect-probe HOST PORT [--until OUTCOME] [--interval-ms N] [--timeout-ms N] [--deadline-ms N]\n');
  process.exit(2);
}
const target: string = host;
const intervalMs = Number(values['interval-ms']);
const timeoutMs = Number(values['timeout-ms']);
const deadline = Date.now() + Number(values['deadline-ms']);

function attempt(): Promise<string> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (outcome: string): void => {
      socket.destroy();
      resolve(outcome);
    };
    socket.setTimeout(timeoutMs, () => done('timeout'));
    socket.once('connect', () => done('connected'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED' ? 'refused' : (error.code ?? error.message)));
    socket.connect({ port, host: target });
  });
}

let last = '';
while (Date.now() < deadline) {
  const startedAt = Date.now();
  const outcome = await attempt();
  if (outcome !== last) {
    process.stdout.write(`${JSON.stringify({ atMs: startedAt, outcome })}\n`);
    last = outcome;
  }
  if (outcome === values.until) process.exit(0);
  const wait = intervalMs - (Date.now() - startedAt);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
process.stdout.write(`${JSON.stringify({ atMs: Date.now(), outcome: 'deadline' })}\n`);
process.exit(values.until === undefined ? 0 : 1);
