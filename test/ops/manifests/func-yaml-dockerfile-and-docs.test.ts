/**
 * The function's other deploy artefacts: func.yaml against its schema, the Dockerfile and
 * .dockerignore, and docs/deploy.md's commands against the builds.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { JSON_SCHEMA, load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import {
  ROOT,
  KSVC,
  FN_SA,
  DEFAULT_NAMESPACE,
  FUNC_YAML,
  ENV_CONTRACT,
  BUILDS,
  SKIP_KUBECTL,
  kustomize,
  knativeServices,
  envMap,
  type Schema,
  funcYamlValidator,
  builds,
} from './support.ts';
// ===========================================================================
describe(FUNC_YAML, () => {
  const text = readFileSync(path.join(ROOT, FUNC_YAML), 'utf8');
  // JSON schema: timestamps stay strings, as func's YAML decoder sees them.
  const f = load(text, { schema: JSON_SCHEMA }) as {
    specVersion: string;
    name: string;
    runtime: string;
    namespace: string;
    invoke: string;
    deployer?: string;
    run: { envs: { name: string; value: string }[] };
    deploy: {
      annotations?: Record<string, string>;
      labels?: { key: string; value: string }[];
      serviceAccountName: string;
      healthEndpoints: { liveness: string; readiness: string };
      options: {
        scale: { min: number; max: number };
        resources: { requests: Record<string, string>; limits: Record<string, string | number> };
      };
    };
  };

  it('conforms to knative/func schema/func_yaml-schema.json (no unknown keys)', () => {
    const validate = funcYamlValidator(JSON.parse(readFileSync(path.join(ROOT, 'test/fixtures/func_yaml-schema.json'), 'utf8')) as Schema);
    expect(validate(f)).toEqual([]);
    // The validator itself rejects what the schema forbids.
    const bad = validate({ ...f, deploy: { ...f.deploy, healthEndpoint: {} }, invoke: 'grpc' });
    expect(bad).toEqual(
      expect.arrayContaining([
        expect.stringContaining('(healthEndpoint)'),
        expect.stringMatching(/\/invoke: must be equal to one of the allowed values/),
      ]),
    );
  });

  it('describes the same function as the kustomize base', () => {
    expect(f.specVersion).toBe('0.36.0'); // latest migration in knative/func pkg/functions/function_migrations.go
    expect(f.name).toBe(KSVC);
    expect(f.runtime).toBe('typescript');
    expect(f.invoke).toBe('cloudevent');
    expect(f.namespace).toBe(DEFAULT_NAMESPACE);
    expect(f.deployer ?? 'knative').toBe('knative');
    expect(f.deploy.serviceAccountName).toBe(FN_SA);
    expect(f.deploy.healthEndpoints).toEqual({ liveness: '/health/liveness', readiness: '/health/readiness' });
    expect(f.deploy.options.scale.min).toBe(0);
    expect(f.deploy.labels).toContainEqual({ key: 'networking.knative.dev/visibility', value: 'cluster-local' });
    // func copies deploy.annotations onto the Service's own metadata, where Knative rejects autoscaling keys.
    expect(Object.keys(f.deploy.annotations ?? {}).filter((k) => k.startsWith('autoscaling.knative.dev/'))).toEqual([]);
    for (const e of f.run.envs) {
      expect(ENV_CONTRACT.has(e.name), e.name).toBe(true);
      expect(e.value, `${e.name}: no {{ }} templates needed`).not.toMatch(/\{\{/);
    }
  });

  it.skipIf(SKIP_KUBECTL)('matches knative/base/service.yaml (scale, resources, concurrency, env)', async () => {
    const base = builds.get('knative/base') ?? (await kustomize('knative/base'));
    const svc = knativeServices(base)[0]!;
    const pod = svc.spec.template.spec;
    const c = pod.containers[0]!;
    expect(String(f.deploy.options.scale.max)).toBe(svc.spec.template.metadata?.annotations?.['autoscaling.knative.dev/max-scale']);
    expect(f.deploy.options.resources.requests).toEqual(c.resources?.requests);
    const { concurrency, ...limits } = f.deploy.options.resources.limits;
    expect(limits).toEqual(c.resources?.limits);
    expect(concurrency).toBe(pod.containerConcurrency);
    expect(Object.fromEntries(f.run.envs.map((e) => [e.name, e.value]))).toEqual(envMap(c));
    expect(f.deploy.serviceAccountName).toBe(pod.serviceAccountName);
  });
});

// ===========================================================================
describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const instructions = dockerfile
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages = instructions.filter((l) => /^FROM\s/i.test(l));
  const lastStage = instructions.slice(instructions.lastIndexOf(stages.at(-1)!));

  it('bundles with npm ci + npm run bundle on Node 22 and ships only the bundle', () => {
    expect(instructions).toContain('ARG NODE_IMAGE=node:22-slim');
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(instructions.some((l) => /^RUN npm ci\b/.test(l))).toBe(true);
    expect(instructions).toContain('RUN npm run bundle');
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['bundle']).toBe('node scripts/bundle.ts dist');
    // The final stage carries no node_modules and nothing of the build but the bundle and its loader,
    // and makes the bundle's code cache with its own node (test/bundle.test.ts runs the same step).
    expect(lastStage.filter((l) => /node_modules/.test(l))).toEqual([]);
    expect(lastStage.filter((l) => /^COPY/.test(l))).toEqual(['COPY --from=build /app/dist/main.cjs /app/dist/start.cjs ./']);
    expect(lastStage).toContain('RUN ["/nodejs/bin/node", "start.cjs", "--write-code-cache"]');
  });

  it('runs non-root as 65532 with the bundled entry point', () => {
    expect(lastStage.filter((l) => /^USER\s/.test(l)).at(-1)).toBe('USER 65532:65532');
    expect(lastStage.slice(-2)).toEqual(['ENTRYPOINT ["/nodejs/bin/node"]', 'CMD ["start.cjs"]']);
  });

  it('the runtime stage is distroless Node 22 (no npm, no shell): every RUN is exec-form, with OCI labels', () => {
    expect(instructions).toContain('ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian12:nonroot');
    expect(stages.at(-1)).toBe('FROM ${RUNTIME_IMAGE}');
    // Without a shell a shell-form RUN cannot work: each must be a JSON array.
    for (const l of lastStage.filter((x) => /^RUN\s/.test(x))) expect(l, l).toMatch(/^RUN \[/);
    const labels = dockerfile.match(/^LABEL[\s\S]*?(?=^\S)/m)?.[0] ?? '';
    for (const key of ['title', 'description', 'licenses', 'version', 'revision'])
      expect(labels, key).toContain(`org.opencontainers.image.${key}=`);
    expect(labels).toContain('org.opencontainers.image.licenses="Apache-2.0"');
    // The release script pins both bases by digest (test/ops/install-story.test.ts runs it).
    const release = readFileSync(path.join(ROOT, 'scripts/release.sh'), 'utf8');
    for (const arg of ['NODE_IMAGE', 'RUNTIME_IMAGE']) expect(release, arg).toContain(`--build-arg "${arg}=`);
  });

  it('.dockerignore sends only what the build needs', () => {
    const lines = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(lines[0]).toBe('*');
    expect(lines).toEqual(expect.arrayContaining(['!package.json', '!package-lock.json', '!tsconfig.json', '!shared/', '!functions/']));
    const copied = instructions.filter((l) => /^COPY (?!--from)/.test(l)).flatMap((l) => l.split(/\s+/).slice(1, -1));
    for (const source of copied)
      expect(lines, `the build copies ${source}`).toContain(`!${source.replace(/^\.\//, '')}${source.includes('.') ? '' : '/'}`);
  });
});

// ===========================================================================
describe('docs/deploy.md', () => {
  it('mentions every overlay', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/deploy.md'), 'utf8');
    for (const dir of Object.keys(BUILDS).filter((d) => d.startsWith('knative/overlays/'))) expect(doc, dir).toContain(dir);
  });
});
