/**
 * The install story as a user follows it (README → docs/deploy.md → docs/executor-recipe.md), and
 * the values the docs and comments quote, compared with what ships: knative/ manifests, spark/,
 * shared/config.ts. A doc that drifts from the code fails here.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/ops/config.ts';
import { newMetrics } from '../../shared/ops/metrics.ts';
import { PANELS, dashboardJson } from '../../scripts/grafana-dashboard.ts';
import { REPO_ROOT as ROOT, TEST_IMAGE, configuredTree, kustomizeObjects, requireKubectl, skipWithoutKubectl } from './kustomize.ts';
import { type CommandResult, runCommand } from '../../testkit/process.ts';

const SKIP_KUBECTL = skipWithoutKubectl('install-story.test', 'the rendered install story and release script checks');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const README = read('README.md');
const DEPLOY = read('docs/deploy.md');
const RECIPE = read('docs/executor-recipe.md');
const SERVICE_YAML = read('knative/base/service.yaml');
const INSTALL_NAMESPACE = 'spark';

interface Container {
  command: string[];
  env: { name: string; value?: string }[];
  resources: { requests: Record<string, string>; limits: Record<string, string> };
}
interface PodSpecLike {
  containers: Container[];
  volumes: { name: string; configMap: Record<string, unknown> }[];
}
const KSVC = load(SERVICE_YAML) as { spec: { template: { spec: PodSpecLike & { timeoutSeconds: number } } } };
const FN = KSVC.spec.template.spec.containers[0]!;
const FN_ENV = Object.fromEntries(FN.env.map((e) => [e.name, e.value ?? '']));
const TEMPLATE = load(read('spark/executor-pod-template.yaml')) as { spec: PodSpecLike };

const run = (command: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<CommandResult> =>
  runCommand(command, args, { cwd: opts.cwd ?? ROOT, ...(opts.env === undefined ? {} : { env: opts.env }) });

/** Fenced code blocks of a markdown text, with their info string. */
function codeBlocks(markdown: string): { lang: string; body: string }[] {
  return [...markdown.matchAll(/^( *)```(\w*)\n([\s\S]*?)^\1```$/gm)].map((m) => {
    const indent = m[1]!.length;
    return {
      lang: m[2] ?? '',
      body: (m[3] ?? '')
        .split('\n')
        .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
        .join('\n'),
    };
  });
}
/** A markdown section: from its heading to the next heading of the same or a higher level (fenced code skipped). */
function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`no section ${heading}`);
  const level = heading.match(/^#+/)![0].length;
  let fenced = false;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = fenced ? null : line.match(/^(#+) /);
    if (m !== null && m[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return lines.slice(start + 1, end).join('\n');
}

describe('one namespace throughout the install story', () => {
  const outsideAnotherNamespace = DEPLOY.replace(section(DEPLOY, '## Another namespace'), '');

  it('every namespace a command or manifest names is the one the default install watches', () => {
    const named: string[] = [];
    for (const [file, text] of [
      ['README.md', README],
      ['docs/deploy.md', outsideAnotherNamespace],
      ['docs/executor-recipe.md', RECIPE],
    ] as const) {
      for (const block of codeBlocks(text)) {
        for (const m of block.body.matchAll(
          /(?:kubectl\s+(?:-n|--namespace)[ =]|spark\.kubernetes\.namespace[=:]\s*|^\s*namespace:\s*|^NS=)("?[-a-zA-Z0-9{}$]+"?)/gm,
        ))
          named.push(`${file}: ${m[1]!.replaceAll('"', '')}`);
      }
    }
    expect(named.length).toBeGreaterThan(10);
    // knative-eventing is Knative's own namespace (its config-features, for sender authentication), never an install's.
    const others = named.filter((n) => !n.endsWith(`: ${INSTALL_NAMESPACE}`) && !n.endsWith(': $NS') && !n.endsWith(': knative-eventing'));
    expect(others).toEqual([]);
    expect(`${README}${DEPLOY}${RECIPE}`).not.toContain('spark-jobs');
  });

  it('the default install is in that namespace, and watches it', async () => {
    const base = load(read('knative/base/kustomization.yaml')) as { namespace: string };
    expect(base.namespace).toBe(INSTALL_NAMESPACE);
    expect(FN_ENV['WATCH_NAMESPACES']).toBeUndefined(); // = its own namespace
  });

  it.skipIf(SKIP_KUBECTL)(
    'docs/deploy.md\'s "another namespace" kustomization builds, and moves everything including the executor scripts',
    async () => {
      const tree = configuredTree();
      try {
        const example = codeBlocks(section(DEPLOY, '## Another namespace')).find((b) =>
          b.body.startsWith('# my-install/kustomization.yaml'),
        )!;
        const wanted = (load(example.body) as { namespace: string }).namespace;
        // The doc's layout: my-install/ next to the repository's checkout (spark-exec-svc/).
        cpSync(tree, path.join(tree, '..', `${path.basename(tree)}-checkout`, 'spark-exec-svc'), { recursive: true });
        const checkout = path.join(tree, '..', `${path.basename(tree)}-checkout`);
        mkdirSync(path.join(checkout, 'my-install'), { recursive: true });
        writeFileSync(path.join(checkout, 'my-install/kustomization.yaml'), example.body);
        try {
          const objs = await kustomizeObjects<{ kind: string; metadata: { name: string; namespace?: string } }>(
            requireKubectl(),
            'my-install',
            checkout,
          );
          for (const o of objs.filter((x) => x.kind !== 'ClusterRole'))
            expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(wanted);
          expect(objs.some((o) => o.kind === 'ConfigMap' && o.metadata.name === 'spark-exec-svc-scripts')).toBe(true);
        } finally {
          rmSync(checkout, { recursive: true, force: true });
        }
      } finally {
        rmSync(tree, { recursive: true, force: true });
      }
    },
  );
});

describe('the executor pod template and the recipe', () => {
  const volume = TEMPLATE.spec.volumes.find((v) => v.configMap['name'] === 'spark-exec-svc-scripts')!;
  const command = TEMPLATE.spec.containers[0]!.command;
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sxs-template-'));
    // A stand-in for Spark's entrypoint and for the wrapper: each prints who ran, with its args.
    writeFileSync(path.join(dir, 'entrypoint.sh'), '#!/bin/sh\necho "stock-spark $*"\n', { mode: 0o755 });
    mkdirSync(path.join(dir, 'mounted'));
    writeFileSync(path.join(dir, 'mounted/executor-entrypoint.sh'), 'echo "wrapper $*"\n');
    mkdirSync(path.join(dir, 'empty'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('mounts the ConfigMap optional: a missing ConfigMap cannot leave the executor in ContainerCreating', () => {
    expect(volume.configMap['optional']).toBe(true);
  });

  it("runs the wrapper with Spark's args when the ConfigMap is mounted", async () => {
    // Spark appends `args: [executor]` to the template's container.
    const r = await run(command[0]!, [...command.slice(1), 'executor'], {
      env: { SPARK_EXEC_SVC_HOME: path.join(dir, 'mounted'), SPARK_EXEC_SVC_ENTRYPOINT: path.join(dir, 'entrypoint.sh') },
    });
    expect(r).toMatchObject({ code: 0, stdout: 'wrapper executor\n', stderr: '' });
  });

  it('starts stock Spark, and says why, when the ConfigMap is missing (the volume is then an empty directory)', async () => {
    const r = await run(command[0]!, [...command.slice(1), 'executor'], {
      env: { SPARK_EXEC_SVC_HOME: path.join(dir, 'empty'), SPARK_EXEC_SVC_ENTRYPOINT: path.join(dir, 'entrypoint.sh') },
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('stock-spark executor\n');
    expect(r.stderr).toMatch(
      /^spark-exec-svc: .*executor-entrypoint\.sh not found \(no ConfigMap spark-exec-svc-scripts in this namespace\): starting stock Spark/,
    );
  });

  it("both operator examples in the recipe carry the template's command and volume exactly", () => {
    const examples = codeBlocks(RECIPE).filter((b) => b.lang === 'yaml' && b.body.includes('kind: SparkApplication'));
    expect(examples).toHaveLength(2);
    for (const ex of examples) {
      const app = load(ex.body) as {
        spec: { executor?: { template: { spec: PodSpecLike } }; executorSpec?: { podTemplateSpec: { spec: PodSpecLike } } };
      };
      const spec = app.spec.executor?.template.spec ?? app.spec.executorSpec!.podTemplateSpec.spec;
      expect(spec.containers[0]!.command).toEqual(command);
      expect(spec.volumes).toEqual(TEMPLATE.spec.volumes);
    }
  });

  it("the recipe's environment table names every SPARK_EXEC_SVC_* variable the scripts and the template use", () => {
    const used = new Set<string>();
    for (const f of readdirSync(path.join(ROOT, 'spark')))
      for (const m of read(`spark/${f}`).matchAll(/SPARK_EXEC_SVC_[A-Z_]+/g)) used.add(m[0]);
    const documented = section(RECIPE, '## Environment variables');
    for (const v of used) expect(documented, v).toContain(`\`${v}\``);
    // The defaults it quotes are the template's.
    const templateEnv = Object.fromEntries(
      TEMPLATE.spec.containers[0]!.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
    );
    for (const [name, value] of Object.entries(templateEnv)) {
      const row = documented.split('\n').find((l) => l.startsWith(`| \`${name}\` |`));
      expect(row, name).toBeDefined();
      expect(row, name).toContain(value);
    }
  });
});

describe('values the docs and comments quote = what ships', () => {
  it("README's configuration table gives shared/config.ts's defaults", () => {
    const table = section(README, '## Configuration (environment of the function)');
    const rows = Object.fromEntries([...table.matchAll(/^\| `([A-Z_]+)` \| ([^|]+) \|/gm)].map((m) => [m[1]!, m[2]!.trim()]));
    const defaults = loadConfig({}, () => 'own-namespace');
    const expected: Record<string, string> = {
      OPT_IN_MODE: `\`${defaults.optInMode}\``,
      COOLDOWN_SECONDS: `\`${defaults.cooldownSeconds}\``,
      EVENT_DEADLINE_MS: `\`${defaults.eventDeadlineMs}\``,
      REQUEST_TIMEOUT_MS: `\`${defaults.requestTimeoutMs}\``,
      SWEEP_DEADLINE_MS: `\`${defaults.sweepDeadlineMs}\``,
      REPLY_MODE: `\`${defaults.replyMode}\``,
      MAX_BODY_BYTES: `\`${defaults.maxBodyBytes}\``,
      SWEEP_PAGE_SIZE: `\`${defaults.sweepPageSize}\``,
      MAX_SERVICES_PER_NAMESPACE: `\`${defaults.maxServicesPerNamespace}\``,
      MAX_SERVICES_RECOUNT_MARGIN: `\`${defaults.maxServicesRecountMargin}\``,
      LOG_LEVEL: `\`${defaults.logLevel}\``,
      PORT: `\`${defaults.port}\``,
    };
    for (const [name, value] of Object.entries(expected)) expect(rows[name], name).toBe(value);
    expect(defaults.defaultBlockManagerPort).toBeUndefined();
    expect(rows['BLOCK_MANAGER_PORT']).toBe('unset');
    // The default of MAX_SERVICES_PER_APPLICATION follows the namespace's cap.
    expect(defaults.maxServicesPerApplication).toBe(defaults.maxServicesPerNamespace / 2);
    expect(rows['MAX_SERVICES_PER_APPLICATION']).toBe('half of `MAX_SERVICES_PER_NAMESPACE`');
    expect(Object.keys(rows).sort()).toEqual(
      [...Object.keys(expected), 'BLOCK_MANAGER_PORT', 'WATCH_NAMESPACES', 'MAX_SERVICES_PER_APPLICATION'].sort(),
    );
  });

  it("docs/deploy.md quotes the base's env, resources and schedule", () => {
    for (const [name, value] of Object.entries(FN_ENV)) expect(DEPLOY, name).toContain(`\`${name}=${value}\``);
    const { requests, limits } = FN.resources;
    expect(DEPLOY).toContain(`${requests['cpu']}/${requests['memory']} requests, ${limits['cpu']}/${limits['memory']} limits`);
    const ping = load(read('knative/base/pingsource.yaml')) as { spec: { schedule: string } };
    expect(ping.spec.schedule).toBe('*/5 * * * *');
    expect(DEPLOY).toContain('`*/5 * * * *`');
    expect(DEPLOY).toContain('every five minutes');
    expect(README).toContain('PingSource (every 5 min)');
  });

  it("docs/performance.md's memory section names the request the base sets", () => {
    const memory = section(read('docs/performance.md'), '### 5. Memory');
    expect(memory).toContain(`\`requests.memory: ${FN.resources.requests['memory']}\``);
    expect(memory).toContain(`\`limits.memory: ${FN.resources.limits['memory']}\``);
  });

  it('no stale value is quoted anywhere: the 20 s event deadline, an every-minute sweep, a read container port', () => {
    const shipped = [
      'README.md',
      'docs/deploy.md',
      'docs/reliability.md',
      'docs/executor-recipe.md',
      'functions/executor-service/func.yaml',
      ...readdirSync(path.join(ROOT, 'knative'), { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile() && e.name.endsWith('.yaml'))
        .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name))),
    ];
    for (const f of shipped) {
      const text = read(f);
      expect(text, f).not.toMatch(/EVENT_DEADLINE_MS[^\n]{0,40}\b20 ?s\b|EVENT_DEADLINE_MS=20000|the default is 20 s/);
      expect(text, f).not.toMatch(/every-minute|every minute sweep/);
      expect(text, f).not.toMatch(/else a declared container port|or a declared container port/);
    }
    expect(Number(FN_ENV['EVENT_DEADLINE_MS'])).toBe(loadConfig({}, () => 'x').eventDeadlineMs);
    expect(SERVICE_YAML).toContain(`EVENT_DEADLINE_MS, ${Number(FN_ENV['EVENT_DEADLINE_MS']) / 1000} s`);
    expect(SERVICE_YAML).toContain(`SWEEP_DEADLINE_MS, ${Number(FN_ENV['SWEEP_DEADLINE_MS']) / 1000} s`);
  });

  it('README lists every overlay', () => {
    const overlays = readdirSync(path.join(ROOT, 'knative/overlays'));
    const list = section(README, '## Install, verify, uninstall');
    for (const o of overlays) expect(list, o).toContain(`\`${o}\``);
  });

  it("README's and docs/deploy.md's uninstall never delete our Services by label", () => {
    for (const [f, text] of [
      ['README.md', README],
      ['docs/deploy.md', DEPLOY],
    ] as const) {
      for (const block of codeBlocks(text)) expect(block.body, f).not.toMatch(/delete\s+(svc|services?)\b[^\n]*managed-by=spark-exec-svc/);
      expect(text, f).toContain('scripts/delete-leftover-services.sh');
    }
  });
});

describe('npm start', () => {
  it("reports a deleted driver's Services as collected, as README's table says", async () => {
    expect(README).toMatch(/\| driver deleted \| [^|]*`collected`/);
    const r = await run(process.execPath, ['demo/replay.ts']);
    expect(r.code, r.stderr).toBe(0);
    const driverDelete = r.stdout.split('\n').find((l) => /^\s+delete\s+\S+-driver\s+->/.test(l));
    expect(driverDelete).toMatch(/-> spark-exec-svc\.service\.collected(\s|$)/);
    expect(r.stdout).toContain('(no Services of ours left)');
    // Readable at 100 columns (issue 20), on stdout and stderr alike.
    for (const line of `${r.stdout}\n${r.stderr}`.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
  }, 120_000);
});

describe('scripts/release.sh, up to the image build (no container engine here)', () => {
  let tree = '';
  beforeAll(() => {
    tree = mkdtempSync(path.join(os.tmpdir(), 'sxs-release-'));
    for (const f of ['knative', 'spark', 'scripts', 'CHANGELOG.md', 'Dockerfile'])
      cpSync(path.join(ROOT, f), path.join(tree, f), { recursive: true });
    // A stand-in for `docker buildx build`: records its arguments and writes the metadata file
    // as buildx does after a push.
    writeFileSync(
      path.join(tree, 'docker'),
      [
        '#!/bin/sh',
        `if [ "$1 $2" = "buildx imagetools" ]; then printf 'Name:      %s\\nMediaType: application/vnd.oci.image.index.v1+json\\nDigest:    sha256:${'cd'.repeat(32)}\\n' "$4"; exit 0; fi`,
        'printf "%s\\n" "$@" > "$(dirname "$0")/docker-args"',
        'while [ $# -gt 0 ]; do [ "$1" = --metadata-file ] && meta=$2; shift; done',
        `printf '{\\n  "buildx.build.ref": "x",\\n  "containerimage.digest": "sha256:${'ab'.repeat(32)}",\\n  "image.name": "r"\\n}\\n' > "$meta"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
  });
  afterAll(() => rmSync(tree, { recursive: true, force: true }));

  it.skipIf(SKIP_KUBECTL)(
    'builds for amd64 and arm64 with OCI labels, pushes, pins image.env by digest and writes the install manifest',
    async () => {
      const version = '0.1.0';
      const r = await run('sh', ['scripts/release.sh', 'registry.example.com/team/spark-exec-svc', version], {
        cwd: tree,
        env: { DOCKER: path.join(tree, 'docker'), KUBECTL: requireKubectl() },
      });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const args = readFileSync(path.join(tree, 'docker-args'), 'utf8').split('\n');
      expect(args.slice(0, 2)).toEqual(['buildx', 'build']);
      expect(args).toEqual(
        expect.arrayContaining([
          '--platform',
          'linux/amd64,linux/arm64',
          '--push',
          '--tag',
          `registry.example.com/team/spark-exec-svc:${version}`,
          `org.opencontainers.image.version=${version}`,
          'org.opencontainers.image.licenses=Apache-2.0',
          `NODE_IMAGE=node:22-slim@sha256:${'cd'.repeat(32)}`,
          `RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian12:nonroot@sha256:${'cd'.repeat(32)}`,
        ]),
      );
      const image = `registry.example.com/team/spark-exec-svc@sha256:${'ab'.repeat(32)}`;
      expect(readFileSync(path.join(tree, 'knative/base/image.env'), 'utf8')).toMatch(
        new RegExp(`^IMAGE=${image.replace(/[.]/g, '\\.')}$`, 'm'),
      );
      const manifest = readFileSync(path.join(tree, `dist/install-${version}.yaml`), 'utf8');
      expect(manifest).toContain(`image: ${image}`);
      expect(manifest).toContain('name: spark-exec-svc-scripts');
    },
  );

  it('refuses what it cannot release, before building anything', async () => {
    const env = { DOCKER: path.join(tree, 'docker'), KUBECTL: SKIP_KUBECTL ? 'kubectl' : requireKubectl() };
    rmSync(path.join(tree, 'docker-args'), { force: true });
    expect((await run('sh', ['scripts/release.sh', 'registry.example.com/x', 'v1'], { cwd: tree, env })).code).toBe(2);
    expect((await run('sh', ['scripts/release.sh', 'registry.example.com/x:1.0', '1.0.0'], { cwd: tree, env })).code).toBe(2);
    const noNotes = await run('sh', ['scripts/release.sh', 'registry.example.com/x', '9.9.9'], { cwd: tree, env });
    expect(noNotes.code).toBe(1);
    expect(noNotes.stderr).toContain("CHANGELOG.md has no '## [9.9.9]' section");
    expect(existsSync(path.join(tree, 'docker-args'))).toBe(false);
  });

  it("the committed image.env sets no image (TEST_IMAGE is the tests' own)", () => {
    expect(read('knative/base/image.env')).not.toMatch(/^\s*IMAGE=/m);
    expect(TEST_IMAGE).toMatch(/@sha256:[0-9a-f]{64}$/);
  });
});

describe('the Grafana dashboard (knative/overlays/monitoring/grafana-dashboard.json)', () => {
  it('is what scripts/grafana-dashboard.ts writes (no hand edits)', () => {
    expect(read('knative/overlays/monitoring/grafana-dashboard.json')).toBe(dashboardJson());
  });

  it('reads only series the function serves (a renamed metric fails here)', () => {
    const exported = new Set<string>();
    for (const metric of newMetrics({ processMetrics: true }).registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      exported.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name}${suffix}`);
    }
    const read = PANELS.flatMap((p) => p.targets).flatMap((t) =>
      [...t.expr.matchAll(/\b(spark_exec_svc_[a-z0-9_]+|process_[a-z0-9_]+)\b/g)].map((m) => m[1]!),
    );
    expect(read.length).toBeGreaterThan(PANELS.length);
    expect([...new Set(read)].filter((n) => !exported.has(n))).toEqual([]);
    // Every metric family of ours is on some panel, except the sweep's timestamps (the alert's) and the cache's entry count and evictions.
    const shown = new Set(read.map((n) => n.replace(/_(bucket|sum|count)$/, '')));
    const ours = [...exported].filter((n) => n.startsWith('spark_exec_svc_') && !/_(bucket|sum|count)$/.test(n));
    expect(ours.filter((n) => !shown.has(n)).sort()).toEqual([
      'spark_exec_svc_fact_cache_entries',
      'spark_exec_svc_fact_cache_evictions_total',
      'spark_exec_svc_sweep_last_clean_run_timestamp_seconds',
      'spark_exec_svc_sweep_last_repairing_run_timestamp_seconds',
    ]);
  });
});
