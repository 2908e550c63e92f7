/** Slots grouped and deduplicated, work cut into chunks and run a few at a time: how one batch of reads or writes is shaped. */
import type { SlotKey } from '../rules/decide.ts';

export const slotKey = (slot: SlotKey): string => `${slot.appId}\u0000${slot.execId}`;

export function uniqueSlots(slots: readonly SlotKey[]): SlotKey[] {
  const seen = new Map<string, SlotKey>();
  for (const slot of slots) seen.set(slotKey(slot), { appId: slot.appId, execId: slot.execId });
  return [...seen.values()];
}

export function groupByApp(slots: readonly SlotKey[]): Map<string, SlotKey[]> {
  const groups = new Map<string, SlotKey[]>();
  for (const slot of uniqueSlots(slots)) groups.set(slot.appId, [...(groups.get(slot.appId) ?? []), slot]);
  return groups;
}

export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Runs `work` over `items` with at most `limit` at once. The first failure fails the whole, once
 * the work already started has settled (nothing of an answered event is left running) and
 * without starting more.
 */
export async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && failure === undefined) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
}
