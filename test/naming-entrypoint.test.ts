// The executor wrapper (spark/executor-entrypoint.sh) and its java shim (spark/java-shim.sh),
// run the way the pod template runs them: scripts laid out as the ConfigMap volume mounts them,
// a fake Spark entrypoint that starts ${JAVA_HOME}/bin/java with the executor backend's args
// exactly like Spark's entrypoint.sh does, a fake `java` that prints what it got, and a fake
// `getent` whose answers the test controls. Also checks the pod template and that
// `kubectl kustomize spark/` builds the ConfigMap offline.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml, loadYaml } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { executorServiceName } from '../shared/naming.ts';

const SPARK_DIR = join(import.meta.dirname, '..', 'spark');
const root = mkdtempSync(join(tmpdir(), 'exec-svc-entrypoint-'));
const home = join(root, 'opt', 'spark-exec-svc'); // the ConfigMap mount
const jdk = join(root, 'jdk'); // the image's real JAVA_HOME
const fakeBin = join(root, 'bin'); // fake getent
const dnsDir = join(root, 'dns'); // a file named after a host makes it resolve
const entrypoint = join(root, 'entrypoint.sh');

function writeExecutable(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

mkdirSync(join(home, 'jvm', 'bin'), { recursive: true });
mkdirSync(join(jdk, 'bin'), { recursive: true });
mkdirSync(fakeBin, { recursive: true });
mkdirSync(dnsDir, { recursive: true });
copyFileSync(join(SPARK_DIR, 'executor-entrypoint.sh'), join(home, 'executor-entrypoint.sh'));
copyFileSync(join(SPARK_DIR, 'exec-svc-name.sh'), join(home, 'exec-svc-name.sh'));
copyFileSync(join(SPARK_DIR, 'java-shim.sh'), join(home, 'jvm', 'bin', 'java'));
for (const f of ['executor-entrypoint.sh', 'exec-svc-name.sh', join('jvm', 'bin', 'java')]) chmodSync(join(home, f), 0o755);

writeExecutable(
  join(jdk, 'bin', 'java'),
  `#!/bin/sh
printf 'JAVA_HOME=%s\\n' "\${JAVA_HOME-<unset>}"
for a do printf 'ARG %s\\n' "$a"; done
`,
);
// the executor branch of Spark's entrypoint.sh (spark-docker 3.5/4.x: quoted; Spark 3.3/3.4: same args)
writeExecutable(
  entrypoint,
  `#!/bin/sh
printf 'ENTRYPOINT'; for a do printf ' %s' "$a"; done; printf '\\n'
case "$1" in
  executor)
    shift 1
    exec "\${JAVA_HOME}/bin/java" -Dspark.blockManager.port=7079 -Xms1g -Xmx1g -cp "/opt/spark/jars/*" \\
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \\
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores 1 \\
      --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \\
      --resourceProfileId 0 --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  driver)
    printf 'DRIVER JAVA_HOME=%s\\n' "$JAVA_HOME"
    ;;
  *)
    exec "$@"
    ;;
esac
`,
);
writeExecutable(
  join(fakeBin, 'getent'),
  `#!/bin/sh
[ "$1" = hosts ] && [ -e "$FAKE_DNS_DIR/$2" ] && { printf '10.96.0.42      %s\\n' "$2"; exit 0; }
exit 2
`,
);

afterAll(() => rmSync(root, { recursive: true, force: true }));

const APP = 'spark-0123456789abcdef0123456789abcdef';
const POD_IP = '10.244.1.7';

function baseEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: `${fakeBin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: root,
    JAVA_HOME: jdk,
    FAKE_DNS_DIR: dnsDir,
    SPARK_EXEC_SVC_ENTRYPOINT: entrypoint,
    SPARK_EXEC_SVC_HOME: home,
    SPARK_EXEC_SVC_WAIT_INTERVAL: '0.1',
    SPARK_APPLICATION_ID: APP,
    SPARK_EXECUTOR_ID: '7',
    SPARK_EXECUTOR_POD_IP: POD_IP,
    SPARK_EXECUTOR_POD_NAME: 'app-exec-7',
    SPARK_EXECUTOR_NAMESPACE: 'jobs',
    SPARK_DRIVER_URL: 'spark://CoarseGrainedScheduler@driver-svc.jobs.svc:7078',
    // what BasicExecutorFeatureStep sets for --conf spark.blockManager.port=7079
    SPARK_JAVA_OPT_0: '-Dspark.driver.port=7078',
    SPARK_JAVA_OPT_1: '-Dspark.blockManager.port=7079',
  };
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  args: string[];
  javaHome: string | undefined;
}

const busyboxAvailable = spawnSync('busybox', ['true'], { stdio: 'ignore' }).status === 0;
// each shell gets its own namespace, so the hosts (and the fake DNS) of concurrent tests never overlap
const shells: { name: string; cmd: string[]; ns: string }[] = [
  { name: 'sh', cmd: ['sh'], ns: 'jobs-sh' },
  ...(busyboxAvailable ? [{ name: 'busybox sh', cmd: ['busybox', 'sh'], ns: 'jobs-busybox' }] : []),
];

function runWrapper(shell: string[], args: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  const [cmd, ...pre] = shell;
  if (cmd === undefined) throw new Error('empty shell');
  return runScript(cmd, [...pre, join(home, 'executor-entrypoint.sh'), ...args], env);
}

/** Runs a script and parses what the fake java/entrypoint printed (ARG lines, JAVA_HOME). */
function runScript(cmd: string, argv: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      const lines = stdout.split('\n');
      resolve({
        code,
        stdout,
        stderr,
        ms: Date.now() - started,
        args: lines.filter((l) => l.startsWith('ARG ')).map((l) => l.slice(4)),
        javaHome: lines.find((l) => l.startsWith('JAVA_HOME='))?.slice('JAVA_HOME='.length),
      });
    });
  });
}

function argAfter(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i < 0 ? undefined : args[i + 1];
}

function resolvable(host: string): void {
  writeFileSync(join(dnsDir, host), '');
}

describe.concurrent.each(shells)('executor-entrypoint.sh under $name', ({ cmd, ns }) => {
  const env = (extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv => baseEnv({ SPARK_EXECUTOR_NAMESPACE: ns, ...extra });

  it('passes the driver through untouched', async () => {
    const r = await runWrapper(cmd, ['driver', '--class', 'Main', 'app.jar'], env());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ENTRYPOINT driver --class Main app.jar\nDRIVER JAVA_HOME=${jdk}\n`);
    expect(r.stderr).toBe('');
  });

  it('passes any other command through untouched', async () => {
    const r = await runWrapper(cmd, ['echo', 'hello', 'world'], env());
    expect(r.stdout).toBe('ENTRYPOINT echo hello world\nhello world\n');
    expect(r.stderr).toBe('');
  });

  it('advertises <service>.<namespace>.svc and binds the pod IP once the name resolves', async () => {
    const host = `${executorServiceName(APP, '7')}.${ns}.svc`;
    resolvable(host);
    const r = await runWrapper(cmd, ['executor'], env());
    expect(r.code).toBe(0);
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
    expect(r.args.filter((a) => a === '--hostname')).toHaveLength(1);
    expect(r.args.slice(0, 4)).toEqual(['-Dspark.blockManager.port=7079', '-Xms1g', '-Xmx1g', '-cp']);
    expect(argAfter(r.args, '--podName')).toBe('app-exec-7');
    expect(r.javaHome).toBe(jdk); // the JVM sees the real JAVA_HOME again
    expect(r.stderr).toContain(`${host} resolves`);
  });

  it('uses the hashed name for ids that are no DNS label', async () => {
    const app = 'My_Spark.App';
    const host = `${executorServiceName(app, '12')}.${ns}-a.svc`;
    expect(host).toMatch(/^svc-my-spark-app-exec-12-h[0-9a-f]{10}\.[a-z-]+\.svc$/);
    resolvable(host);
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_APPLICATION_ID: app, SPARK_EXECUTOR_ID: '12', SPARK_EXECUTOR_NAMESPACE: `${ns}-a` }));
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
  });

  it('waits until the Service name resolves', async () => {
    const host = `${executorServiceName(APP, '8')}.${ns}.svc`;
    const timer = setTimeout(() => resolvable(host), 1200);
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '8', SPARK_EXEC_SVC_WAIT_SECONDS: '10' }));
    clearTimeout(timer);
    expect(r.ms).toBeGreaterThanOrEqual(1000);
    expect(r.ms).toBeLessThan(8000);
    expect(argAfter(r.args, '--hostname')).toBe(host);
    expect(argAfter(r.args, '--bind-address')).toBe(POD_IP);
  }, 15_000);

  it('falls back to the pod IP when the name does not resolve in time', async () => {
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '9', SPARK_EXEC_SVC_WAIT_SECONDS: '1' }));
    expect(r.code).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(1000);
    expect(r.ms).toBeLessThan(5000);
    expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
    expect(r.args).not.toContain('--bind-address');
    expect(r.javaHome).toBe(jdk);
    expect(r.stderr).toContain('does not resolve');
  }, 15_000);

  it('fails or advertises anyway on timeout when told to', async () => {
    const fail = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '10', SPARK_EXEC_SVC_WAIT_SECONDS: '1', SPARK_EXEC_SVC_ON_TIMEOUT: 'fail' }));
    expect(fail.code).toBe(1);
    expect(fail.stdout).toBe('');
    const anyway = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '10', SPARK_EXEC_SVC_WAIT_SECONDS: '1', SPARK_EXEC_SVC_ON_TIMEOUT: 'advertise' }));
    expect(argAfter(anyway.args, '--hostname')).toBe(`${executorServiceName(APP, '10')}.${ns}.svc`);
    expect(argAfter(anyway.args, '--bind-address')).toBe(POD_IP);
  }, 15_000);

  it('does not wait with SPARK_EXEC_SVC_WAIT_SECONDS=0 and honours a bind-address override', async () => {
    const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '11', SPARK_EXEC_SVC_WAIT_SECONDS: '0', SPARK_EXEC_SVC_BIND_ADDRESS: '0.0.0.0' }));
    expect(r.ms).toBeLessThan(3000);
    expect(argAfter(r.args, '--hostname')).toBe(`${executorServiceName(APP, '11')}.${ns}.svc`);
    expect(argAfter(r.args, '--bind-address')).toBe('0.0.0.0');
  });

  it('advertises the name only for a fixed spark.blockManager.port that agrees with the annotation', async () => {
    const host = `${executorServiceName(APP, '13')}.${ns}.svc`;
    resolvable(host);
    const ok = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '13', SPARK_EXEC_SVC_PORT_ANNOTATION: '7079' }));
    expect(argAfter(ok.args, '--hostname')).toBe(host);
    expect(ok.stderr).toContain(`advertising ${host}:7079`);
    for (const extra of [
      { SPARK_JAVA_OPT_1: undefined }, // conf unset: random port, the Service cannot forward it
      { SPARK_JAVA_OPT_1: '-Dspark.blockManager.port=0' },
      { SPARK_JAVA_OPT_1: '-Dspark.blockManagerX.port=7079' },
      { SPARK_EXEC_SVC_PORT_ANNOTATION: '7100' }, // the Service would forward another port
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ SPARK_EXECUTOR_ID: '13', ...extra }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('--bind-address');
      expect(r.stderr).toContain('keeps advertising its pod IP');
    }
    // the highest SPARK_JAVA_OPT_<n> wins, as on the java command line
    const twice = await runWrapper(
      cmd,
      ['executor'],
      env({ SPARK_EXECUTOR_ID: '13', SPARK_JAVA_OPT_2: '-Dspark.blockManager.port=0', SPARK_JAVA_OPT_1: '-Dspark.blockManager.port=7079' }),
    );
    expect(argAfter(twice.args, '--hostname')).toBe(POD_IP);
  });

  it('keeps Spark behaviour when it cannot name the Service', async () => {
    for (const extra of [
      { SPARK_EXECUTOR_NAMESPACE: undefined },
      { SPARK_EXECUTOR_ID: 'EXECID' }, // statefulset allocator: id only known inside the JVM
      { SPARK_APPLICATION_ID: '' },
      { SPARK_EXEC_SVC_DISABLE: 'true' },
      { SPARK_EXEC_SVC_JAVA_SHIM_HOME: join(root, 'no-such-dir') },
    ]) {
      const r = await runWrapper(cmd, ['executor'], env({ ...extra, SPARK_EXEC_SVC_WAIT_SECONDS: '0' }));
      expect(r.code).toBe(0);
      expect(argAfter(r.args, '--hostname')).toBe(POD_IP);
      expect(r.args).not.toContain('--bind-address');
      expect(r.javaHome).toBe(jdk);
      expect(r.stderr).toMatch(/^spark-exec-svc: /);
    }
  });
});

describe('java-shim.sh', () => {
  function shim(args: string[], env: Record<string, string>): Promise<Result> {
    return runScript('sh', [join(home, 'jvm', 'bin', 'java'), ...args], {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SPARK_EXEC_SVC_REAL_JAVA: join(jdk, 'bin', 'java'),
      ...env,
    });
  }

  it('leaves every other java command alone and restores JAVA_HOME', async () => {
    const r = await shim(['-version', '--hostname', 'x'], { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc', SPARK_EXEC_SVC_REAL_JAVA_HOME: jdk });
    expect(r.args).toEqual(['-version', '--hostname', 'x']);
    expect(r.javaHome).toBe(jdk);
    const unset = await shim(['-version'], {});
    expect(unset.javaHome).toBe('<unset>');
  });

  it('keeps a --bind-address that is already there, and handles CoarseGrainedExecutorBackend', async () => {
    const r = await shim(
      ['-cp', 'x', 'org.apache.spark.executor.CoarseGrainedExecutorBackend', '--hostname', '10.0.0.9', '--bind-address', '0.0.0.0'],
      { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc' },
    );
    expect(r.args).toEqual(['-cp', 'x', 'org.apache.spark.executor.CoarseGrainedExecutorBackend', '--hostname', 'svc-a.ns.svc', '--bind-address', '0.0.0.0']);
  });

  it('keeps arguments with spaces and shell characters intact', async () => {
    const tricky = ['-Dspark.x=a b', '$(id)', '*', "it's", 'org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend', '--hostname', 'fd00::7'];
    const r = await shim(tricky, { SPARK_EXEC_SVC_ADVERTISE_HOST: 'svc-a.ns.svc' });
    expect(r.args).toEqual([...tricky.slice(0, -1), 'svc-a.ns.svc', '--bind-address', 'fd00::7']);
  });
});

describe('pod template and ConfigMap', () => {
  const kustomization = loadYaml<{ configMapGenerator: { name: string; files: string[] }[]; generatorOptions: { disableNameSuffixHash: boolean } }>(
    readFileSync(join(SPARK_DIR, 'kustomization.yaml'), 'utf8'),
  );
  const generator = kustomization.configMapGenerator[0];

  it('runs the wrapper as command, without args, with the namespace, opt-in label and no service links', () => {
    interface EnvVar {
      name: string;
      value?: string;
      valueFrom?: { fieldRef?: { fieldPath: string } };
    }
    interface Template {
      metadata: { labels: Record<string, string> };
      spec: {
        enableServiceLinks: boolean;
        containers: { name: string; command: string[]; args?: string[]; env: EnvVar[]; volumeMounts: { name: string; mountPath: string }[] }[];
        volumes: { name: string; configMap: { name: string; defaultMode: number; items: { key: string; path: string }[] } }[];
      };
    }
    const pod = loadYaml<Template>(readFileSync(join(SPARK_DIR, 'executor-pod-template.yaml'), 'utf8'));
    const containerEnv = pod.spec.containers[0]?.env ?? [];
    expect(containerEnv.find((e) => e.name === 'SPARK_EXEC_SVC_PORT_ANNOTATION')?.valueFrom?.fieldRef?.fieldPath).toBe(
      "metadata.annotations['spark-exec-svc/block-manager-port']",
    );
    expect(pod.metadata.labels['spark-exec-svc/enabled']).toBe('true');
    expect(pod.spec.enableServiceLinks).toBe(false);
    const container = pod.spec.containers[0];
    if (container === undefined) throw new Error('no container');
    expect(container.name).toBe('spark-kubernetes-executor');
    expect(container.command).toEqual(['/bin/sh', '/opt/spark-exec-svc/executor-entrypoint.sh']);
    expect(container.args).toBeUndefined(); // Spark appends "executor" to the template's args
    expect(container.env.find((e) => e.name === 'SPARK_EXECUTOR_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    for (const sparkOwned of ['SPARK_EXECUTOR_POD_IP', 'SPARK_APPLICATION_ID', 'SPARK_EXECUTOR_ID', 'JAVA_HOME']) {
      expect(container.env.map((e) => e.name)).not.toContain(sparkOwned);
    }
    const volume = pod.spec.volumes[0];
    if (volume === undefined) throw new Error('no volume');
    expect(container.volumeMounts).toContainEqual(expect.objectContaining({ name: volume.name, mountPath: '/opt/spark-exec-svc' }));
    expect(volume.configMap.name).toBe(generator?.name);
    expect(volume.configMap.defaultMode).toBe(0o755);
    expect(volume.configMap.items).toEqual([
      { key: 'executor-entrypoint.sh', path: 'executor-entrypoint.sh' },
      { key: 'exec-svc-name.sh', path: 'exec-svc-name.sh' },
      { key: 'java-shim.sh', path: 'jvm/bin/java' },
    ]);
    expect(kustomization.generatorOptions.disableNameSuffixHash).toBe(true);
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
  it.skipIf(!kubectl)('kubectl kustomize spark/ builds the ConfigMap with the three scripts, offline', () => {
    const built = spawnSync('kubectl', ['kustomize', SPARK_DIR], { encoding: 'utf8' });
    expect(built.status).toBe(0);
    const docs = loadAllYaml(built.stdout) as { kind: string; metadata: { name: string }; data: Record<string, string> }[];
    expect(docs).toHaveLength(1);
    const cm = docs[0];
    expect(cm?.kind).toBe('ConfigMap');
    expect(cm?.metadata.name).toBe('spark-exec-svc-scripts');
    for (const f of generator?.files ?? []) expect(cm?.data[f]).toBe(readFileSync(join(SPARK_DIR, f), 'utf8'));
  });
});
