/**
 * What the e2e cluster needs from the machine, checked before anything is started, so that a run
 * that cannot work says exactly what is missing instead of failing half-way.
 */
import { findBinary, isRoot, run } from './sys.ts';

export interface Prerequisites {
  ok: boolean;
  /** One line per missing thing, with how to get it. */
  missing: string[];
}

const TOOLS: readonly [string, string][] = [
  ['ip', 'iproute2 (apt-get install iproute2)'],
  ['nsenter', 'util-linux'],
  ['openssl', 'openssl (apt-get install openssl)'],
  ['jq', 'jq (apt-get install jq), used by e2e/build.sh'],
  ['go', 'Go >= 1.26 (builds the components from their modules)'],
];

export function checkPrerequisites(opts: { proxyMode: 'iptables' | 'nftables' | 'none' }): Prerequisites {
  const missing: string[] = [];
  if (process.platform !== 'linux') missing.push(`Linux (this is ${process.platform})`);
  if (!isRoot()) missing.push('root (network namespaces, veth pairs, iptables/nftables rules and mounts need it)');
  for (const [tool, how] of TOOLS) if (findBinary(tool) === null) missing.push(`\`${tool}\`: ${how}`);
  if (opts.proxyMode === 'iptables' && findBinary('iptables') === null)
    missing.push('`iptables` for kube-proxy --proxy-mode=iptables (apt-get install iptables)');
  if (opts.proxyMode === 'nftables' && findBinary('nft') === null)
    missing.push('`nft` for kube-proxy --proxy-mode=nftables (apt-get install nftables)');
  if (missing.length === 0) {
    const probe = `sxs-e2e-probe-${process.pid}`;
    const add = run('ip', ['netns', 'add', probe]);
    if (!add.ok) missing.push(`creating a network namespace (ip netns add) failed: ${add.stderr.trim()}`);
    else run('ip', ['netns', 'del', probe]);
  }
  return { ok: missing.length === 0, missing };
}
