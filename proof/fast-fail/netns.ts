/**
 * The "netns" environment: a private network namespace with only its own loopback device,
 * and iptables rules inside it that stand in for
 *   (a) a deleted executor pod IP   -> DROP  (SYNs vanish; nothing answers)
 *   (b) a Service with no endpoints -> REJECT --reject-with icmp-port-unreachable
 *       (the rule kube-proxy's iptables mode installs in its KUBE-SERVICES filter chain)
 * All addresses are in 127.0.0.0/8 and exist only inside the namespace; the host's network
 * and firewall are never touched (rules live in the namespace and vanish with it).
 */
import { run, runOrThrow } from './sys.ts';
import type { CleanupStack } from './sys.ts';
import type { CasePlan } from './types.ts';

export const NETNS_PREFIX = 'sxs-demo-';
/** Spark on Kubernetes' default executor block-manager port (spark.blockManager.port). */
export const PEER_PORT = 7079;

export const DROP_CHAIN = 'SXS-LOST-PODS';
export const REJECT_CHAIN = 'SXS-SERVICES';

/** 127.0.<net>.<i>: 1 = lost pod IPs, 2 = Service ClusterIPs, 3 = closed ports, 4 = live peer. */
export function peerAddress(net: 1 | 2 | 3 | 4, i: number): string {
  return `127.0.${net}.${i}`;
}

let counter = 0;

export function namespaceName(): string {
  counter += 1;
  return `${NETNS_PREFIX}${process.pid}-${counter}`;
}

/**
 * Delete demo namespaces left behind by a run that was killed (SIGKILL cannot be trapped).
 * Only names whose owning pid is no longer alive are touched, so a concurrent run is safe.
 */
export function sweepStaleNamespaces(ip: string, log: (line: string) => void): void {
  const list = run(ip, ['netns', 'list']);
  if (!list.ok) return;
  const names = list.stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(NETNS_PREFIX))
    .slice(0, 100);
  for (const name of names) {
    const m = /^sxs-demo-(\d+)(?:-\d+)?$/.exec(name);
    const pid = Number(m?.[1] ?? NaN);
    if (!Number.isInteger(pid) || pid <= 0 || isAlive(pid)) continue;
    const del = run(ip, ['netns', 'del', name]);
    log(del.ok ? `removed stale namespace ${name} (pid ${pid} is gone)` : `could not remove stale ${name}: ${del.stderr.trim()}`);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface NetnsEnv {
  name: string;
  /** argv prefix that runs a command inside the namespace. */
  execPrefix: string[];
  plans: CasePlan[];
  ruleSummary: string[];
  /** Packet counters of the DROP / REJECT chains (proof that the rules did the work). */
  counters(): { dropPackets: number | null; rejectPackets: number | null };
}

export function setupNetns(opts: {
  ip: string;
  iptables: string;
  peers: number;
  cleanup: CleanupStack;
  log: (line: string) => void;
}): NetnsEnv {
  const { ip, iptables, peers, cleanup } = opts;
  const name = namespaceName();
  runOrThrow(ip, ['netns', 'add', name]);
  cleanup.add(`ip netns del ${name}`, () => {
    const r = run(ip, ['netns', 'del', name]);
    if (!r.ok) opts.log(`WARNING: could not delete namespace ${name}: ${r.stderr.trim()}`);
  });
  runOrThrow(ip, ['-n', name, 'link', 'set', 'lo', 'up']);
  const ipt = (...args: string[]): string => runOrThrow(ip, ['netns', 'exec', name, iptables, '-w', '5', ...args]);
  const port = String(PEER_PORT);

  // (a) the lost pod IPs: whatever the route, nobody answers. DROP where the packet arrives.
  ipt('-N', DROP_CHAIN);
  ipt('-A', DROP_CHAIN, '-d', '127.0.1.0/24', '-p', 'tcp', '--dport', port, '-j', 'DROP');
  ipt('-A', 'INPUT', '-j', DROP_CHAIN);
  // (b) one rule per Service, like kube-proxy: `-A KUBE-SERVICES -d <clusterIP>/32 -p tcp
  //     -m comment --comment "ns/svc:port has no endpoints" -m tcp --dport P -j REJECT`.
  //     kube-proxy jumps to KUBE-SERVICES from OUTPUT (and FORWARD, for pod traffic).
  ipt('-N', REJECT_CHAIN);
  for (let i = 1; i <= peers; i++) {
    ipt(
      '-A',
      REJECT_CHAIN,
      '-d',
      `${peerAddress(2, i)}/32`,
      '-p',
      'tcp',
      '-m',
      'comment',
      '--comment',
      `spark/svc-spark-demo-exec-${i}:blockmanager has no endpoints`,
      '-m',
      'tcp',
      '--dport',
      port,
      '-j',
      'REJECT',
      '--reject-with',
      'icmp-port-unreachable',
    );
  }
  ipt('-A', 'OUTPUT', '-j', REJECT_CHAIN);
  const ruleSummary = runOrThrow(ip, ['netns', 'exec', name, iptables, '-w', '5', '-S'])
    .split('\n')
    .filter((l) => l.startsWith('-A'));

  const range = (net: 1 | 2 | 3 | 4) => Array.from({ length: peers }, (_, k) => ({ host: peerAddress(net, k + 1), port: PEER_PORT }));
  const plans: CasePlan[] = [
    { id: 'live', targets: Array.from({ length: peers }, () => ({ host: peerAddress(4, 1), port: PEER_PORT })), serveLocal: true },
    { id: 'closed', targets: range(3) },
    { id: 'reject', targets: range(2) },
    { id: 'drop', targets: range(1) },
  ];

  const chainPackets = (chain: string): number | null => {
    const r = run(ip, ['netns', 'exec', name, iptables, '-w', '5', '-L', chain, '-n', '-v', '-x']);
    if (!r.ok) return null;
    let sum = 0;
    for (const line of r.stdout.split('\n').slice(2)) {
      const pkts = Number(line.trim().split(/\s+/)[0]);
      if (Number.isFinite(pkts)) sum += pkts;
    }
    return sum;
  };

  return {
    name,
    execPrefix: [ip, 'netns', 'exec', name],
    plans,
    ruleSummary,
    counters: () => ({ dropPackets: chainPackets(DROP_CHAIN), rejectPackets: chainPackets(REJECT_CHAIN) }),
  };
}
