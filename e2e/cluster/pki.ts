/**
 * Credentials of one e2e cluster run, all fresh per run and kept in its work directory:
 * a CA and the kube-apiserver's serving certificate (openssl; SANs for every address a client
 * uses: the node IP, the `kubernetes` Service's ClusterIP, loopback for the forwarded port), the
 * ServiceAccount signing key pair, and static bearer tokens (`--token-auth-file`) for the
 * components' own identities, whose permissions come from the API server's bootstrap RBAC
 * (plugin/pkg/auth/authorizer/rbac/bootstrappolicy in k8s.io/kubernetes v1.34.4).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary, runOrThrow } from './sys.ts';

/** A user the token file authenticates. */
export interface StaticIdentity {
  user: string;
  uid: string;
  groups: readonly string[];
}

/** The components' identities, as the bootstrap roles expect them. */
export const COMPONENT_IDENTITIES = {
  // system:masters: the harness's and the tests' superuser.
  admin: { user: 'e2e-admin', uid: 'e2e-admin', groups: ['system:masters'] },
  // Bound to ClusterRole system:kube-controller-manager; with --use-service-account-credentials
  // each controller then runs under its own kube-system ServiceAccount (as kubeadm does).
  controllerManager: { user: 'system:kube-controller-manager', uid: 'kcm', groups: [] },
  scheduler: { user: 'system:kube-scheduler', uid: 'scheduler', groups: [] },
  // ClusterRoleBinding system:node-proxier binds user system:kube-proxy.
  proxy: { user: 'system:kube-proxy', uid: 'kube-proxy', groups: [] },
  // The Node authorizer and NodeRestriction admission identify a kubelet by this name and group.
  kubelet: { user: 'system:node:node1', uid: 'kubelet-node1', groups: ['system:nodes'] },
  // Given the rights of CoreDNS's upstream ClusterRole system:coredns by the harness.
  coredns: { user: 'system:coredns', uid: 'coredns', groups: [] },
} as const satisfies Record<string, StaticIdentity>;

export type ComponentIdentity = keyof typeof COMPONENT_IDENTITIES;

export interface ClusterPki {
  caCert: string;
  caCertPem: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  serviceAccountPublicKey: string;
  serviceAccountPrivateKey: string;
  tokenAuthFile: string;
  tokens: Record<ComponentIdentity, string>;
}

export function createPki(dir: string, sans: { ips: readonly string[]; dns: readonly string[] }): ClusterPki {
  const openssl = findBinary('openssl');
  if (openssl === null) throw new Error('`openssl` not found (apt-get install openssl)');
  const p = (f: string): string => join(dir, f);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  runOrThrow(openssl, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
    '-days',
    '3',
    '-subj',
    '/CN=spark-exec-svc-e2e-ca',
  ]);
  runOrThrow(openssl, ['req', '-new', ...ec, '-keyout', p('apiserver.key'), '-out', p('apiserver.csr'), '-subj', '/CN=kube-apiserver']);
  const altNames = [...sans.ips.map((ip) => `IP:${ip}`), ...sans.dns.map((d) => `DNS:${d}`)].join(',');
  writeFileSync(p('apiserver.ext'), `subjectAltName=${altNames}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`);
  runOrThrow(openssl, [
    'x509',
    '-req',
    '-in',
    p('apiserver.csr'),
    '-CA',
    p('ca.crt'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-out',
    p('apiserver.crt'),
    '-days',
    '3',
    '-extfile',
    p('apiserver.ext'),
  ]);
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(p('sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(p('sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });

  const tokens = Object.fromEntries(Object.keys(COMPONENT_IDENTITIES).map((k) => [k, randomBytes(24).toString('hex')])) as Record<
    ComponentIdentity,
    string
  >;
  // token,user,uid,"group1,group2" (k8s.io/apiserver/pkg/authentication/token/tokenfile).
  const csv = (Object.entries(COMPONENT_IDENTITIES) as [ComponentIdentity, StaticIdentity][])
    .map(([k, id]) => `${tokens[k]},${id.user},${id.uid}${id.groups.length > 0 ? `,"${id.groups.join(',')}"` : ''}`)
    .join('\n');
  writeFileSync(p('tokens.csv'), `${csv}\n`, { mode: 0o600 });

  return {
    caCert: p('ca.crt'),
    caCertPem: readFileSync(p('ca.crt'), 'utf8'),
    caKey: p('ca.key'),
    servingCert: p('apiserver.crt'),
    servingKey: p('apiserver.key'),
    serviceAccountPublicKey: p('sa.pub'),
    serviceAccountPrivateKey: p('sa.key'),
    tokenAuthFile: p('tokens.csv'),
    tokens,
  };
}

/** A kubeconfig (JSON is YAML) authenticating with a bearer token, trusting the run's CA. */
export function writeKubeconfig(file: string, server: string, caCertPem: string, token: string, user: string): string {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'e2e', cluster: { server, 'certificate-authority-data': Buffer.from(caCertPem).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'e2e', context: { cluster: 'e2e', user } }],
    'current-context': 'e2e',
  };
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return file;
}
