/**
 * Issue 17, class 3: the cap as a denial of service. The issue's reproduction (2,000 Pending pods,
 * an opted-in Pending "driver", 63 add events fill the default cap) no longer makes a Service since
 * class 2 (a Pending pod claims nothing) — kept below as a regression. What a tenant who may create
 * pods could still do on main, reproduced here:
 *  - run the pods: a pod whose container exits at once under restartPolicy Always stays in phase
 *    Running (CrashLoopBackOff) and costs next to no compute; one application of such executors
 *    took the whole MAX_SERVICES_PER_NAMESPACE, and every other application's executors were
 *    skipped at the cap;
 *  - churn: one running pod at a time, each given its Service and then ended, leaves gone-marked
 *    Services that fill the cap for the cool-down (for good with COOLDOWN_SECONDS=0).
 *
 * Expected (issue 17, "Caps that cannot be turned against users"; README configuration table):
 * one application holds at most MAX_SERVICES_PER_APPLICATION Services of ours (default: half the
 * namespace cap), so it cannot starve another; dead executors' Services give way (class 4). The
 * invariant (testkit/oracle.ts: a missing Service is excused only while Services that are not
 * gone-marked fill the cap with no application over its bound, or fill its own application's
 * bound) is checked after every step.
 */
import { describe, expect, it } from 'vitest';
import { type PodBody, driverPod, executorPod, sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import type { Harness } from '../../testkit/harness.ts';
import { PORT, app, check, fail, ok, ours, ref, serviceIn, svcName, sweepTo } from './support/steps.ts';

useAudit();

const CAP = 8;
/** The documented default of MAX_SERVICES_PER_APPLICATION: half of MAX_SERVICES_PER_NAMESPACE. */
const APP_CAP = CAP / 2;

const ofApp = (h: Harness, appId: string): number =>
  h.emulator.listObjects('services', NS, `app.kubernetes.io/managed-by=spark-exec-svc,spark-app-selector=${appId}`).length;

/** A tenant's "application": an opted-in pod that runs, and executors that name it as their owner. */
function tenantApp(h: Harness, seed: number): { appId: string; exec: (id: number, phase?: string) => PodBody } {
  const appId = sparkAppId(seed);
  const owner = h.createPod(driverPod({ namespace: NS, appId, name: `tenant-${seed}`, optIn: true }));
  return {
    appId,
    exec: (id, phase = 'Running') =>
      h.createPod(
        executorPod({
          namespace: NS,
          appId,
          execId: String(id),
          name: `tenant-${seed}-${id}`,
          driver: ref(owner),
          blockManagerPort: PORT,
          optIn: true,
          phase,
        }),
      ),
  };
}

describe('issue 17, class 3: one application cannot fill the namespace’s cap', () => {
  it(`cap ${CAP}: a tenant’s application of ${CAP} running executors holds at most ${APP_CAP}; a victim’s executors get theirs`, async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: String(CAP) });
    const genuine = new Set<string>();
    const step = (what: string): void => check(h.emulator, genuine, what, CAP, APP_CAP);
    const tenant = tenantApp(h, 17_301);
    const copies = Array.from({ length: CAP }, (_, k) => tenant.exec(k + 1));
    for (const pod of copies) {
      const reply = await ok(h.send('add', pod), `tenant add ${pod.metadata.name}`);
      step(`tenant add ${pod.metadata.name} → ${reply.data?.action}`);
    }
    expect(ofApp(h, tenant.appId), 'the tenant’s application is held to its bound').toBeLessThanOrEqual(APP_CAP);
    const victim = app(h, sparkAppId(17_302));
    const execs = [victim.exec(1), victim.exec(2)];
    for (const p of execs) genuine.add(p.metadata.name);
    for (const p of execs) {
      const reply = await ok(h.send('add', p), `victim add ${p.metadata.name}`);
      step(`victim add ${p.metadata.name} → ${reply.text}`);
      expect(
        serviceIn(h.emulator, svcName(victim.appId, p.metadata.labels['spark-exec-id']!)),
        `victim’s Service: ${reply.text}`,
      ).toBeDefined();
    }
    await ok(sweepTo(h.url), 'sweep');
    step('sweep');
    expect(ofApp(h, tenant.appId)).toBeLessThanOrEqual(APP_CAP);
    expect(ours(h.emulator)).toBeLessThanOrEqual(CAP);
  });

  it(`cap ${CAP}, COOLDOWN_SECONDS=0: a tenant churning one running pod at a time cannot fill the cap with dead executors’ Services`, async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: String(CAP), COOLDOWN_SECONDS: '0' });
    const genuine = new Set<string>();
    const step = (what: string): void => check(h.emulator, genuine, what, CAP, APP_CAP);
    const tenant = tenantApp(h, 17_311);
    for (let id = 1; id <= 2 * CAP; id++) {
      const pod = tenant.exec(id);
      await ok(h.send('add', pod), `tenant add ${id}`);
      const failed = fail(h.emulator, pod);
      h.emulator.deleteObject('pods', NS, pod.metadata.name);
      await ok(h.send('delete', failed), `tenant delete ${id}`);
      step(`tenant churn ${id}`);
    }
    const victim = app(h, sparkAppId(17_312));
    const exec = victim.exec(1);
    genuine.add(exec.metadata.name);
    const reply = await ok(h.send('add', exec), 'victim add');
    step(`victim add → ${reply.text}`);
    expect(serviceIn(h.emulator, svcName(victim.appId, 1)), `victim’s Service: ${reply.text}`).toBeDefined();
  });

  it('regression (closed by class 2): Pending copies, a Pending opted-in "driver" and their add events make no Service', async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: String(CAP) });
    const appId = sparkAppId(17_321);
    const owner = h.createPod(driverPod({ namespace: NS, appId, name: 'tenant-pending-driver', optIn: true, phase: 'Pending' }));
    for (let id = 1; id <= 5 * CAP; id++) {
      const body = executorPod({
        namespace: NS,
        appId,
        execId: String(id),
        name: `pending-${id}`,
        driver: ref(owner),
        blockManagerPort: PORT,
        optIn: true,
        phase: 'Pending',
      });
      delete (body.status as { podIP?: string }).podIP;
      const pod = h.createPod(body);
      if (id % 8 === 1) await ok(h.send('add', pod), `add of pending ${id}`);
    }
    expect(ours(h.emulator)).toBe(0);
    const victim = app(h, sparkAppId(17_322));
    const exec = victim.exec(1);
    await ok(h.send('add', exec), 'victim add');
    check(h.emulator, new Set([exec.metadata.name]), 'victim add after Pending copies', CAP, APP_CAP);
  });

  it(`what is left: a tenant with ${CAP / APP_CAP} application ids (labels are free) and ${CAP} running pods still fills cap ${CAP}`, async () => {
    const h = await audited({ MAX_SERVICES_PER_NAMESPACE: String(CAP) });
    const tenants = Array.from({ length: CAP / APP_CAP }, (_, k) => tenantApp(h, 17_331 + k));
    for (const t of tenants) {
      const pods = Array.from({ length: APP_CAP }, (_, k) => t.exec(k + 1));
      await ok(h.send('add', pods[0]!), `first add of ${t.appId}`);
    }
    expect(ours(h.emulator), 'the namespace is full of live (running) Services; the admission policy is the remedy').toBe(CAP);
    const victim = app(h, sparkAppId(17_339));
    const exec = victim.exec(1);
    const reply = await ok(h.send('add', exec), 'victim add');
    expect(reply.text).toMatch(/MAX_SERVICES_PER_NAMESPACE/);
    check(h.emulator, new Set([exec.metadata.name]), 'a full namespace, no application over its bound', CAP, APP_CAP);
  });
});
