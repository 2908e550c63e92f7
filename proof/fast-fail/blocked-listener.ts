/**
 * Loopback fallback for the "lost executor" case (no root / no iptables / no netns).
 *
 * A TCP listener with backlog 1 whose process never calls accept(): after listening it
 * blocks its own event loop (Atomics.wait), so the kernel's accept queue fills up. Linux
 * then silently drops further SYNs to that port (tcp_abort_on_overflow=0, the default),
 * the client retransmits its SYN and hangs until its own connect timeout fires - the same
 * symptom a vanished pod IP produces. The orchestrator fills the queue before measuring.
 *
 * Usage: node blocked-listener.ts HOLD_MS   -> prints "PORT <n>" then blocks for HOLD_MS.
 */
import net from 'node:net';

const holdMs = Math.min(Math.max(Number(process.argv[2] ?? '30000'), 1000), 300_000);
const server = net.createServer(() => {
  /* never reached while blocked */
});
server.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
  const addr = server.address();
  if (addr === null || typeof addr === 'string') process.exit(2);
  process.stdout.write(`PORT ${addr.port}\n`, () => {
    // Block the event loop: libuv never gets to accept() the queued connections.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, holdMs);
    process.exit(0);
  });
});
