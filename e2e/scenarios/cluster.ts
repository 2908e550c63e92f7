/**
 * Where the scenarios get their API server. Either a running one named by the environment
 * (E2E_APISERVER_URL, E2E_APISERVER_CA_FILE, E2E_ADMIN_TOKEN — e.g. a control plane started by
 * hand), or the harness's own cluster (e2e/cluster, started per scenario file).
 */
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiAccess } from '../adapter/kube-access.ts';
import { type Cluster, startCluster } from '../cluster/cluster.ts';
import type { ClusterEndpoints } from './plane.ts';

export interface ScenarioCluster {
  readonly endpoints: ClusterEndpoints;
  /** Whether pods bound to the node actually run (a kubelet) or stay Pending (control plane only). */
  readonly kubelet: boolean;
  /** Restarts kube-apiserver (same etcd), when the cluster can. */
  readonly restartApiServer: (() => Promise<void>) | undefined;
  /** The harness's cluster (pods run, exec in a pod's netns), when the scenarios started it. */
  readonly harness: Cluster | undefined;
  stop(): Promise<void>;
}

export async function scenarioCluster(name: string, needs: { kubelet: boolean; dns?: boolean }): Promise<ScenarioCluster> {
  const logDir = join(process.env['E2E_LOG_DIR'] ?? join(tmpdir(), `spark-exec-svc-e2e-${process.pid}`), name);
  const url = process.env['E2E_APISERVER_URL'];
  if (url !== undefined && url !== '') {
    const caFile = process.env['E2E_APISERVER_CA_FILE'];
    const token = process.env['E2E_ADMIN_TOKEN'];
    if (caFile === undefined || token === undefined) throw new Error('E2E_APISERVER_URL needs E2E_APISERVER_CA_FILE and E2E_ADMIN_TOKEN');
    const admin: ApiAccess = { server: url, caPem: readFileSync(caFile, 'utf8'), token };
    const parsed = new URL(url);
    const restartCmd = process.env['E2E_RESTART_APISERVER'];
    return {
      endpoints: { admin, apiServer: { host: parsed.hostname, port: Number(parsed.port || 443) }, logDir },
      kubelet: process.env['E2E_KUBELET'] === '1',
      restartApiServer:
        restartCmd === undefined
          ? undefined
          : async () => {
              const { execSync } = await import('node:child_process');
              execSync(restartCmd, { stdio: 'inherit' });
            },
      harness: undefined,
      stop: async () => {},
    };
  }
  // Without a kubelet the scenarios write pods' Running status themselves (status subresource).
  // Connects go to ClusterIPs, never to names: no CoreDNS needed, unless a scenario resolves
  // Service names (the Spark executors advertise them).
  const harness = await startCluster(
    needs.kubelet ? { proxyMode: 'iptables', dns: needs.dns ?? false } : { kubelet: false, dns: false, proxyMode: 'none' },
  );
  const hostUrl = new URL(harness.apiServerHostURL);
  return {
    endpoints: {
      admin: { server: harness.apiServerHostURL, caPem: harness.caCertPem, token: harness.tokens.admin },
      apiServer: { host: hostUrl.hostname, port: Number(hostUrl.port) },
      // Outside the cluster's work dir, which stop() removes.
      logDir,
      createNamespace: (ns) => harness.createNamespace(ns),
      createTenant: (ns, n) => harness.createTenant(ns, n),
    },
    kubelet: needs.kubelet,
    restartApiServer: undefined,
    harness,
    stop: async () => {
      const report = await harness.stop();
      if (!report.clean) throw new Error(`cluster left: ${report.leftovers.join(', ')}`);
    },
  };
}
