/**
 * The one place the tests find kubectl. The manifest tests need kustomize v5 (`kubectl kustomize`
 * of knative/ uses `labels:` and `replacements:`; kubectl >= 1.27 embeds it), the lifecycle and
 * uninstall tests a kubectl that talks to the API-server emulator.
 *
 * Where, in order: $KUBECTL; the kubectl e2e/build.sh builds from the published k8s.io/kubectl module
 * into the component cache (.ci/run builds it before `npm test`, so a fresh machine has one); then
 * PATH, only if its kustomize is v5 (Debian's kubectl 1.20 is not).
 * Missing: outside CI the tests that need it are skipped with the reason printed; under CI=true they
 * run and fail on `requireKubectl()` with the reason, never pass silently.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const IN_CI = /^(1|true|yes)$/i.test(process.env['CI'] ?? '');

export interface KubectlLookup {
  readonly path: string | undefined;
  /** Where it was found, or why none was. */
  readonly reason: string;
}

/** Kustomize's major version as `kubectl version --client -o json` reports it, or undefined. */
export function kustomizeMajor(kubectl: string): number | undefined {
  const r = spawnSync(kubectl, ['version', '--client', '-o', 'json'], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) return undefined;
  try {
    const v = (JSON.parse(r.stdout) as { kustomizeVersion?: unknown }).kustomizeVersion;
    const m = typeof v === 'string' ? /^v(\d+)\./.exec(v) : null;
    return m === null ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

/** The kubectl in the e2e component cache, without building (e2e/build.sh --paths; needs go and jq). */
export function cachedKubectl(): string | undefined {
  const r = spawnSync(path.join(REPO_ROOT, 'e2e/build.sh'), ['--paths', 'kubectl'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) return undefined;
  try {
    const p = (JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as { kubectl?: unknown }).kubectl;
    return typeof p === 'string' && existsSync(p) ? p : undefined;
  } catch {
    return undefined;
  }
}

function lookUp(): KubectlLookup {
  const fromEnv = process.env['KUBECTL'];
  if (fromEnv !== undefined && fromEnv !== '') {
    return existsSync(fromEnv)
      ? { path: fromEnv, reason: `$KUBECTL=${fromEnv}` }
      : { path: undefined, reason: `$KUBECTL=${fromEnv} does not exist` };
  }
  const cached = cachedKubectl();
  if (cached !== undefined) return { path: cached, reason: `e2e component cache: ${cached}` };
  const onPath = (process.env['PATH'] ?? '')
    .split(path.delimiter)
    .filter((d) => d !== '')
    .map((d) => path.join(d, 'kubectl'));
  const tooOld: string[] = [];
  for (const candidate of new Set(onPath.filter((p) => existsSync(p)))) {
    const major = kustomizeMajor(candidate);
    if (major !== undefined && major >= 5) return { path: candidate, reason: `PATH: ${candidate}` };
    tooOld.push(`${candidate} (kustomize ${major === undefined ? 'unknown' : `v${major}`})`);
  }
  return {
    path: undefined,
    reason:
      `no kubectl with kustomize v5: not $KUBECTL, not built in the e2e cache (run \`e2e/build.sh kubectl\`; .ci/run does)` +
      (tooOld.length > 0 ? `, and on PATH only ${tooOld.join(', ')}` : ', none on PATH'),
  };
}

let found: KubectlLookup | undefined;
export function findKubectl(): KubectlLookup {
  found ??= lookUp();
  return found;
}

/**
 * Whether `testFile`'s tests of `what` are skipped: only when kubectl is missing outside CI (the
 * reason is printed). Under CI=true they are not skipped, and `requireKubectl()` fails them.
 */
export function skipWithoutKubectl(testFile: string, what: string): boolean {
  const k = findKubectl();
  if (k.path !== undefined) return false;
  if (IN_CI) {
    console.error(`[${testFile}] CI=true and ${k.reason}: ${what} will FAIL`);
    return false;
  }
  console.warn(`[${testFile}] SKIPPING ${what}: ${k.reason}`);
  return true;
}

/** kubectl's path; throws with the reason when there is none (reached under CI, or when not skipped). */
export function requireKubectl(): string {
  const k = findKubectl();
  if (k.path === undefined) throw new Error(`kubectl is required${IN_CI ? ' in CI (CI=true)' : ''}: ${k.reason}`);
  return k.path;
}
