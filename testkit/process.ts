import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 2xx; fails early if `child` exits, and after `timeoutMs`. */
export async function waitForHttpOk(url: string, options: { timeoutMs?: number; child?: ChildProcess } = {}): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    if (options.child !== undefined && options.child.exitCode !== null)
      throw new Error(`process exited with code ${options.child.exitCode} before ${url} answered`);
    if (Date.now() > deadline) throw new Error(`${url} did not answer 2xx within ${options.timeoutMs ?? 10_000} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end, its output collected (stdin closed); `code` is -1 when it was killed by a signal. */
export function runCommand(
  command: string,
  args: readonly string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
