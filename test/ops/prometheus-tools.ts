import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * The real `prometheus` and `promtool` binaries (Debian package `prometheus`; .ci/run installs
 * it). Tests that need them are skipped with a printed reason where they are missing — except
 * in CI (CI=true), where a missing binary fails the test, so that nothing is skipped silently.
 */
export function findTool(name: 'prometheus' | 'promtool'): string | undefined {
  const fromEnv = process.env[name.toUpperCase()];
  const candidates = [fromEnv, ...(process.env['PATH'] ?? '').split(path.delimiter).map((dir) => path.join(dir, name)), `/usr/bin/${name}`];
  return candidates.find((c): c is string => c !== undefined && c !== '' && existsSync(c));
}

export const IN_CI = /^(1|true|yes)$/i.test(process.env['CI'] ?? '');

export interface Tools {
  readonly promtool: string | undefined;
  readonly prometheus: string | undefined;
  /** Skip the tests that need `names`: they are missing and this is not CI (the reason is printed). */
  skip(names: ReadonlyArray<'prometheus' | 'promtool'>, what: string): boolean;
  /** The tool's path; throws (fails the test) when it is missing — reached only in CI, or when not skipped. */
  require(name: 'prometheus' | 'promtool'): string;
}

export function prometheusTools(testFile: string): Tools {
  const found = { promtool: findTool('promtool'), prometheus: findTool('prometheus') };
  const missing = (names: ReadonlyArray<'prometheus' | 'promtool'>) => names.filter((n) => found[n] === undefined);
  return {
    ...found,
    skip(names, what) {
      const absent = missing(names);
      if (absent.length === 0) return false;
      if (IN_CI) {
        console.error(
          `[${testFile}] ${absent.join(' and ')} missing in CI (CI=true): ${what} will FAIL. .ci/run installs the Debian package prometheus.`,
        );
        return false;
      }
      console.warn(
        `[${testFile}] SKIPPING ${what}: ${absent.join(' and ')} not found on PATH or in /usr/bin (apt-get install prometheus; .ci/run does so as root).`,
      );
      return true;
    },
    require(name) {
      const tool = found[name];
      if (tool === undefined)
        throw new Error(`${name} is not installed (Debian package prometheus; .ci/run installs it)${IN_CI ? ' — required in CI' : ''}`);
      return tool;
    },
  };
}

export async function toolVersion(tool: string): Promise<string> {
  const { stdout, stderr } = await execFileAsync(tool, ['--version']);
  return `${stdout}${stderr}`.split('\n')[0]?.trim() ?? '';
}

/** Runs promtool; resolves with its exit code and output instead of throwing on a non-zero exit. */
export async function runTool(
  tool: string,
  args: readonly string[],
  options: { input?: string; cwd?: string } = {},
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(tool, [...args], { cwd: options.cwd, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      if (error === null) return resolve({ code: 0, output });
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'number') return resolve({ code, output });
      reject(error);
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}
