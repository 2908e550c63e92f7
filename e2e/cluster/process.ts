/**
 * A component process of the e2e cluster: started (optionally inside a network namespace via
 * `nsenter --net`, which changes only the network namespace, so `ip netns add` done by the process
 * kubelet is seen by everyone), its stdout+stderr appended to a log file (a file, not a pipe: the
 * component never blocks on the harness's event loop), stopped with SIGTERM then SIGKILL.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary, isAlive, terminateSync } from './sys.ts';

export interface ProcessSpec {
  /** Short name, also the log file's name (`<logDir>/<name>.log`). */
  name: string;
  command: string;
  args: readonly string[];
  /** Run inside this network namespace (name under /run/netns). */
  netns?: string;
  env?: Record<string, string>;
  cwd?: string;
  /** Grace period between SIGTERM and SIGKILL on stop. */
  stopGraceMs?: number;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Resolves when the process exits (never rejects). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  running(): boolean;
  /** Last `lines` lines of the log, for error messages. */
  logTail(lines?: number): string;
  /** SIGTERM, grace, SIGKILL. Synchronous (usable from signal/exit handlers). */
  stopSync(): 'not-running' | 'terminated' | 'killed';
}

export function startProcess(spec: ProcessSpec, logDir: string): ManagedProcess {
  const logFile = join(logDir, `${spec.name}.log`);
  const fd = openSync(logFile, 'a');
  let command = spec.command;
  let args = [...spec.args];
  if (spec.netns !== undefined) {
    const nsenter = findBinary('nsenter');
    if (nsenter === null) throw new Error('`nsenter` (util-linux) not found');
    args = [`--net=/run/netns/${spec.netns}`, '--', command, ...args];
    command = nsenter;
  }
  const child = spawn(command, args, {
    cwd: spec.cwd,
    env: { ...process.env, ...spec.env },
    // Own process group: a terminal's Ctrl-C reaches the harness, which stops components in order.
    detached: true,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start ${spec.name} (${spec.command})`);
  const pid = child.pid;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  const graceMs = spec.stopGraceMs ?? 10_000;
  return {
    name: spec.name,
    pid,
    logFile,
    child,
    exited,
    running: () => child.exitCode === null && child.signalCode === null && isAlive(pid),
    logTail: (lines = 30) => {
      try {
        return readFileSync(logFile, 'utf8')
          .split('\n')
          .slice(-lines - 1)
          .join('\n');
      } catch {
        return '(no log)';
      }
    },
    stopSync: () => terminateSync(pid, graceMs),
  };
}
