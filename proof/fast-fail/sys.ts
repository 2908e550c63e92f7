/** Small system helpers: finding binaries, bounded synchronous commands, a cleanup stack. */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

const EXTRA_BIN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** Absolute path of an executable, searching PATH plus the sbin dirs (non-root PATHs often lack them). */
export function findBinary(name: string): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== ''), ...EXTRA_BIN_DIRS];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export interface CmdResult {
  ok: boolean;
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Run a command synchronously, bounded by timeoutMs (default 10 s). Never throws. */
export function run(cmd: string, args: readonly string[], timeoutMs = 10_000): CmdResult {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL' });
  const stderr = r.error !== undefined ? `${r.stderr ?? ''}${r.error.message}` : (r.stderr ?? '');
  return { ok: r.status === 0 && r.error === undefined, status: r.status, stdout: r.stdout ?? '', stderr };
}

/** Like run(), but throws with the command line and stderr on failure. */
export function runOrThrow(cmd: string, args: readonly string[], timeoutMs = 10_000): string {
  const r = run(cmd, args, timeoutMs);
  if (!r.ok) throw new Error(`command failed (${r.status ?? 'killed'}): ${cmd} ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * A LIFO stack of synchronous cleanup steps. Synchronous so it also works from a signal
 * handler or process 'exit'. Idempotent: each step runs at most once.
 */
export class CleanupStack {
  private steps: { name: string; fn: () => void }[] = [];

  add(name: string, fn: () => void): void {
    this.steps.push({ name, fn });
  }

  runAll(log: (line: string) => void = () => {}): void {
    while (this.steps.length > 0) {
      const step = this.steps.pop();
      if (step === undefined) break;
      try {
        step.fn();
      } catch (err) {
        log(`cleanup step "${step.name}" failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
}

/** All cleanup stacks of runs in progress in this process, for the CLI's signal handlers. */
export const activeCleanups = new Set<CleanupStack>();
