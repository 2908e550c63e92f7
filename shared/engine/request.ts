import type { ServiceFact } from '../model/service-spec.ts';
import type { PodFact } from '../model/spark-pod.ts';
import type { SlotKey } from '../rules/decide.ts';
import type { Look } from '../rules/plan.ts';

/** One reconciliation: slots of one namespace, what the caller already read, and how to look (shared/rules/plan.ts). */
export interface ReconcileRequest {
  readonly namespace: string;
  readonly slots: readonly SlotKey[];
  /** Facts the caller read for this request (fresh). */
  readonly read?:
    | {
        readonly pods?: ReadonlyArray<PodFact | { readonly absent: string }>;
        readonly services?: ReadonlyArray<{ readonly slot: SlotKey; readonly service: ServiceFact | 'absent' }>;
      }
    | undefined;
  /** Pods the caller only heard of (a sweep page, perhaps from an old list snapshot): they prompt reads, never prove anything. */
  readonly hintPods?: readonly PodFact[];
  /** Absent: everything read, nothing shared, nobody waited for (LOOK_AFRESH). */
  readonly look?: Look;
}
