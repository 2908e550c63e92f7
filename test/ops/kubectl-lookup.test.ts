/**
 * How the tests find kubectl (testkit/kubectl.ts), from what .ci/run promises: on a fresh machine a
 * test that needs kubectl either gets one with kustomize v5 or, under CI=true, FAILS saying why —
 * it never passes by skipping. Outside CI it is skipped with the reason printed. A kubectl on PATH
 * whose kustomize is older than v5 (Debian's kubectl 1.20) does not count.
 * Each case runs in a child process with its own environment: no kubectl anywhere (an empty
 * component cache, a PATH without one), or a PATH with a kubectl 1.20 stand-in.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = mkdtempSync(path.join(os.tmpdir(), 'sxs-kubectl-lookup-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const emptyCache = path.join(work, 'cache');
mkdirSync(emptyCache);
// A PATH with every command of this machine's PATH but kubectl (e2e/build.sh --paths must still run
// and answer "not built" for the empty cache).
const noKubectlBin = path.join(work, 'bin');
mkdirSync(noKubectlBin);
for (const dir of (process.env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== '' && existsSync(d))) {
  for (const name of readdirSync(dir)) {
    if (name !== 'kubectl' && !existsSync(path.join(noKubectlBin, name))) symlinkSync(path.join(dir, name), path.join(noKubectlBin, name));
  }
}
const basePath = [noKubectlBin];

// Debian's kubectl 1.20 answers `version --client -o json` without a kustomizeVersion.
const oldBin = path.join(work, 'old-bin');
mkdirSync(oldBin);
writeFileSync(path.join(oldBin, 'kubectl'), '#!/bin/sh\necho \'{"clientVersion":{"major":"1","minor":"20","gitVersion":"v1.20.15"}}\'\n');
chmodSync(path.join(oldBin, 'kubectl'), 0o755);

/** Runs `script` (an ES module body with testkit/kubectl.ts imported as k) in a child node. */
function inChild(script: string, env: Record<string, string>) {
  const body = `import * as k from ${JSON.stringify(path.join(ROOT, 'testkit/kubectl.ts'))};\n${script}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', body], {
    encoding: 'utf8',
    env: { HOME: os.homedir(), SPARK_EXEC_SVC_E2E_CACHE: emptyCache, KUBECTL: '', ...env },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const PROBE = `
let skip, error = null;
skip = k.skipWithoutKubectl('probe.test', 'the probe');
try { console.log('kubectl=' + k.requireKubectl()); } catch (e) { error = e.message; }
console.log(JSON.stringify({ skip, error }));
`;
const result = (stdout: string) => JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { skip: boolean; error: string | null };

describe('testkit/kubectl.ts', () => {
  it('no kubectl under CI=true: not skipped, fails saying what is missing and how to get it', () => {
    for (const CI of ['true', '1']) {
      const r = inChild(PROBE, { CI, PATH: basePath.join(path.delimiter) });
      const { skip, error } = result(r.stdout);
      expect(skip).toBe(false);
      expect(error).toMatch(/kubectl is required in CI \(CI=true\)/);
      expect(error).toMatch(/e2e\/build\.sh kubectl/);
      expect(r.stderr).toMatch(/\[probe\.test\] CI=true .* the probe will FAIL/);
    }
  });

  it('no kubectl outside CI: skipped, with the reason printed', () => {
    const r = inChild(PROBE, { PATH: basePath.join(path.delimiter) });
    expect(result(r.stdout).skip).toBe(true);
    expect(r.stderr).toMatch(/\[probe\.test\] SKIPPING the probe: no kubectl with kustomize v5/);
  });

  it('a kubectl 1.20 on PATH does not count (its kustomize is not v5)', () => {
    const r = inChild(PROBE, { CI: 'true', PATH: [oldBin, ...basePath].join(path.delimiter) });
    const { skip, error } = result(r.stdout);
    expect(skip).toBe(false);
    expect(error).toContain(`${path.join(oldBin, 'kubectl')} (kustomize unknown)`);
  });

  it('$KUBECTL naming a missing file is an error, not a fallback', () => {
    const r = inChild(PROBE, { CI: 'true', PATH: basePath.join(path.delimiter), KUBECTL: path.join(work, 'nope') });
    expect(result(r.stdout).error).toContain(`$KUBECTL=${path.join(work, 'nope')} does not exist`);
  });
});
