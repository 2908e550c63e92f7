/**
 * Child processes of the bench: the API-server emulator (IPC-driven) and the function's real
 * entry point. Every wait is bounded; every process started here is stopped here, by its pid.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EmulatorCommand, LoggedRequest } from './emulator-child.ts';
import { freePort, waitForHttpOk } from '../../testkit/process.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EMULATOR_CHILD = fileURLToPath(new URL('./emulator-child.ts', import.meta.url));

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export { freePort };
export type { LoggedRequest };

/** Resident set size of a process, from /proc (Linux), in KiB; undefined when not readable. */
export function rssKiB(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
    return rss === undefined || hwm === undefined ? undefined : { rss: Number(rss), hwm: Number(hwm) };
  } catch {
    return undefined;
  }
}

async function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return Promise.race([new Promise<boolean>((resolve) => child.once('exit', () => resolve(true))), sleep(ms).then(() => false)]);
}

/** SIGTERM, then SIGKILL if it is still there after `graceMs` — only this child, by its pid. */
export async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, graceMs)) return;
  child.kill('SIGKILL');
  await waitForExit(child, 2_000);
}

export interface EmulatorProcess {
  readonly url: string;
  readonly kubeconfig: string;
  readonly pid: number;
  call<T = unknown>(command: EmulatorCommand): Promise<T>;
  seed<T extends object>(objects: readonly T[]): Promise<T[]>;
  countByVerb(resource?: string): Promise<Record<string, number>>;
  /** The API requests logged since the last reset (emulator.requests), optionally of one namespace. */
  requests(namespace?: string): Promise<LoggedRequest[]>;
  reset(): Promise<void>;
  countObjects(resource: 'pods' | 'services', namespace?: string, labelSelector?: string, annotation?: string): Promise<number>;
  stop(): Promise<void>;
}

/** A fresh emulator in its own process: fresh store, fresh request log. */
export async function startEmulatorProcess(): Promise<EmulatorProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'spark-exec-svc-bench-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const child = fork(EMULATOR_CHILD, [kubeconfig], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: [] });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('emulator did not start within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`emulator exited with ${code}`)));
    child.on('message', (message: { type?: string; url?: string; id?: number; result?: unknown; error?: string }) => {
      if (message.type === 'ready' && message.url !== undefined) {
        clearTimeout(timer);
        resolve(message.url);
        return;
      }
      const waiter = message.id === undefined ? undefined : pending.get(message.id);
      if (waiter === undefined) return;
      pending.delete(message.id!);
      if (message.error !== undefined) waiter.reject(new Error(`emulator: ${message.error}`));
      else waiter.resolve(message.result);
    });
  });
  const call = <T>(command: EmulatorCommand): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, command });
    });
  return {
    url,
    kubeconfig,
    pid: child.pid!,
    call,
    seed: <T extends object>(objects: readonly T[]) => call<T[]>({ op: 'seed', objects }),
    countByVerb: (resource) => call<Record<string, number>>({ op: 'countByVerb', ...(resource === undefined ? {} : { resource }) }),
    requests: (namespace) => call<LoggedRequest[]>({ op: 'requests', ...(namespace === undefined ? {} : { namespace }) }),
    reset: () => call<void>({ op: 'reset' }),
    countObjects: (resource, namespace, labelSelector, annotation) =>
      call<number>({
        op: 'countObjects',
        resource,
        ...(namespace === undefined ? {} : { namespace }),
        ...(labelSelector === undefined ? {} : { labelSelector }),
        ...(annotation === undefined ? {} : { annotation }),
      }),
    async stop() {
      if (child.connected) {
        await Promise.race([call({ op: 'stop' }), sleep(2_000)]);
      }
      if (!(await waitForExit(child, 3_000))) await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface FunctionProcess {
  readonly url: string;
  readonly pid: number;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

export interface FunctionOptions {
  /** Entry point file (main.ts, or the compiled main.js). */
  readonly entry: string;
  readonly kubeconfig: string;
  readonly env?: Record<string, string>;
  readonly nodeArgs?: readonly string[];
  /** The function's stdout/stderr (JSON log lines) go to this file; default: discarded. */
  readonly logFile?: string;
  /** Start with the inspector on 127.0.0.1:<port> (memory section). */
  readonly inspectPort?: number;
  /** Starts the process inside limits (bench/lib/cgroup.ts); the pid stays the function's (the wrapper execs). */
  readonly launch?: (command: string, args: readonly string[]) => { command: string; args: string[] };
}

/** The function's real entry point as a child process, as the container runs it; resolves when ready. */
export async function startFunctionProcess(options: FunctionOptions): Promise<FunctionProcess> {
  const port = await freePort();
  if (options.logFile !== undefined) mkdirSync(dirname(options.logFile), { recursive: true });
  const logFd = options.logFile === undefined ? 'ignore' : openSync(options.logFile, 'w');
  const inspect = options.inspectPort === undefined ? [] : [`--inspect=127.0.0.1:${options.inspectPort}`];
  // BENCH_FUNCTION_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"): node flags for every function process of a run.
  const extra = (process.env['BENCH_FUNCTION_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');
  const args = [...inspect, ...extra, ...(options.nodeArgs ?? []), options.entry];
  const argv = options.launch === undefined ? { command: process.execPath, args } : options.launch(process.execPath, args);
  const child = spawn(argv.command, argv.args, {
    cwd: REPO_ROOT,
    env: functionEnv(options.kubeconfig, port, options.env),
    stdio: ['ignore', logFd, logFd],
  });
  if (typeof logFd === 'number') closeSync(logFd);
  const url = `http://127.0.0.1:${port}/`;
  try {
    await waitForHttpOk(`${url}health/readiness`, { child, timeoutMs: 20_000 });
  } catch (error) {
    await stopChild(child);
    throw new Error(
      `${error instanceof Error ? error.message : String(error)}${options.logFile === undefined ? '' : ` (log: ${options.logFile})`}`,
    );
  }
  return { url, pid: child.pid!, child, stop: () => stopChild(child) };
}

/** The environment the function gets: the parent's (PATH etc.) plus its own settings. */
export function functionEnv(kubeconfig: string, port: number, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Nothing the bench's own process was started with may leak into the measured one.
  delete env['NODE_OPTIONS'];
  return {
    ...env,
    KUBECONFIG: kubeconfig,
    PORT: String(port),
    WATCH_NAMESPACES: 'bench,bench-warm',
    LOG_LEVEL: 'info',
    COOLDOWN_SECONDS: '300',
    // The lifecycle section sends sweeps back to back until one finishes its round.
    SWEEP_MIN_INTERVAL_MS: '0',
    // The burst sends 64 at once straight at the function (no queue-proxy in front, which would
    // hold them to containerConcurrency): the connection bound must not be what is measured.
    MAX_CONNECTIONS: '10000',
    ...extra,
  };
}

/** User+system CPU time a process has used so far, in ms (Linux /proc; 10 ms resolution at 100 Hz). */
export function cpuMs(pid: number): number {
  const { userMs, systemMs } = cpuTimes(pid);
  return userMs + systemMs;
}

/** User and system (kernel, e.g. socket writes) CPU time of a process so far, in ms (/proc, 10 ms resolution). */
export function cpuTimes(pid: number): { userMs: number; systemMs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime, stime (fields 14 and 15 of proc(5))
  return { userMs: (Number(fields[11]) * 1000) / CLOCK_TICKS, systemMs: (Number(fields[12]) * 1000) / CLOCK_TICKS };
}
const CLOCK_TICKS = 100;

/** CPU time of this process so far, in ms. */
export function ownCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** Open sockets of a process (Linux /proc/<pid>/fd): shows whether connections are reused or piling up. */
export function openSockets(pid: number): number {
  let count = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) count++;
    } catch {
      // closed meanwhile
    }
  }
  return count;
}
