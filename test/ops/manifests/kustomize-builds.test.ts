/**
 * Every knative/ kustomize build (base and overlays): what it deploys, its RBAC, its sources and
 * triggers, checked against the Kubernetes and Knative types and the contract of
 * functions/executor-service/func.yaml (docs/deploy.md).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from 'js-yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { clusterWideOverlay, optionProblems, writeOverlay } from '../../../scripts/cluster-wide-overlay.ts';
import { TEST_IMAGE, configuredTree, sharedConfiguredTree } from '../kustomize.ts';
import {
  ROOT,
  KSVC,
  FN_SA,
  SOURCE_SA,
  PING_NAME,
  SCRIPTS_CONFIGMAP,
  CLUSTER_WIDE,
  CLUSTER_SCOPED,
  INPUT_TYPES,
  PING_TYPE,
  OUTPUT_TYPES,
  REPLY_SOURCE,
  ENV_CONTRACT,
  KNATIVE_RESERVED_ENV,
  FN_PERMISSIONS,
  SOURCE_PERMISSIONS,
  BUILDS,
  validatorFor,
  type Json,
  type K8sObject,
  type PolicyRule,
  type Binding,
  type Destination,
  type Selector,
  type TriggerObj,
  SKIP_KUBECTL,
  kustomize,
  id,
  ofKind,
  knativeServices,
  sorted,
  selectorMatches,
  triggerMatches,
  permissionsOf,
  permissionsByNamespace,
  clusterWideServiceWriters,
  routesToFunction,
  envMap,
  excessPropertyErrors,
  builds,
} from './support.ts';
describe.skipIf(SKIP_KUBECTL)('knative/ kustomize builds', () => {
  beforeAll(async () => {
    const results = await Promise.all(Object.keys(BUILDS).map(async (dir) => [dir, await kustomize(dir)] as const));
    for (const [dir, objs] of results) builds.set(dir, objs);
  });

  it('covers the base and every overlay directory', () => {
    const overlays = readdirSync(path.join(ROOT, 'knative/overlays'), { withFileTypes: true })
      .filter((d) => d.isDirectory() && existsSync(path.join(ROOT, 'knative/overlays', d.name, 'kustomization.yaml')))
      .map((d) => `knative/overlays/${d.name}`);
    expect(sorted(overlays)).toEqual(sorted(Object.keys(BUILDS).filter((d) => d.startsWith('knative/overlays/'))));
  });

  it('`kubectl apply -k knative/` installs exactly the base', () => {
    expect(builds.get('knative')).toEqual(builds.get('knative/base'));
  });

  it('every object has a validator and passes its published JSON schema', () => {
    const problems: string[] = [];
    for (const [dir, objs] of builds) {
      expect(objs.length, dir).toBeGreaterThan(0);
      for (const o of objs) {
        const v = validatorFor(o.apiVersion, o.kind);
        if (v === undefined) {
          problems.push(`${dir}: ${o.apiVersion} ${id(o)} has no validator`);
          continue;
        }
        try {
          new v.model(o as never).validate();
        } catch (e) {
          problems.push(`${dir}: ${id(o)}: ${(e as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('no object has a field its API type does not define (TypeScript excess-property check)', () => {
    const entries = [...builds].flatMap(([dir, objs]) => objs.map((obj) => ({ label: `${dir}: ${id(obj)}`, obj })));
    expect(entries.every((e) => validatorFor(e.obj.apiVersion, e.obj.kind) !== undefined)).toBe(true);
    expect(excessPropertyErrors(entries)).toEqual([]);
  });

  it('the type check does catch a misspelt field (guards the check above)', () => {
    const base = builds.get('knative/base')!;
    const ksvc = structuredClone(knativeServices(base)[0]!);
    (ksvc.spec.template.spec as Json)['containerConcurency'] = 20;
    const role = structuredClone(ofKind(base, 'Role')[0]!) as Json;
    (role['rules'] as Json[])[0]!['verb'] = ['get'];
    const errors = excessPropertyErrors([
      { label: 'ksvc', obj: ksvc },
      { label: 'role', obj: role as K8sObject },
    ]);
    expect(errors.some((e) => e.startsWith('ksvc:') && e.includes('containerConcurency'))).toBe(true);
    expect(errors.some((e) => e.startsWith('role:') && e.includes('"verb"') && e.includes('does not exist'))).toBe(true);
  });

  it.each(['knative/base', 'knative/overlays/broker', 'knative/overlays/monitoring'])(
    'a wrapping kustomization can move %s, executor scripts included, to another namespace (as docs/deploy.md says)',
    async (dir) => {
      const tree = sharedConfiguredTree();
      const tmp = mkdtempSync(path.join(os.tmpdir(), 'spark-exec-svc-wrap-'));
      try {
        writeFileSync(
          path.join(tmp, 'kustomization.yaml'),
          [
            'apiVersion: kustomize.config.k8s.io/v1beta1',
            'kind: Kustomization',
            'namespace: elsewhere',
            'resources:',
            `  - ${path.relative(tmp, path.join(tree, dir))}`,
            '',
          ].join('\n'),
        );
        const objs = await kustomize(tmp, tmp);
        for (const o of objs) {
          if (o.kind === 'ClusterRole') continue;
          expect(o.metadata.namespace, id(o)).toBe('elsewhere');
          if (o.kind === 'RoleBinding') expect((o as Binding).subjects?.[0]?.namespace, id(o)).toBe('elsewhere');
        }
        expect(objs.some((o) => o.kind === 'ConfigMap' && o.metadata.name === SCRIPTS_CONFIGMAP)).toBe(true);
        const fn = knativeServices(objs).find((s) => s.metadata.name === KSVC)!;
        expect(fn.spec.template.spec.containers[0]!.image).toBe(TEST_IMAGE);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
  );

  it.each(Object.keys(BUILDS))('%s does not build until knative/base/image.env sets IMAGE, and says where to set it', async (dir) => {
    // The repository as cloned: no default image (Knative would resolve a bare name on docker.io).
    expect(readFileSync(path.join(ROOT, 'knative/base/image.env'), 'utf8')).not.toMatch(/^\s*IMAGE\s*=/m);
    await expect(kustomize(dir, ROOT)).rejects.toThrow(/data\.IMAGE.*set-image-in-knative-base-image-env/s);
  });

  it('with IMAGE set, every function container runs exactly that image (no placeholder, no bare name)', () => {
    for (const [dir, objs] of builds) {
      for (const svc of knativeServices(objs).filter((x) => x.metadata.name === KSVC)) {
        expect(
          svc.spec.template.spec.containers.map((c) => c.image),
          dir,
        ).toEqual([TEST_IMAGE]);
      }
      for (const o of objs) expect(JSON.stringify(o), `${dir}: ${id(o)}`).not.toContain('set-in-knative-base-image-env');
      // kustomize keeps the image.env ConfigMap to itself (local-config).
      expect(
        objs.filter((o) => o.kind === 'ConfigMap').map((o) => o.metadata.name),
        dir,
      ).not.toContain('set-image-in-knative-base-image-env');
    }
  });

  it("no shipped manifest grants Service writes cluster-wide (no ClusterRoleBinding but sender authentication's TokenReview one)", async () => {
    for (const [dir, objs] of builds) {
      expect(clusterWideServiceWriters(objs), dir).toEqual([]);
      // TokenReview is cluster-scoped, so only a ClusterRoleBinding can grant it (knative/overlays/sender-auth);
      // permissionsOf checks that its role grants `create tokenreviews` and nothing else.
      expect(ofKind(objs, 'ClusterRoleBinding').map(id), dir).toEqual(
        BUILDS[dir]!.senderAuth === true ? ['ClusterRoleBinding/spark-exec-svc-fn-tokenreview'] : [],
      );
    }
    const dataplaneCheck = await kustomize('knative/dataplane-check', ROOT);
    expect(clusterWideServiceWriters(dataplaneCheck)).toEqual([]);
    // The check itself finds such a grant (guards the assertions above).
    const writer = [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'w' },
        rules: [{ apiGroups: [''], resources: ['services'], verbs: ['patch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'w' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'w' },
        subjects: [],
      },
    ] as unknown as K8sObject[];
    expect(clusterWideServiceWriters(writer)).toEqual(['ClusterRoleBinding/w']);
  });

  it("the executor scripts ConfigMap is installed in every namespace the function watches, equal to spark/'s files", () => {
    const kustomization = load(readFileSync(path.join(ROOT, 'spark/kustomization.yaml'), 'utf8')) as {
      configMapGenerator: { name: string; files: string[] }[];
    };
    const files = kustomization.configMapGenerator[0]!.files;
    expect(kustomization.configMapGenerator[0]!.name).toBe(SCRIPTS_CONFIGMAP);
    expect(sorted(files)).toEqual(sorted(readdirSync(path.join(ROOT, 'spark')).filter((f) => f.endsWith('.sh'))));
    for (const [dir, want] of Object.entries(BUILDS)) {
      const maps = ofKind(builds.get(dir)!, 'ConfigMap').filter((o) => o.metadata.name === SCRIPTS_CONFIGMAP);
      expect(sorted(maps.map((m) => m.metadata.namespace!)), dir).toEqual(sorted(want.watch ?? [want.namespace]));
      for (const m of maps) {
        const data = (m as unknown as { data: Record<string, string> }).data;
        expect(sorted(Object.keys(data)), dir).toEqual(sorted(files));
        for (const f of files) expect(data[f], `${dir}: ${f}`).toBe(readFileSync(path.join(ROOT, 'spark', f), 'utf8'));
      }
    }
  });

  it('knative/overlays/cluster-wide is exactly what scripts/cluster-wide-overlay.ts writes for its namespace list (no drift)', () => {
    const committed = path.join(ROOT, 'knative/overlays/cluster-wide');
    const listFiles = (dir: string, at = ''): string[] =>
      readdirSync(path.join(dir, at), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? listFiles(dir, path.join(at, e.name)) : [path.join(at, e.name)],
      );
    const generated = clusterWideOverlay(CLUSTER_WIDE);
    expect(sorted(listFiles(committed))).toEqual(sorted([...generated.keys()]));
    for (const [file, text] of generated) expect(readFileSync(path.join(committed, file), 'utf8'), file).toBe(text);
  });

  it('the cluster-wide generator, for another list, binds the ClusterRoles in exactly those namespaces', async () => {
    const tree = configuredTree();
    try {
      const options = { installNamespace: 'spark-exec-ops', watch: ['etl', 'ml-batch', 'adhoc'] };
      writeOverlay(path.join(tree, 'knative/overlays/cluster-wide'), clusterWideOverlay(options));
      const objs = await kustomize('knative/overlays/cluster-wide', tree);
      expect(ofKind(objs, 'ClusterRoleBinding')).toEqual([]);
      for (const sa of [FN_SA, SOURCE_SA]) {
        const byNs = permissionsByNamespace(objs, sa);
        expect(sorted(Object.keys(byNs)), sa).toEqual(sorted(options.watch));
        for (const ns of options.watch) expect(byNs[ns], `${sa} in ${ns}`).toEqual(sa === FN_SA ? FN_PERMISSIONS : SOURCE_PERMISSIONS);
        for (const b of ofKind<Binding>(objs, 'RoleBinding').filter((x) => x.subjects?.[0]?.name === sa))
          expect(b.subjects?.[0]?.namespace).toBe(options.installNamespace);
      }
      const fn = knativeServices(objs)[0]!;
      expect(fn.metadata.namespace).toBe(options.installNamespace);
      expect(envMap(fn.spec.template.spec.containers[0]!)['WATCH_NAMESPACES']).toBe(options.watch.join(','));
      const source = ofKind(objs, 'ApiServerSource')[0] as unknown as { spec: { namespaceSelector: Selector } };
      expect(source.spec.namespaceSelector.matchExpressions?.[0]?.values).toEqual(options.watch);
      expect(sorted(ofKind(objs, 'ConfigMap').map((m) => m.metadata.namespace!))).toEqual(sorted(options.watch));
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });

  it('the cluster-wide generator refuses bad lists with every reason', () => {
    expect(optionProblems({ installNamespace: 'ops', watch: ['a', 'a', 'Bad_Name', 'ops'] })).toEqual([
      '"Bad_Name" is not a valid namespace name (DNS-1123 label)',
      '--watch lists a namespace twice',
      'the install namespace ops is also watched: use knative/base (one namespace) for that, or another install namespace',
    ]);
    expect(optionProblems({ installNamespace: 'ops', watch: [] })).toEqual(['--watch lists no namespace']);
  });

  describe.each(Object.entries(BUILDS))('%s', (dir, want) => {
    const objs = () => builds.get(dir)!;

    it('is one install: namespaced objects share one namespace (per-namespace RBAC and scripts in the watched ones), no duplicates', () => {
      const perWatched = (o: K8sObject) => want.rbac === 'per-namespace' && (o.kind === 'RoleBinding' || o.kind === 'ConfigMap');
      const namespaced = objs().filter((o) => !CLUSTER_SCOPED.includes(o.kind) && !perWatched(o));
      for (const o of objs().filter((x) => CLUSTER_SCOPED.includes(x.kind)))
        expect(o.metadata.namespace, `${id(o)} is cluster-scoped`).toBeUndefined();
      expect(new Set(namespaced.map((o) => o.metadata.namespace))).toEqual(new Set([want.namespace]));
      if (want.rbac === 'per-namespace')
        expect(
          new Set(
            objs()
              .filter(perWatched)
              .map((o) => o.metadata.namespace),
          ),
        ).toEqual(new Set(want.watch));
      const ids = objs().map(id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const ns of ofKind(objs(), 'Namespace')) expect(ns.metadata.name).toBe(want.namespace);
    });

    it('RBAC: no wildcards, no pod writes, no pods/finalizers; every role bound to one of our two identities', () => {
      const roles = objs().filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
      const bindings = objs().filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') as Binding[];
      // Sender authentication adds one ClusterRole and its ClusterRoleBinding (TokenReview is cluster-scoped).
      const tokenReview = want.senderAuth === true ? ['Cluster'] : [];
      expect(sorted(roles.map((r) => r.kind))).toEqual(
        sorted([
          ...(want.rbac === 'per-namespace' ? ['ClusterRole', 'ClusterRole'] : ['Role', 'Role']),
          ...tokenReview.map((k) => `${k}Role`),
        ]),
      );
      expect(sorted(bindings.map((b) => b.kind))).toEqual(
        sorted([
          ...Array<string>(2 * (want.rbac === 'per-namespace' ? want.watch!.length : 1)).fill('RoleBinding'),
          ...tokenReview.map((k) => `${k}RoleBinding`),
        ]),
      );
      for (const r of roles) {
        for (const rule of (r as unknown as { rules?: PolicyRule[] }).rules ?? []) {
          for (const field of [rule.apiGroups ?? [], rule.resources ?? [], rule.verbs]) expect(field, id(r)).not.toContain('*');
          expect(rule.resources, id(r)).not.toContain('pods/finalizers');
          expect(
            (rule.resources ?? []).filter((x) => x.includes('/')),
            `${id(r)}: no subresources`,
          ).toEqual([]);
          if ((rule.resources ?? []).includes('pods')) {
            expect(
              rule.verbs.filter((v) => !['get', 'list', 'watch'].includes(v)),
              `${id(r)}: pod writes`,
            ).toEqual([]);
          }
        }
        expect(r).not.toHaveProperty('aggregationRule');
      }
      const serviceAccounts = ofKind(objs(), 'ServiceAccount');
      expect(sorted(serviceAccounts.map((s) => s.metadata.name))).toEqual(sorted([FN_SA, SOURCE_SA]));
      for (const b of bindings) {
        expect(b.subjects?.length, id(b)).toBe(1);
        const s = b.subjects![0]!;
        expect(s.kind).toBe('ServiceAccount');
        expect([FN_SA, SOURCE_SA]).toContain(s.name);
        expect(s.namespace, `${id(b)}: subject namespace`).toBe(want.namespace);
        expect(b.roleRef.apiGroup).toBe('rbac.authorization.k8s.io');
      }
    });

    it('the function may only get/list pods and get/list/create/patch/delete services, only in the namespaces it watches (and create TokenReviews with sender authentication)', () => {
      expect(permissionsOf(objs(), FN_SA)).toEqual(
        want.senderAuth === true ? { ...FN_PERMISSIONS, tokenreviews: ['create'] } : FN_PERMISSIONS,
      );
      const byNs = permissionsByNamespace(objs(), FN_SA);
      // '' = cluster-wide: only sender authentication's TokenReviews, which are not namespaced.
      expect(sorted(Object.keys(byNs))).toEqual(sorted([...(want.watch ?? [want.namespace]), ...(want.senderAuth === true ? [''] : [])]));
      for (const [ns, grants] of Object.entries(byNs))
        expect(grants, ns).toEqual(ns === '' ? { tokenreviews: ['create'] } : FN_PERMISSIONS);
    });

    it(
      want.senderAuth === true
        ? 'sender authentication: both sources request the audience the function checks'
        : 'sender authentication is off (the default)',
      () => {
        const fn = knativeServices(objs()).find((s) => s.metadata.name === KSVC);
        const env = fn === undefined ? {} : envMap(fn.spec.template.spec.containers[0]!);
        const audiences = [...ofKind(objs(), 'ApiServerSource'), ...ofKind(objs(), 'PingSource')].map(
          (o) => (o as unknown as { spec: { sink: { audience?: string } } }).spec.sink.audience,
        );
        if (want.senderAuth !== true) {
          expect(env['SENDER_AUTH']).toBeUndefined();
          expect(audiences).toEqual([undefined, undefined]);
          return;
        }
        expect(env['SENDER_AUTH']).toBe('tokenreview');
        // Knative's audience format for the sink: <group>/<kind>/<namespace>/<name>, lower case (knative/eventing pkg/auth/audience.go).
        expect(env['SENDER_AUTH_AUDIENCE']).toBe(`serving.knative.dev/service/${want.namespace}/${KSVC}`);
        expect(audiences).toEqual([env['SENDER_AUTH_AUDIENCE'], env['SENDER_AUTH_AUDIENCE']]);
        // The sources' OIDC ServiceAccounts: <source name> + "-oidc-<group>-<kind>" lower case, when that fits in 63 characters (pkg/auth/serviceaccount.go, kmeta.ChildName).
        const oidcUser = (name: string, kind: string) => {
          const sa = `${name}-oidc-sources.knative.dev-${kind}`;
          expect(sa.length).toBeLessThanOrEqual(63);
          return `system:serviceaccount:${want.namespace}:${sa}`;
        };
        const source = ofKind(objs(), 'ApiServerSource')[0]!.metadata.name;
        expect(env['SENDER_AUTH_USERS']?.split(',')).toEqual([oidcUser(source, 'apiserversource'), oidcUser(PING_NAME, 'pingsource')]);
      },
    );

    it('the ApiServerSource may only get/list/watch pods, only in the namespaces it watches', () => {
      expect(permissionsOf(objs(), SOURCE_SA)).toEqual(SOURCE_PERMISSIONS);
      const byNs = permissionsByNamespace(objs(), SOURCE_SA);
      expect(sorted(Object.keys(byNs))).toEqual(sorted(want.watch ?? [want.namespace]));
      for (const grants of Object.values(byNs)) expect(grants).toEqual(SOURCE_PERMISSIONS);
    });

    it('the ApiServerSource watches only Spark driver/executor pods and reaches the function', () => {
      const sources = ofKind(objs(), 'ApiServerSource');
      expect(sources).toHaveLength(1);
      const spec = (
        sources[0] as unknown as {
          spec: {
            mode: string;
            serviceAccountName: string;
            owner?: unknown;
            filters?: unknown;
            namespaceSelector?: Selector;
            resources: { apiVersion: string; kind: string; selector?: Selector }[];
            sink: Destination;
          };
        }
      ).spec;
      expect(spec.mode).toBe(want.mode);
      expect(spec.serviceAccountName).toBe(SOURCE_SA);
      expect(spec.resources).toHaveLength(1);
      const res = spec.resources[0]!;
      expect([res.apiVersion, res.kind]).toEqual(['v1', 'Pod']);
      expect(res.selector).toEqual({ matchExpressions: [{ key: 'spark-role', operator: 'In', values: ['driver', 'executor'] }] });
      const sel = res.selector!;
      expect(selectorMatches(sel, { 'spark-role': 'driver', 'spark-app-selector': 'spark-1' })).toBe(true);
      expect(selectorMatches(sel, { 'spark-role': 'executor' })).toBe(true);
      expect(selectorMatches(sel, { 'spark-role': 'shuffle' })).toBe(false);
      expect(selectorMatches(sel, { app: 'web' })).toBe(false);
      expect(selectorMatches(sel, {})).toBe(false);
      if (want.watch === undefined) {
        expect(spec.namespaceSelector).toBeUndefined();
      } else {
        // Never `{}` (= every namespace): exactly the listed namespaces.
        expect(spec.namespaceSelector).toEqual({
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [...want.watch] }],
        });
      }
      for (const type of INPUT_TYPES[want.mode]) {
        expect(routesToFunction(objs(), spec.sink, { type, kind: 'Pod', source: 'https://10.96.0.1:443' }), `${type} reaches ${KSVC}`).toBe(
          true,
        );
      }
      expect(spec.sink.ref?.kind).toBe(want.delivery === 'direct' ? 'Service' : 'Broker');
    });

    it('the PingSource sends {"action":"sweep"} every five minutes (so that the function can scale to zero in between)', () => {
      const pings = ofKind(objs(), 'PingSource');
      expect(pings).toHaveLength(1);
      const p = pings[0]!;
      expect(p.metadata.name).toBe(PING_NAME);
      const spec = (p as unknown as { spec: { schedule: string; contentType?: string; data?: string; sink: Destination } }).spec;
      expect(spec.schedule).toBe('*/5 * * * *');
      expect(spec.contentType).toBe('application/json');
      expect(JSON.parse(spec.data ?? 'null')).toEqual({ action: 'sweep' });
      const source = `/apis/v1/namespaces/${want.namespace}/pingsources/${PING_NAME}`;
      expect(routesToFunction(objs(), spec.sink, { type: PING_TYPE, source })).toBe(true);
      expect(spec.sink.ref?.kind).toBe(want.delivery === 'direct' ? 'Service' : 'Broker');
    });

    if (want.ksvc)
      it('the Knative Service: scale-to-zero, bounded, probes, non-root, read-only root', () => {
        const services = knativeServices(objs());
        const extra = want.deadLetter ? ['spark-exec-svc-dead-letter'] : [];
        expect(sorted(services.map((s) => s.metadata.name))).toEqual(sorted([KSVC, ...extra]));
        const svc = services.find((s) => s.metadata.name === KSVC)!;
        expect(svc.metadata.labels?.['networking.knative.dev/visibility']).toBe('cluster-local');
        // Knative rejects autoscaling annotations on the Service's own metadata.
        expect(Object.keys(svc.metadata.annotations ?? {}).filter((k) => k.startsWith('autoscaling.knative.dev/'))).toEqual([]);
        const ann = svc.spec.template.metadata?.annotations ?? {};
        expect(ann['autoscaling.knative.dev/min-scale']).toBe('0');
        expect(Number(ann['autoscaling.knative.dev/max-scale'])).toBeGreaterThanOrEqual(1);
        const pod = svc.spec.template.spec;
        expect(pod.serviceAccountName).toBe(FN_SA);
        expect(pod.containerConcurrency).toBeGreaterThan(0);
        // Pod-level securityContext needs the kubernetes.podspec-securitycontext flag.
        expect(pod.securityContext).toBeUndefined();
        expect(pod.containers).toHaveLength(1);
        const c = pod.containers[0]!;
        expect(c.image).toBe(TEST_IMAGE);
        const env = envMap(c);
        for (const name of Object.keys(env)) {
          expect(ENV_CONTRACT.has(name), `env ${name} is part of the contract`).toBe(true);
          expect(KNATIVE_RESERVED_ENV.has(name), `env ${name} is reserved by Knative`).toBe(false);
        }
        expect((c.env ?? []).every((e) => e.valueFrom === undefined)).toBe(true);
        expect(env['OPT_IN_MODE']).toBe('label');
        expect(['debug', 'info', 'warn', 'error']).toContain(env['LOG_LEVEL']);
        for (const n of ['COOLDOWN_SECONDS', 'EVENT_DEADLINE_MS', 'MAX_BODY_BYTES', 'SWEEP_PAGE_SIZE']) expect(env[n], n).toMatch(/^\d+$/);
        expect(pod.timeoutSeconds! * 1000, 'timeoutSeconds covers EVENT_DEADLINE_MS').toBeGreaterThanOrEqual(
          Number(env['EVENT_DEADLINE_MS'] ?? 20000),
        );
        expect(pod.timeoutSeconds! * 1000, 'timeoutSeconds covers SWEEP_DEADLINE_MS').toBeGreaterThanOrEqual(
          Number(env['SWEEP_DEADLINE_MS']),
        );
        // Replies: a direct sink ignores them, a Broker republishes them.
        expect(env['REPLY_MODE']).toBe('none');
        const deadline = Number(env['EVENT_DEADLINE_MS']);
        expect(Number(env['REQUEST_TIMEOUT_MS']), 'one request fits in the event budget').toBeLessThan(deadline);
        if (want.delivery === 'direct') {
          // The ApiServerSource's 1 try + 5 retries (0.1..1.6 s backoff) must stall a namespace ≤ 15 s.
          expect(6 * deadline + 3100, 'worst stall of a namespace behind one failing event').toBeLessThanOrEqual(15_000);
        } else {
          expect(deadline, 'behind a Broker the budget rides out short outages').toBe(10_000);
        }
        expect(pod.timeoutSeconds!).toBeLessThanOrEqual(600);
        if (want.watch === undefined) expect(env['WATCH_NAMESPACES']).toBeUndefined();
        else expect(env['WATCH_NAMESPACES']?.split(',')).toEqual([...want.watch]);
        const containerPort = c.ports?.[0]?.containerPort ?? 8080;
        expect(c.ports ?? [], 'one serving port, http1').toEqual(c.ports === undefined ? [] : [{ containerPort: 8080, name: 'http1' }]);
        expect(c.readinessProbe?.httpGet?.path).toBe('/health/readiness');
        expect(c.livenessProbe?.httpGet?.path).toBe('/health/liveness');
        for (const probe of [c.readinessProbe!, c.livenessProbe!]) {
          expect(probe.httpGet?.port, 'Knative: a probe may only name the serving port').toBe(containerPort);
        }
        expect(c.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
        expect(c.resources?.limits).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
        const sc = c.securityContext!;
        expect(sc.runAsNonRoot).toBe(true);
        expect(sc.runAsUser).toBe(65532);
        expect(sc.allowPrivilegeEscalation).toBe(false);
        expect(sc.readOnlyRootFilesystem).toBe(true);
        expect(sc.privileged).not.toBe(true);
        expect(sc.capabilities).toEqual({ drop: ['ALL'] });
        expect(sc.seccompProfile).toEqual({ type: 'RuntimeDefault' });
      });

    if (!want.ksvc)
      it('leaves the Knative Service to `func deploy`', () => {
        expect(knativeServices(objs())).toEqual([]);
      });

    if (want.delivery === 'broker')
      it('Triggers: only input types reach the function, replies do not loop, retries are set', () => {
        const triggers = ofKind<TriggerObj>(objs(), 'Trigger');
        expect(triggers.length).toBeGreaterThan(0);
        const brokerNames = ofKind(objs(), 'Broker').map((b) => b.metadata.name);
        const ns = want.namespace;
        for (const t of triggers) {
          expect(brokerNames).toContain(t.spec.broker);
          expect(t.spec.subscriber.ref).toEqual({ apiVersion: 'serving.knative.dev/v1', kind: 'Service', name: KSVC });
          expect(t.spec.filter, `${id(t)}: uses the filters field`).toBeUndefined();
          expect(t.spec.filters?.length, id(t)).toBeGreaterThan(0);
          expect(t.spec.delivery).toMatchObject({ retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT0.5S' });
          if (want.deadLetter) {
            const dls = t.spec.delivery?.deadLetterSink?.ref;
            expect(dls, `${id(t)}: deadLetterSink`).toBeDefined();
            expect(
              objs().some((o) => o.apiVersion === dls!.apiVersion && o.kind === dls!.kind && o.metadata.name === dls!.name),
              'dead-letter sink is part of the install',
            ).toBe(true);
          } else {
            expect(t.spec.delivery?.deadLetterSink).toBeUndefined();
          }
          // The function's replies go back into the Broker: no Trigger may take them.
          for (const type of OUTPUT_TYPES)
            expect(triggerMatches(t, { type, source: REPLY_SOURCE, kind: 'Pod' }), `${id(t)} vs ${type}`).toBe(false);
          // Another PingSource in the namespace must not trigger sweeps.
          expect(triggerMatches(t, { type: PING_TYPE, source: `/apis/v1/namespaces/${ns}/pingsources/someone-else` })).toBe(false);
          // Other kinds from another ApiServerSource are not ours.
          expect(triggerMatches(t, { type: INPUT_TYPES.Resource[0], kind: 'Deployment', source: 'https://10.96.0.1:443' })).toBe(false);
        }
        // Both modes' types are routed, so the broker overlay also works with Reference mode.
        for (const type of [...INPUT_TYPES.Resource, ...INPUT_TYPES.Reference]) {
          expect(
            triggers.some((t) => triggerMatches(t, { type, kind: 'Pod', source: 'https://10.96.0.1:443' })),
            type,
          ).toBe(true);
        }
      });

    if (want.deadLetter)
      it('the dead-letter sink is a small non-root, cluster-local Knative Service', () => {
        const dls = knativeServices(objs()).filter((s) => s.metadata.name !== KSVC);
        expect(dls).toHaveLength(1);
        const s = dls[0]!;
        expect(s.metadata.labels?.['networking.knative.dev/visibility']).toBe('cluster-local');
        expect(s.spec.template.metadata?.annotations?.['autoscaling.knative.dev/min-scale']).toBe('0');
        const sc = s.spec.template.spec.containers[0]!.securityContext!;
        expect([sc.runAsNonRoot, sc.allowPrivilegeEscalation, sc.readOnlyRootFilesystem]).toEqual([true, false, true]);
      });
  });
});
