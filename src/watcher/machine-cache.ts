/**
 * The node's Machine as the watcher last saw it: from the watch (the list, and every event after
 * it) and from its own status writes (the Machine as written). A reconcile starts from it instead
 * of a read, as a controller reads from its informer's cache: the watch is what told it to
 * reconcile, so the cache is at least as new as the change it reconciles (docs/watcher.md,
 * "Reconcile").
 *
 * Its own writes: once a write returned the Machine at resourceVersion W, the watch still has the
 * events before W to deliver (others' changes, or its own earlier writes) and would take the cache
 * back to an older Machine. So after a write the cache keeps the written Machine and passes over
 * events until the watch delivers W itself; from then on it follows the watch again. Events are
 * delivered in the order of their resourceVersions, so nothing newer than W is passed over. The
 * watch may also deliver W before the write's answer arrives (two connections): a write whose
 * version the watch has delivered already changes nothing.
 */
import type { Machine } from '../kube/index.js';

/** How many delivered resourceVersions are kept: more than the writes one reconcile makes. */
const SEEN_KEPT = 32;

export class MachineCache {
  #machine: Machine | undefined;
  /** The resourceVersion of the last write whose event the watch has not delivered yet. */
  #awaiting: string | null = null;
  /** The resourceVersions the watch delivered since the last list (the latest few). */
  readonly #seen = new Set<string>();

  /** The Machine last seen, or undefined when none is known (before the first list, after a delete). */
  get(): Machine | undefined {
    return this.#machine;
  }

  /** The Machine as a list (a read) found it: newer than anything before. */
  listed(machine: Machine | undefined): void {
    this.#machine = machine;
    this.#awaiting = null;
    this.#seen.clear();
    this.#see(machine?.metadata.resourceVersion);
  }

  /** An ADDED or MODIFIED event of the watch. */
  observed(machine: Machine): void {
    this.#see(machine.metadata.resourceVersion);
    if (this.#awaiting !== null) {
      if (machine.metadata.resourceVersion !== this.#awaiting) return;
      this.#awaiting = null;
    }
    this.#machine = machine;
  }

  /** The Machine was deleted: nothing is known until the next list. */
  deleted(): void {
    this.#machine = undefined;
    this.#awaiting = null;
    this.#seen.clear();
  }

  /** A write of the watcher returned `machine` (the Machine as the server now has it). */
  wrote(machine: Machine): void {
    const rv = machine.metadata.resourceVersion;
    // Delivered already (or a write that wrote nothing, answering the Machine it read).
    if (rv === undefined || this.#seen.has(rv)) return;
    this.#machine = machine;
    this.#awaiting = rv;
  }

  #see(rv: string | undefined): void {
    if (rv === undefined) return;
    this.#seen.add(rv);
    if (this.#seen.size > SEEN_KEPT) this.#seen.delete(this.#seen.values().next().value as string);
  }
}
