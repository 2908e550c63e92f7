/**
 * Issue 17, class 8: clocks skewed between function instances. A gone mark written by one
 * instance starts the cool-down (COOLDOWN_SECONDS, README: "cool-down over → the Service is
 * deleted"); its end is judged by whichever instance sees the Service next. The cool-down must be
 * the same whichever instances mark and judge it, so it is measured on the one clock they share:
 * the API server's. On main each used its own clock: an instance 20 minutes ahead deleted the
 * Service another had just marked (0 s of the 300 s cool-down), and one 13 minutes behind kept a
 * Service 13 minutes past it.
 *
 * Here the API server's clock (the emulator's) stands still unless the test moves it; the
 * instances' own clocks run on, one 20 minutes ahead of the real clock, one 13 minutes behind
 * it. The invariant (both halves, testkit/oracle.ts) is read after every step.
 */
import { describe, expect, it } from 'vitest';
import { executorServiceName } from '../../shared/model/naming.ts';
import { GONE_AT, type Obj as SvcObj } from '../../testkit/oracle.ts';
import { sparkAppId } from '../../testkit/spark-pods.ts';
import { NS, audited, useAudit } from '../support/audited.ts';
import { current, scene, victimApp } from './support/tenant-scene.ts';

useAudit();

const COOLDOWN_SECONDS = 300;
const AHEAD_MS = 20 * 60_000;
const BEHIND_MS = 13 * 60_000;

describe('issue 17, class 8: the cool-down is judged by the API server’s clock, whatever the instances’ clocks say', () => {
  it('marked by one instance, judged by another 33 minutes apart: deleted neither sooner nor later than 300 s of the API server’s time', async () => {
    let serverNow = Date.parse('2026-12-04T12:00:00Z');
    const s = await scene(
      { COOLDOWN_SECONDS: String(COOLDOWN_SECONDS) },
      { apiServerClock: () => new Date(serverNow), localClock: () => new Date(Date.now() - BEHIND_MS) },
    );
    const behind = s.h;
    const ahead = await audited(
      { COOLDOWN_SECONDS: String(COOLDOWN_SECONDS) },
      { emulator: s.h.emulator, localClock: () => new Date(Date.now() + AHEAD_MS) },
    );
    const service = (execId: string): SvcObj | undefined =>
      s.h.emulator.getObject('services', NS, executorServiceName(v.appId, execId)) as unknown as SvcObj | undefined;
    const v = await victimApp(s, { appId: sparkAppId(8101), driverName: 'skew-driver', execIds: ['1', '2', '3'] });

    // Executor 2 ends; the instance whose clock is behind marks its Service.
    const e2 = v.execs.get('2')!;
    s.change('executor 2 deleted', () => s.h.emulator.deleteObject('pods', NS, e2.metadata.name));
    s.genuine.delete(e2.metadata.name);
    expect((await s.event('delete', e2, behind)).data?.action).toBe('marked-gone');
    const markedAt = service('2')?.metadata.annotations?.[GONE_AT];
    expect(markedAt, 'the mark is the API server’s time, in whole seconds').toBe(new Date(serverNow).toISOString());

    // The instance 33 minutes ahead of it sees the marked Service: the cool-down has not begun to run out.
    const kept = (why: string) => expect(service('2'), `executor 2's Service kept: ${why}`).toBeDefined();
    await s.sweep('sweep by the instance ahead, 0 s into the cool-down', ahead);
    kept('0 s of 300 s, sweep by the instance 33 min ahead of the marker');
    expect((await s.event('delete', e2, ahead)).data?.action, 'a late delete event at the instance ahead').toBe('verified');
    kept('0 s of 300 s, late event at the instance ahead');

    serverNow += (COOLDOWN_SECONDS - 1) * 1000;
    await s.sweep('sweep by the instance ahead, 299 s into the cool-down', ahead);
    await s.sweep('sweep by the instance behind, 299 s into the cool-down', behind);
    kept('299 s of 300 s');

    serverNow += 1000;
    await s.sweep('sweep by the instance ahead, 300 s into the cool-down', ahead);
    expect(service('2'), 'cool-down over by the API server’s clock: deleted').toBeUndefined();

    // The other way round: the instance ahead marks, the one behind judges — no 33 minutes more.
    const e3 = v.execs.get('3')!;
    s.change('executor 3 deleted', () => s.h.emulator.deleteObject('pods', NS, e3.metadata.name));
    s.genuine.delete(e3.metadata.name);
    expect((await s.event('delete', e3, ahead)).data?.action).toBe('marked-gone');
    expect(service('3')?.metadata.annotations?.[GONE_AT]).toBe(new Date(serverNow).toISOString());
    serverNow += (COOLDOWN_SECONDS - 1) * 1000;
    await s.sweep('sweep by the instance behind, 299 s into executor 3’s cool-down', behind);
    expect(service('3'), 'executor 3’s Service kept at 299 s').toBeDefined();
    serverNow += 1000;
    expect((await s.event('update', current(s.h, v.execs.get('1')!.metadata.name), behind)).data?.action).toBe('verified');
    await s.sweep('sweep by the instance behind, 300 s into executor 3’s cool-down', behind);
    expect(service('3'), 'cool-down over by the API server’s clock: deleted by the instance behind').toBeUndefined();

    // Executor 1 ran throughout: its Service was never marked (the invariant, read after every step, says so too).
    expect(service('1')?.metadata.annotations?.[GONE_AT]).toBeUndefined();
  });
});
