/**
 * System helpers of the e2e cluster harness: bounded synchronous commands (shared with the
 * fast-fail bench), liveness that treats zombies as dead, network-namespace listing, and a
 * synchronous sleep (teardown is synchronous so it also runs from signal and 'exit' handlers).
 */
import { readFileSync } from 'node:fs';
import { findBinary, isRoot, run, runOrThrow } from '../../bench/fast-fail/sys.ts';

export { findBinary, isRoot, run, runOrThrow };

export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Whether a process exists and has not exited. A child that exited but was not reaped yet (the event
 * loop is blocked during a synchronous teardown) is a zombie: kill(pid, 0) still succeeds on it.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state is the first.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM, wait up to graceMs, then SIGKILL; returns how it ended. Synchronous. */
export function terminateSync(pid: number, graceMs: number): 'not-running' | 'terminated' | 'killed' {
  if (!isAlive(pid)) return 'not-running';
  killQuietly(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return 'terminated';
    sleepSync(50);
  }
  killQuietly(pid, 'SIGKILL');
  for (let i = 0; i < 100 && isAlive(pid); i++) sleepSync(20);
  return 'killed';
}

export function ipBinary(): string {
  const ip = findBinary('ip');
  if (ip === null) throw new Error('`ip` (iproute2) not found');
  return ip;
}

export function netnsNames(): string[] {
  const r = run(ipBinary(), ['netns', 'list']);
  return r.stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name !== '');
}

/** PIDs of processes whose network namespace is `name`. */
export function netnsPids(name: string): number[] {
  const r = run(ipBinary(), ['netns', 'pids', name]);
  return r.stdout
    .split('\n')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** Kill every process in the namespace (SIGKILL; it is the last resort of a teardown), then delete it. */
export function destroyNetns(name: string): void {
  for (let attempt = 0; attempt < 20; attempt++) {
    const pids = netnsPids(name);
    if (pids.length === 0) break;
    for (const pid of pids) killQuietly(pid, 'SIGKILL');
    sleepSync(50);
  }
  run(ipBinary(), ['netns', 'del', name]);
}

/** Mount points whose path or source mentions `needle` (from the root mount namespace's view). */
export function mountsMentioning(needle: string): string[] {
  try {
    return readFileSync('/proc/1/mountinfo', 'utf8')
      .split('\n')
      .filter((line) => line.includes(needle));
  } catch {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((line) => line.includes(needle));
  }
}
