/**
 * The discovery documents kubectl and client libraries read before any resource call.
 * Only what is served is advertised (no watch verb, no API groups), so clients see the
 * emulator's real capabilities. Legacy (unaggregated) discovery only.
 */

export const SERVER_VERSION = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-spark-exec-svc-emulator',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2025-01-01T00:00:00Z',
  goVersion: 'go1.23.4',
  compiler: 'gc',
  platform: 'linux/amd64',
} as const;

const POD_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update'];
const STATUS_VERBS = ['get', 'patch', 'update'];

export function apiVersions(serverAddress: string): object {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

export function apiGroupList(): object {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [] };
}

export function coreV1Resources(): object {
  return {
    kind: 'APIResourceList',
    groupVersion: 'v1',
    resources: [
      {
        name: 'namespaces',
        singularName: 'namespace',
        namespaced: false,
        kind: 'Namespace',
        verbs: ['create', 'get', 'list'],
        shortNames: ['ns'],
      },
      {
        name: 'pods',
        singularName: 'pod',
        namespaced: true,
        kind: 'Pod',
        verbs: POD_VERBS,
        shortNames: ['po'],
        categories: ['all'],
      },
      { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: STATUS_VERBS },
      {
        name: 'services',
        singularName: 'service',
        namespaced: true,
        kind: 'Service',
        verbs: POD_VERBS,
        shortNames: ['svc'],
        categories: ['all'],
      },
      { name: 'services/status', singularName: '', namespaced: true, kind: 'Service', verbs: STATUS_VERBS },
    ],
  };
}

/**
 * OpenAPI v3 stub: only enough for kubectl to learn that PATCH on pods and services takes
 * the fieldValidation query parameter (so it validates server-side instead of downloading
 * schemas). No component schemas are served.
 */
export function openapiV3Root(): object {
  return { paths: { 'api/v1': { serverRelativeURL: '/openapi/v3/api/v1?hash=KUBE-EMULATOR-1' } } };
}

export function openapiV3CoreV1(): object {
  const fieldValidation = {
    name: 'fieldValidation',
    in: 'query',
    description: 'fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.',
    schema: { type: 'string', uniqueItems: true },
  };
  const paths: Record<string, object> = {};
  for (const [plural, kind] of [
    ['pods', 'Pod'],
    ['services', 'Service'],
  ] as const) {
    const gvk = { group: '', version: 'v1', kind };
    const op = (id: string): object => ({
      operationId: id,
      parameters: [fieldValidation],
      responses: {},
      'x-kubernetes-action': 'patch',
      'x-kubernetes-group-version-kind': gvk,
    });
    paths[`/api/v1/namespaces/{namespace}/${plural}/{name}`] = { patch: op(`patchCoreV1Namespaced${kind}`) };
    paths[`/api/v1/namespaces/{namespace}/${plural}/{name}/status`] = { patch: op(`patchCoreV1Namespaced${kind}Status`) };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.32.0' }, paths };
}
