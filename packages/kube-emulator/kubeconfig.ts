/**
 * Client configuration pointing at the emulator: a KubeConfig object for client-node and a
 * kubeconfig file for kubectl (and KubeConfig.loadFromFile). The server is plain HTTP, so
 * the cluster is marked insecure-skip-tls-verify: client-node 2.x refuses http:// otherwise.
 */
import { writeFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';

export const CONTEXT_NAME = 'kube-emulator';
/** Any bearer token is accepted; this one just makes the Authorization header visible in logs. */
export const TOKEN = 'kube-emulator-token';

export function buildKubeConfig(url: string, namespace = 'default'): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: CONTEXT_NAME, server: url, skipTLSVerify: true }],
    users: [{ name: CONTEXT_NAME, token: TOKEN }],
    contexts: [{ name: CONTEXT_NAME, cluster: CONTEXT_NAME, user: CONTEXT_NAME, namespace }],
    currentContext: CONTEXT_NAME,
  });
  return kc;
}

export function kubeconfigYaml(url: string, namespace = 'default'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${CONTEXT_NAME}`,
    '  cluster:',
    `    server: ${url}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${CONTEXT_NAME}`,
    '  user:',
    `    token: ${TOKEN}`,
    'contexts:',
    `- name: ${CONTEXT_NAME}`,
    '  context:',
    `    cluster: ${CONTEXT_NAME}`,
    `    user: ${CONTEXT_NAME}`,
    `    namespace: ${namespace}`,
    `current-context: ${CONTEXT_NAME}`,
    '',
  ].join('\n');
}

export function writeKubeconfigFile(path: string, url: string): void {
  writeFileSync(path, kubeconfigYaml(url), { mode: 0o600 });
}
