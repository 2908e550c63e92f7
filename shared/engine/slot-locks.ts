/**
 * One event per executor slot at a time, in this process (the workqueue's guarantee in
 * controller-runtime: "the reconcileHandler is never invoked concurrently with the same object"):
 * a later event for a slot waits for the events deciding it (and then finds their writes
 * remembered), and a claimant window leaves slots held by others to them, instead of racing to
 * one create. An event waits for the others at its slots before it holds anything itself, so
 * that no two ever wait for each other.
 */
import type { SlotKey } from '../rules/decide.ts';

const slotLockKey = (namespace: string, slot: SlotKey): string => `${namespace}/${slot.appId}/${slot.execId}`;

/** The process-wide register: slot → the events holding it (each a promise that settles when that event is done). */
export class SlotLocks {
  private readonly held = new Map<string, Set<Promise<void>>>();

  get size(): number {
    return this.held.size;
  }

  /** One event's hold on some slots of one namespace. */
  holder(namespace: string): SlotHolder {
    return new SlotHolder(this.held, namespace);
  }
}

export class SlotHolder {
  private readonly keys: string[] = [];
  private readonly finished: Promise<void>;
  private finish: () => void = () => undefined;
  private readonly held: Map<string, Set<Promise<void>>>;
  private readonly namespace: string;

  constructor(held: Map<string, Set<Promise<void>>>, namespace: string) {
    this.held = held;
    this.namespace = namespace;
    this.finished = new Promise((resolve) => (this.finish = resolve));
  }

  async waitForOthers(slots: readonly SlotKey[]): Promise<void> {
    const others = slots.flatMap((slot) => [...(this.held.get(slotLockKey(this.namespace, slot)) ?? [])]);
    if (others.length > 0) await Promise.all(others);
  }

  hold(slots: readonly SlotKey[]): void {
    for (const slot of slots) {
      const key = slotLockKey(this.namespace, slot);
      let holders = this.held.get(key);
      if (holders === undefined) this.held.set(key, (holders = new Set()));
      holders.add(this.finished);
      this.keys.push(key);
    }
  }

  /** Those of `slots` no event of this process is deciding, now held by this one. */
  holdFree(slots: readonly SlotKey[]): SlotKey[] {
    const free = slots.filter((slot) => !this.held.has(slotLockKey(this.namespace, slot)));
    this.hold(free);
    return free;
  }

  release(): void {
    for (const key of this.keys.splice(0)) {
      const holders = this.held.get(key);
      holders?.delete(this.finished);
      if (holders?.size === 0) this.held.delete(key);
    }
    this.finish();
  }
}
