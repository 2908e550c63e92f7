/**
 * A ReconcileContext around a stub KubeClient, for tests of the engine's reads (shared/engine/
 * observe.ts) that hold API answers open or fail them: the configuration the reads use, a clock the
 * test may move, a silent log and an empty memory.
 */
import type { ReconcileContext } from '../shared/engine/context.ts';
import { FactCache } from '../shared/engine/memory.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import type { Config } from '../shared/ops/config.ts';

export function stubReconcileContext(client: KubeClient, now: () => Date = () => new Date('2026-12-05T12:00:00Z')): ReconcileContext {
  return {
    client,
    config: { defaultBlockManagerPort: 7079, sweepPageSize: 500 } as unknown as Config,
    now,
    log: { debug() {}, info() {}, warn() {}, error() {} },
    facts: new FactCache(),
  };
}
