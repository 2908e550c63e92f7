/**
 * A TCP relay on 127.0.0.1 in front of the API server, for the adapter only: `partition()` cuts
 * every open connection and, until `heal()`, closes each new one at once (a TLS handshake then
 * fails with EOF). client-go's reflector does not retry a watch that fails that way (only a
 * refused connect or a 429 — k8s.io/client-go tools/cache/reflector.go isWatchErrorRetriable), so
 * ListAndWatch returns and, once healed, starts over with a full LIST: the adapter re-lists, as it
 * does after a network partition or an API server restart.
 */
import { createServer, type Server, type Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpRelay {
  readonly port: number;
  readonly connectionsAccepted: () => number;
  partition(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  const open = new Set<Socket>();
  let partitioned = false;
  let accepted = 0;
  const server: Server = createServer((client) => {
    accepted++;
    if (partitioned) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: targetHost, port: targetPort });
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connectionsAccepted: () => accepted,
    partition: () => {
      partitioned = true;
      for (const s of open) s.destroy();
      open.clear();
    },
    heal: () => {
      partitioned = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
