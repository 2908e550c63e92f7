// The POSIX-sh Service name (spark/exec-svc-name.sh, run by the executor wrapper inside the
// executor pod) must equal shared/model/naming.ts's executorServiceName byte for byte: the function
// creates the Service under the TypeScript name, the executor advertises the shell name.
//
// One shell process per shell kind reads every input as a line "APP<TAB>EXEC" (--batch), so
// ~2,000 inputs cost seconds, not minutes. The shell is run as `sh` (dash on Debian/Ubuntu) and
// as `busybox sh` with busybox's own tr/sha256sum first on PATH, when busybox is installed.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executorServiceName, isDns1035Label } from '../../shared/model/naming.ts';

const SCRIPT = join(import.meta.dirname, '..', '..', 'spark', 'exec-svc-name.sh');

interface Case {
  app: string;
  exec: string;
}

interface ShellRun {
  stdout: string;
  stderr: string;
  code: number | null;
  ms: number;
}

function run(cmd: string, args: string[], input: string, env?: NodeJS.ProcessEnv): Promise<ShellRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        code,
        ms: Date.now() - started,
      }),
    );
    // a shell that exits without reading stdin (usage errors) must not fail the test with EPIPE
    child.stdin.on('error', () => undefined);
    if (input === '') child.stdin.end();
    else child.stdin.end(input, 'utf8');
  });
}

function hasCommand(cmd: string, args: string[]): boolean {
  const result = spawnSync(cmd, args, { stdio: 'ignore' });
  return result.error === undefined && result.status === 0;
}

/** A JS string the shell can see unchanged: valid UTF-8 and no line/field separator. */
function lineSafe(s: string): boolean {
  return !/[\t\n\r\0]/.test(s) && Buffer.from(s, 'utf8').toString('utf8') === s;
}

const hex32 = fc.stringMatching(/^[0-9a-f]{32}$/);
const execId = fc.integer({ min: 1, max: 100_000 }).map(String);
const labelValueChars = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-'.split(''));
const lowerChars = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-'.split(''));

function sample<T>(arb: fc.Arbitrary<T>, numRuns: number, seed: number): T[] {
  return fc.sample(arb, { numRuns, seed });
}

function generatedCases(): Case[] {
  const cases: Case[] = [];
  // Spark's default application id: "spark-" + 32 hex digits (KubernetesClusterSchedulerBackend)
  for (const [h, exec] of sample(fc.tuple(hex32, execId), 600, 1)) cases.push({ app: `spark-${h}`, exec });
  // SparkContext's fallback id "spark-application-<epoch ms>"
  const ms = fc.integer({ min: 1_000_000_000_000, max: 9_999_999_999_999 });
  for (const [t, exec] of sample(fc.tuple(ms, execId), 300, 2)) cases.push({ app: `spark-application-${t}`, exec });
  // custom spark.app.id: label-value characters, upper case, "_" and "." included, 1..63 long
  const custom = fc.string({ unit: labelValueChars, minLength: 1, maxLength: 63 });
  for (const [app, exec] of sample(fc.tuple(custom, execId), 650, 3)) cases.push({ app, exec });
  // ids that are already label-shaped: some give the plain name, long ones the hashed one
  const lower = fc.string({ unit: lowerChars, minLength: 1, maxLength: 63 });
  for (const [app, exec] of sample(fc.tuple(lower, execId), 300, 4)) cases.push({ app, exec });
  // arbitrary Unicode (multi-byte UTF-8, emoji, controls other than TAB/LF/CR)
  const anyText = fc.string({ unit: 'grapheme', minLength: 0, maxLength: 40 });
  for (const [app, exec] of sample(fc.tuple(anyText, fc.oneof(execId, anyText)), 200, 5)) {
    if (lineSafe(app) && lineSafe(exec)) cases.push({ app, exec });
  }
  return cases;
}

function edgeCases(): Case[] {
  const exactly63App = 'a'.repeat(63 - 'svc-'.length - '-exec-'.length - '12345'.length);
  const c: Case[] = [
    { app: exactly63App, exec: '12345' }, // candidate is exactly 63 bytes: plain
    { app: `${exactly63App}b`, exec: '12345' }, // 64 bytes: hashed
    { app: 'a'.repeat(63), exec: '100000' },
    { app: 'A'.repeat(63), exec: '1' },
    { app: '', exec: '' },
    { app: '', exec: '1' },
    { app: 'spark-0123456789abcdef0123456789abcdef', exec: '' },
    { app: '___', exec: '...' }, // every byte invalid
    { app: '-', exec: '-' },
    { app: '-app-', exec: '1' }, // leading and trailing dashes
    { app: '--app--', exec: '--1--' },
    { app: 'app', exec: '1-' }, // candidate ends with "-"
    { app: 'app-', exec: '-1' },
    { app: 'App', exec: '1' }, // one upper-case letter
    { app: 'my_app', exec: '1' },
    { app: 'my.app', exec: '1' },
    { app: 'spark-ABCDEF0123456789abcdef0123456789', exec: '7' },
    { app: 'é', exec: '1' }, // 2-byte UTF-8
    { app: '€uro', exec: '2' }, // 3-byte UTF-8
    { app: '🙂', exec: '🙂' }, // 4-byte UTF-8
    { app: 'Ω'.repeat(40), exec: '99999' },
    { app: 'ａｐｐ', exec: '1' }, // full-width letters are not ASCII
    { app: 'app name with spaces', exec: '3' },
    { app: '$(echo pwned)', exec: '`id`' }, // never evaluated
    { app: '%s%d%%', exec: '\\n' }, // printf directives and backslashes are data
    { app: 'quote\'"', exec: '*' },
    { app: '-n', exec: '-e' }, // look like options
    { app: 'EXECID', exec: 'EXECID' },
    { app: 'x'.repeat(200), exec: '1' },
    { app: 'spark-application-1700000000000', exec: '100000' },
    { app: 'a', exec: '0' },
    { app: '0abc', exec: '1' },
    { app: '\u0001\u007f', exec: '1' }, // control bytes
  ];
  // candidate lengths 60..66 around the limit, with and without a trailing dash in the body cut
  for (let n = 45; n <= 60; n++) c.push({ app: `${'b'.repeat(n)}_x`, exec: '42' });
  for (let n = 44; n <= 50; n++) c.push({ app: `${'c'.repeat(n)}-`.padEnd(n + 5, '.'), exec: '7' });
  return c;
}

const cases: Case[] = [...generatedCases(), ...edgeCases()];
const expected = cases.map(({ app, exec }) => executorServiceName(app, exec));
const batchInput = cases.map(({ app, exec }) => `${app}\t${exec}\n`).join('');

const busyboxAvailable = hasCommand('busybox', ['true']);
const shIsDash = (() => {
  try {
    return realpathSync('/bin/sh').endsWith('dash');
  } catch {
    return false;
  }
})();
const dashAvailable = hasCommand('dash', ['-c', 'true']);

let busyboxBin: string | undefined;
const runs = new Map<string, Promise<ShellRun>>();

beforeAll(() => {
  runs.set('sh', run('sh', [SCRIPT, '--batch'], batchInput));
  if (dashAvailable && !shIsDash) runs.set('dash', run('dash', [SCRIPT, '--batch'], batchInput));
  if (busyboxAvailable) {
    // busybox's own applets first on PATH, so tr and sha256sum are busybox's too
    busyboxBin = mkdtempSync(join(tmpdir(), 'exec-svc-busybox-'));
    const busybox = spawnSync('sh', ['-c', 'command -v busybox']).stdout.toString().trim();
    for (const applet of ['sh', 'tr', 'sha256sum', 'cut']) symlinkSync(busybox, join(busyboxBin, applet));
    const env = { ...process.env, PATH: `${busyboxBin}:${process.env.PATH ?? ''}` };
    runs.set('busybox', run('busybox', ['sh', SCRIPT, '--batch'], batchInput, env));
  }
});

afterAll(() => {
  if (busyboxBin !== undefined) rmSync(busyboxBin, { recursive: true, force: true });
});

function checkBatch(result: ShellRun): void {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const lines = result.stdout.split('\n');
  expect(lines.pop()).toBe(''); // output ends with a newline
  expect(lines.length).toBe(cases.length);
  const mismatches: string[] = [];
  lines.forEach((line, i) => {
    if (line !== expected[i]) mismatches.push(`${JSON.stringify(cases[i])}: sh=${line} ts=${expected[i]}`);
  });
  expect(mismatches.slice(0, 10)).toEqual([]);
}

describe('spark/exec-svc-name.sh equals executorServiceName', () => {
  it('has at least 2,000 inputs, plain and hashed names, all valid DNS-1035 labels', () => {
    expect(cases.length).toBeGreaterThanOrEqual(2000);
    const hashed = cases.filter(({ app, exec }) => executorServiceName(app, exec) !== `svc-${app}-exec-${exec}`);
    expect(hashed.length).toBeGreaterThan(500);
    expect(cases.length - hashed.length).toBeGreaterThan(500);
    for (const name of expected) expect(isDns1035Label(name)).toBe(true);
  });

  it(`under sh${shIsDash ? ' (dash)' : ''}: every name byte for byte`, async () => {
    const result = await runs.get('sh');
    if (result === undefined) throw new Error('sh was not started');
    checkBatch(result);
    console.info(`sh: ${cases.length} names in ${result.ms} ms`);
  }, 60_000);

  it.skipIf(!dashAvailable || shIsDash)(
    'under dash: every name byte for byte',
    async () => {
      const result = await runs.get('dash');
      if (result === undefined) throw new Error('dash was not started');
      checkBatch(result);
    },
    60_000,
  );

  // busybox is optional on developer machines: `apt-get install -y busybox` enables this case
  it.skipIf(!busyboxAvailable)(
    'under busybox sh with busybox tr and sha256sum: every name byte for byte',
    async () => {
      const result = await runs.get('busybox');
      if (result === undefined) throw new Error('busybox sh was not started');
      checkBatch(result);
      console.info(`busybox sh: ${cases.length} names in ${result.ms} ms`);
    },
    60_000,
  );

  it('argument mode gives the same names, newlines included', async () => {
    const argCases: Case[] = [
      { app: 'spark-0123456789abcdef0123456789abcdef', exec: '17' },
      { app: 'My_App', exec: '3' },
      { app: 'line\nbreak', exec: '1' }, // only possible as an argument, not in --batch
      { app: 'tab\there', exec: '2\n' },
      { app: '🙂', exec: '' },
    ];
    const results = await Promise.all(argCases.map(({ app, exec }) => run('sh', [SCRIPT, app, exec], '')));
    results.forEach((result, i) => {
      const c = argCases[i];
      if (c === undefined) throw new Error('unreachable');
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`${executorServiceName(c.app, c.exec)}\n`);
    });
  });

  it('rejects wrong usage', async () => {
    const result = await run('sh', [SCRIPT, 'only-one'], '');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('usage');
  });
});

if (!busyboxAvailable) {
  console.info('naming-shell: busybox not installed, the busybox sh case is skipped (apt-get install -y busybox to run it)');
}
