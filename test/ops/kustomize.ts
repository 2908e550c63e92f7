/**
 * `kubectl kustomize` of the repository's knative/ tree as a user builds it: knative/base/image.env
 * has no IMAGE until the user sets one (the build fails on purpose), so the tests build a copy of
 * knative/ and spark/ in which IMAGE is set, as docs/deploy.md's first step says.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The image the tests set, pinned by digest as a release writes it. */
export const TEST_IMAGE = `registry.example.com/team/spark-exec-svc@sha256:${'0123456789abcdef'.repeat(4)}`;

export { requireKubectl, skipWithoutKubectl } from '../../testkit/kubectl.ts';

/** A copy of knative/ and spark/ (the only trees the kustomizations read) with IMAGE set. */
export function configuredTree(image: string = TEST_IMAGE): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'sxs-kustomize-'));
  for (const dir of ['knative', 'spark']) cpSync(path.join(REPO_ROOT, dir), path.join(root, dir), { recursive: true });
  writeFileSync(path.join(root, 'knative/base/image.env'), `IMAGE=${image}\n`);
  return root;
}

let shared: string | undefined;
/** One configured copy per test process. */
export function sharedConfiguredTree(): string {
  shared ??= configuredTree();
  return shared;
}

/** `kubectl kustomize <dir>` (relative to `root`), every document parsed. */
export async function kustomizeObjects<T = Record<string, unknown>>(
  kubectl: string,
  dir: string,
  root: string = sharedConfiguredTree(),
): Promise<T[]> {
  const { stdout } = await promisify(execFile)(kubectl, ['kustomize', dir], { cwd: root, maxBuffer: 16 * 1024 * 1024 });
  const docs = loadAll(stdout).filter((d) => d !== null && d !== undefined);
  for (const d of docs) if (typeof d !== 'object' || Array.isArray(d)) throw new Error(`${dir}: a document is not an object`);
  return docs as T[];
}
