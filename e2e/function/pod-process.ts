/**
 * Runs a process the way a container of a pod sees its world, as far as the program can tell:
 * a clean environment (only the env given, PATH, and HOME pointing at an empty directory), the
 * in-cluster API address in KUBERNETES_SERVICE_HOST/PORT, and its ServiceAccount's token, CA and
 * namespace at /var/run/secrets/kubernetes.io/serviceaccount — mounted in a private mount
 * namespace (a tmpfs over /run, which /var/run points to), so nothing appears on the host and
 * nothing is left when the process ends. Programs then take their in-cluster code paths
 * (client-go rest.InClusterConfig, @kubernetes/client-node loadFromDefault → loadFromCluster).
 *
 * Optionally inside a network namespace (`netnsPath`), entered before the mount namespace is made.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync, mkdirSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ServiceAccountFiles {
  readonly token: string;
  readonly caPem: string;
  readonly namespace: string;
}

export interface PodProcessOptions {
  /** For logs and errors. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly serviceAccount: ServiceAccountFiles;
  /** What KUBERNETES_SERVICE_HOST/PORT say: the API server as this process reaches it. */
  readonly apiServer: { readonly host: string; readonly port: number };
  readonly netnsPath?: string;
  /** Also append every output line here. */
  readonly logFile?: string;
}

export interface PodProcess {
  readonly name: string;
  readonly pid: number;
  /** stdout and stderr lines, in arrival order (capped). */
  readonly lines: readonly string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once a line matching `pattern` has been printed (also one printed already). */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once (a crash). */
  kill(): Promise<void>;
}

const MAX_LINES = 100_000;
const SA_DIR = '/run/secrets/kubernetes.io/serviceaccount';

export function startPodProcess(options: PodProcessOptions): PodProcess {
  const scratch = mkdtempSync(join(tmpdir(), `e2e-pod-${options.name}-`));
  const sa = join(scratch, 'sa');
  const home = join(scratch, 'home');
  mkdirSync(sa);
  mkdirSync(home);
  writeFileSync(join(sa, 'token'), options.serviceAccount.token, { mode: 0o644 });
  writeFileSync(join(sa, 'ca.crt'), options.serviceAccount.caPem, { mode: 0o644 });
  writeFileSync(join(sa, 'namespace'), options.serviceAccount.namespace, { mode: 0o644 });

  // sh copies the files into the tmpfs and then becomes the program (exec), so the pid we hold is
  // the program's, and signals reach it directly.
  const script = `set -e; mount -t tmpfs -o size=1m,mode=0755 e2e-run /run; mkdir -p ${SA_DIR}; cp "$E2E_SA_SRC"/token "$E2E_SA_SRC"/ca.crt "$E2E_SA_SRC"/namespace ${SA_DIR}/; unset E2E_SA_SRC; exec "$@"`;
  const inner = ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'sh', options.command, ...options.args];
  const argv = options.netnsPath === undefined ? inner : ['nsenter', `--net=${options.netnsPath}`, '--', ...inner];
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    KUBERNETES_SERVICE_HOST: options.apiServer.host,
    KUBERNETES_SERVICE_PORT: String(options.apiServer.port),
    ...options.env,
    E2E_SA_SRC: sa,
  };
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  if (child.pid === undefined) throw new Error(`${options.name}: could not start ${argv.join(' ')}`);
  const lines: string[] = [];
  const waiters = new Set<(line: string) => void>();
  const log: WriteStream | undefined = options.logFile === undefined ? undefined : createWriteStream(options.logFile, { flags: 'a' });
  const onData = (stream: NodeJS.ReadableStream): void => {
    let partial = '';
    stream.on('data', (chunk: Buffer) => {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        if (lines.length < MAX_LINES) lines.push(line);
        log?.write(`${line}\n`);
        for (const w of [...waiters]) w(line);
      }
    });
  };
  onData(child.stdout!);
  onData(child.stderr!);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      rmSync(scratch, { recursive: true, force: true });
      log?.end();
      resolve({ code, signal });
    });
  });
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const pid = child.pid;
  const signal = (sig: NodeJS.Signals): void => {
    if (gone) return;
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  };
  return {
    name: options.name,
    pid,
    lines,
    exited,
    waitForLine: (pattern, timeoutMs) =>
      new Promise((resolve, reject) => {
        const seen = lines.find((l) => pattern.test(l));
        if (seen !== undefined) {
          resolve(seen);
          return;
        }
        const onLine = (line: string): void => {
          if (!pattern.test(line)) return;
          cleanup();
          resolve(line);
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(`${options.name}: no line matching ${pattern} within ${timeoutMs} ms; last lines:\n${lines.slice(-20).join('\n')}`),
          );
        }, timeoutMs);
        const onExit = (): void => {
          cleanup();
          reject(
            new Error(`${options.name} exited before printing a line matching ${pattern}; last lines:\n${lines.slice(-30).join('\n')}`),
          );
        };
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(onLine);
        };
        waiters.add(onLine);
        void exited.then(onExit);
      }),
    stop: async (graceMs = 5_000) => {
      signal('SIGTERM');
      const timer = setTimeout(() => signal('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    kill: async () => {
      signal('SIGKILL');
      await exited;
    },
  };
}
