/**
 * The Kubernetes API-server emulator in a process of its own, driven over IPC by the bench
 * (bench/lib/procs.ts). Keeping it out of the measuring process means its CPU time and memory
 * are the same for every variant and never counted as the function's or the client's.
 *
 *   fork('bench/lib/emulator-child.ts', [kubeconfigPath])  → { type: 'ready', url }
 */
import { startEmulator } from '../../packages/kube-emulator/index.ts';

export type EmulatorCommand =
  | { readonly op: 'seed'; readonly objects: readonly object[] }
  | { readonly op: 'delete'; readonly resource: 'pods' | 'services'; readonly namespace: string; readonly name: string }
  | {
      readonly op: 'patch';
      readonly resource: 'pods' | 'services';
      readonly namespace: string;
      readonly name: string;
      readonly patch: object;
    }
  | { readonly op: 'get'; readonly resource: 'pods' | 'services'; readonly namespace: string; readonly name: string }
  | { readonly op: 'countByVerb'; readonly resource?: string }
  /** The request log (emulator.requests) since the last reset, optionally of one namespace only. */
  | { readonly op: 'requests'; readonly namespace?: string }
  | { readonly op: 'reset' }
  /** Every later API request is answered `ms` later: stands in for a real API server's latency. */
  | { readonly op: 'latency'; readonly ms: number }
  /** How many objects match; with `annotation`, only those that carry that annotation key. */
  | {
      readonly op: 'countObjects';
      readonly resource: 'pods' | 'services';
      readonly namespace?: string;
      readonly labelSelector?: string;
      readonly annotation?: string;
    }
  /** Several commands in one message, run in order; their results in that order (one IPC round trip for a batch of pod changes). */
  | { readonly op: 'batch'; readonly commands: readonly EmulatorCommand[] }
  | { readonly op: 'stop' };

/** One API request as the emulator logged it. */
export interface LoggedRequest {
  readonly verb: string;
  readonly resource: string | undefined;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  /** The raw query string (labelSelector, limit…). */
  readonly query: string;
  readonly status: number;
  /**
   * When the request reached the emulator: CLOCK_MONOTONIC in µs (process.hrtime, the same clock
   * in every process of the machine), so that a sender can tell which of its events caused it.
   */
  readonly at: number;
}

const kubeconfigPath = process.argv[2];
if (kubeconfigPath === undefined || process.send === undefined) {
  console.error('emulator-child: run through fork() with a kubeconfig path');
  process.exit(2);
}
const send = process.send.bind(process);
const emulator = await startEmulator({ host: '127.0.0.1' });
emulator.writeKubeconfig(kubeconfigPath);

// Every request is stamped as it is logged (the log is an array the emulator pushes to; a reset
// empties the same array), on the monotonic clock the bench stamps its events with.
const arrivedAt = new WeakMap<object, number>();
const log = emulator.requests as object[];
Object.defineProperty(log, 'push', {
  value: (...items: object[]): number => {
    const at = Number(process.hrtime.bigint() / 1000n);
    for (const item of items) arrivedAt.set(item, at);
    return Array.prototype.push.apply(log, items);
  },
});

function run(command: EmulatorCommand): unknown {
  switch (command.op) {
    case 'seed':
      return command.objects.map((o) => emulator.seed(o));
    case 'delete':
      emulator.deleteObject(command.resource, command.namespace, command.name);
      return null;
    case 'patch':
      return emulator.patchObject(command.resource, command.namespace, command.name, command.patch);
    case 'get':
      return emulator.getObject(command.resource, command.namespace, command.name) ?? null;
    case 'requests':
      return emulator.requests
        .filter((r) => command.namespace === undefined || r.namespace === command.namespace)
        .map(
          (r): LoggedRequest => ({
            verb: r.verb,
            resource: r.resource,
            namespace: r.namespace,
            name: r.name,
            query: r.query,
            status: r.status,
            at: arrivedAt.get(r) ?? 0,
          }),
        );
    case 'countByVerb': {
      const counts: Record<string, number> = {};
      for (const r of emulator.requests) {
        if (command.resource !== undefined && r.resource !== command.resource) continue;
        counts[r.verb] = (counts[r.verb] ?? 0) + 1;
      }
      return counts;
    }
    case 'reset':
      emulator.resetRequests();
      return null;
    case 'latency':
      emulator.faults.clear();
      if (command.ms > 0) emulator.faults.add({ times: 1_000_000_000, fault: { kind: 'delay', ms: command.ms } });
      return null;
    case 'countObjects':
      return emulator
        .listObjects(command.resource, command.namespace, command.labelSelector)
        .filter(
          (o) =>
            command.annotation === undefined ||
            (o as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations?.[command.annotation] !== undefined,
        ).length;
    case 'batch':
      return command.commands.map((c) => run(c));
    case 'stop':
      return null;
  }
}

process.on('message', (message: { id: number; command: EmulatorCommand }) => {
  let reply: { id: number; result?: unknown; error?: string };
  try {
    reply = { id: message.id, result: run(message.command) };
  } catch (error) {
    reply = { id: message.id, error: error instanceof Error ? error.message : String(error) };
  }
  send(reply, () => {
    if (message.command.op === 'stop') void emulator.stop().then(() => process.exit(0));
  });
});
// The bench went away (crash, Ctrl-C): do not linger.
process.on('disconnect', () => void emulator.stop().then(() => process.exit(0)));
send({ type: 'ready', url: emulator.url });
