/**
 * The container's loader refuses an old Node in one line (package.json "engines"), instead of the
 * bundle crashing inside a dependency with a dump of minified code. Run with the machine's own
 * node when it is older than the bound (the project's npm scripts run the pinned Node 22).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const engines = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
const [minMajor, minMinor] = engines
  .replace(/^>=\s*/, '')
  .split('.')
  .map(Number) as [number, number];
const older = (v: string) => {
  const [a = 0, b = 0] = v.replace(/^v/, '').split('.').map(Number);
  return a < minMajor || (a === minMajor && b < minMinor);
};
const systemNode = ['/usr/bin/node', '/usr/local/bin/node'].find(
  (p) => existsSync(p) && older(spawnSync(p, ['--version'], { encoding: 'utf8' }).stdout.trim()),
);

describe('dist/start.cjs and the Node version', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sxs-guard-'));
    const built = spawnSync(process.execPath, ['scripts/bundle.ts', dir], { cwd: ROOT, encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`bundle failed: ${built.stderr}`);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("the loader's bound is package.json's engines", () => {
    expect(engines).toMatch(/^>=\d+\.\d+\.\d+$/);
    expect(readFileSync(path.join(ROOT, 'functions/executor-service/start.ts'), 'utf8')).toContain(
      `const MIN_NODE = [${minMajor}, ${minMinor}] as const;`,
    );
  });

  it.skipIf(systemNode === undefined)('an older node exits 1 with one line naming the bound and its own version', () => {
    const r = spawnSync(systemNode!, [path.join(dir, 'start.cjs')], { encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } });
    const version = spawnSync(systemNode!, ['--version'], { encoding: 'utf8' }).stdout.trim();
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`spark-exec-svc needs Node >= ${minMajor}.${minMinor}, this is ${version}\n`);
  });
});
