/**
 * A pod's server for the e2e scenarios: listens on 0.0.0.0:PORT (argv[2], default 8080) and
 * answers every connection with one JSON line of what it sees — its POD_IP (downward API
 * status.podIP), hostname, the connection's local and remote address — then closes it.
 * It does not handle SIGTERM: the kubelet's SIGTERM ends it (exit by signal, code 143).
 */
import { createServer } from 'node:net';
import { hostname } from 'node:os';

const port = Number(process.argv[2] ?? 8080);
const server = createServer((socket) => {
  // A client gone before the answer (a port probe that only connects) resets the connection: that
  // one socket's error, not the server's — unhandled, it would end the process (seen: a sidecar
  // probed by its postStart hook died, and its port was free again).
  socket.on('error', () => undefined);
  socket.end(
    `${JSON.stringify({ podIP: process.env['POD_IP'] ?? null, hostname: hostname(), local: socket.localAddress, remote: socket.remoteAddress })}\n`,
  );
});
server.listen(port, '0.0.0.0', () => process.stdout.write(`listening on ${port}\n`));
