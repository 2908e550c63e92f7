// A stand-in executor container for spark/executor-entrypoint.sh and spark/java-shim.sh: the
// scripts laid out as the pod template's ConfigMap volume mounts them, a fake Spark entrypoint that
// starts ${JAVA_HOME}/bin/java with the executor backend's command line built the way Spark's
// entrypoint.sh builds it (SPARK_JAVA_OPT_* first, in numeric order like Spark's own entrypoint or
// in lexical order like the official images' "${!SPARK_JAVA_OPT_@}"), and a fake `java` that prints
// what it got. Used by test/executor/entrypoint.test.ts (with a fake getent) and
// test/executor/dns-netns.test.ts (with the real getent, in a network namespace).
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SPARK_DIR = join(import.meta.dirname, '..', '..', 'spark');
export const BACKEND = 'org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend';
export const APP = 'spark-0123456789abcdef0123456789abcdef';
export const POD_IP = '10.244.1.7';

export function writeExecutable(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

export interface ExecutorLayout {
  root: string;
  /** the ConfigMap mount (SPARK_EXEC_SVC_HOME) */
  home: string;
  /** the image's real JAVA_HOME */
  jdk: string;
  /** Spark's entrypoint stand-in (SPARK_EXEC_SVC_ENTRYPOINT) */
  entrypoint: string;
  wrapper: string;
  shim: string;
  remove(): void;
}

export function makeExecutorLayout(prefix: string): ExecutorLayout {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const home = join(root, 'opt', 'spark-exec-svc');
  const jdk = join(root, 'jdk');
  const entrypoint = join(root, 'entrypoint.sh');
  mkdirSync(join(home, 'jvm', 'bin'), { recursive: true });
  mkdirSync(join(jdk, 'bin'), { recursive: true });
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
  // The executor branch of Spark's entrypoint.sh. Spark's own (resource-managers/kubernetes/docker,
  // v3.3.0 - v3.5.0): `env | grep SPARK_JAVA_OPT_ | sort -t_ -k4 -n`; the official images
  // (apache/spark-docker 3.4.0 on): `for v in "${!SPARK_JAVA_OPT_@}"`, which bash expands in
  // lexical order. FAKE_OPT_ORDER=numeric|lexical (default lexical) picks one.
  writeExecutable(
    entrypoint,
    `#!/bin/sh
# FAKE_ENTRYPOINT_UPTIME=1: first, when it started, by the kernel's clock (/proc/uptime)
if [ "\${FAKE_ENTRYPOINT_UPTIME-}" = 1 ] && read -r up _ </proc/uptime; then printf 'STARTED %s\\n' "$up"; fi
printf 'ENTRYPOINT'; for a do printf ' %s' "$a"; done; printf '\\n'
case "$1" in
  executor)
    shift 1
    if [ "\${FAKE_OPT_ORDER-}" = numeric ]; then
      names=$(env | sed -n 's/^\\(SPARK_JAVA_OPT_[0-9][0-9]*\\)=.*/\\1/p' | sort -t_ -k4 -n)
    else
      names=$(env | sed -n 's/^\\(SPARK_JAVA_OPT_[0-9][0-9]*\\)=.*/\\1/p' | LC_ALL=C sort)
    fi
    set --
    for n in $names; do eval "set -- \\"\\$@\\" \\"\\\${$n}\\""; done
    exec "\${JAVA_HOME}/bin/java" "$@" -Xms1g -Xmx1g -cp "/opt/spark/jars/*" \\
      ${BACKEND} \\
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
  return {
    root,
    home,
    jdk,
    entrypoint,
    wrapper: join(home, 'executor-entrypoint.sh'),
    shim: join(home, 'jvm', 'bin', 'java'),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

/**
 * A PATH directory holding links to the given commands only (the first found on `path`), so that a
 * test can run the wrapper on a machine without, say, `timeout`. Returns the directory.
 */
export function pathWith(dir: string, commands: string[], path: string): string {
  mkdirSync(dir, { recursive: true });
  for (const cmd of commands) {
    const found = path
      .split(':')
      .filter((d) => d !== '')
      .map((d) => join(d, cmd))
      .find((p) => existsSync(p));
    if (found === undefined) throw new Error(`${cmd} not found on ${path}`);
    symlinkSync(found, join(dir, cmd));
  }
  return dir;
}

export function executorEnv(layout: ExecutorLayout, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: layout.root,
    JAVA_HOME: layout.jdk,
    SPARK_EXEC_SVC_ENTRYPOINT: layout.entrypoint,
    SPARK_EXEC_SVC_HOME: layout.home,
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

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** what the fake java got, one entry per argument */
  args: string[];
  javaHome: string | undefined;
}

/** Runs a command and parses what the fake java/entrypoint printed (ARG lines, JAVA_HOME). */
export function runScript(cmd: string, argv: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    // timed at 'exit'; the output is complete at 'close'
    let ms = 0;
    child.on('exit', () => (ms = performance.now() - started));
    child.on('close', (code) => {
      const lines = stdout.split('\n');
      resolve({
        code,
        stdout,
        stderr,
        ms: ms === 0 ? performance.now() - started : ms,
        args: lines.filter((l) => l.startsWith('ARG ')).map((l) => l.slice(4)),
        javaHome: lines.find((l) => l.startsWith('JAVA_HOME='))?.slice('JAVA_HOME='.length),
      });
    });
  });
}

export function argAfter(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i < 0 ? undefined : args[i + 1];
}

/** Pids of the processes whose parent is `pid` (from /proc/<pid>/stat: "pid (comm) state ppid ..."). */
export function childPids(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) found.push(Number(entry));
  }
  return found;
}

/**
 * Live (non-zombie) processes whose environment holds `name=value`: everything a run started with
 * that variable in its env, its children and their children included, whoever reaped them.
 * Each as "pid comm".
 */
export function processesWithEnv(name: string, value: string): string[] {
  const needle = Buffer.from(`\0${name}=${value}\0`);
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${entry}/environ`)]);
      if (!environ.includes(needle)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      found.push(`${entry} ${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}`);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}
