/**
 * Issue 16 scenario 5, "Emulator fidelity": the same request sequence (fidelity-script.ts) sent to
 * the emulator (packages/kube-emulator, in process on loopback) and to the harness's real
 * kube-apiserver; each answer projected onto the fields our code reads and compared. Every
 * difference must be listed, with its reason, in DOCUMENTED; the test fails on any other.
 */
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { type KubeEmulator, startEmulator } from '../../packages/kube-emulator/index.ts';
import { ensureNamespace, rawRequest } from '../adapter/kube-access.ts';
import { type ScenarioCluster, scenarioCluster } from './cluster.ts';
import { type Answer, DOCUMENTED, NS, project, remember, SCRIPT, type SideContext, type Step } from './fidelity-script.ts';
import { writeJsonReport } from './report-file.ts';

type Send = (method: string, path: string, body: unknown, contentType: string) => Promise<Answer>;

let cluster: ScenarioCluster;
let emulator: KubeEmulator;

async function emulatorSend(method: string, path: string, body: unknown, contentType: string): Promise<Answer> {
  const res = await fetch(new URL(path, emulator.url), {
    method,
    headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': contentType }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as unknown };
  } catch {
    return { status: res.status, body: text };
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function run(send: Send, ctx: SideContext, step: Step): Promise<Answer> {
  const path = typeof step.path === 'function' ? step.path(ctx) : step.path;
  const body = typeof step.body === 'function' ? (step.body as (c: SideContext) => unknown)(ctx) : step.body;
  // The real GC works within seconds; 30 s bounds it.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await send(step.method, path, body, step.contentType ?? 'application/json');
    if (step.until === undefined || step.until(answer) || Date.now() > deadline) {
      remember(ctx, answer);
      return answer;
    }
    await sleep(250);
  }
}

const newContext = (): SideContext => ({ uid: new Map(), rv: new Map(), continueToken: '' });

beforeAll(async () => {
  cluster = await scenarioCluster('emulator-fidelity', { kubelet: false });
  if (cluster.endpoints.createNamespace !== undefined) await cluster.endpoints.createNamespace(NS);
  else await ensureNamespace(cluster.endpoints.admin, NS);
  emulator = await startEmulator();
});

afterAll(async () => {
  await emulator?.stop();
  await cluster?.stop();
});

test('the emulator answers the request sequence as the real API server does, but for the documented differences', async () => {
  const admin = cluster.endpoints.admin;
  const realSend: Send = (method, path, body, contentType) => rawRequest(admin, method, path, body, contentType);
  const realCtx = newContext();
  const emuCtx = newContext();
  const differences: Array<{ step: string; real: unknown; emulator: unknown; documented: string | undefined }> = [];
  for (const step of SCRIPT) {
    const real = project(await run(realSend, realCtx, step));
    const emu = project(await run(emulatorSend, emuCtx, step));
    if (!isDeepStrictEqual(real, emu)) differences.push({ step: step.name, real, emulator: emu, documented: DOCUMENTED.get(step.name) });
  }
  const undocumented = differences.filter((d) => d.documented === undefined);
  const report = {
    requestsCompared: SCRIPT.length,
    differences: differences.length,
    documented: differences.length - undocumented.length,
    undocumented: undocumented.length,
    stale: [...DOCUMENTED.keys()].filter((k) => !differences.some((d) => d.step === k)),
    details: differences,
  };
  const file = writeJsonReport(cluster.endpoints.logDir, 'emulator-fidelity.json', report);
  console.log(
    `emulator fidelity: ${report.requestsCompared} requests compared, ${report.differences} differences (${report.documented} documented, ${report.undocumented} undocumented); report ${file}`,
  );
  for (const d of differences)
    console.log(
      `  ${d.documented === undefined ? 'UNDOCUMENTED' : 'documented'}: ${d.step}\n    real:     ${JSON.stringify(d.real)}\n    emulator: ${JSON.stringify(d.emulator)}`,
    );
  expect(undocumented).toEqual([]);
  // A documented difference that no longer shows is a stale entry: the list must say what is true.
  expect(report.stale).toEqual([]);
});
