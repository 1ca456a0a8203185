/**
 * The uncordon an interrupted operation left pending (docs/architecture.md, "Recovery"). An
 * update that cordoned the node and was interrupted is recovered before the Kubernetes API can be
 * reached, so recovery closes the journal with `uncordonPending: true` instead of dropping the
 * uncordon. This unit holds that promise: it reads the flag from the closed journal at start,
 * takes the cordon back once Kubernetes is available (the daemon asks once ready, the engine
 * after every operation), clears the flag in the journal when done — by itself or by an
 * operator's `uncordon` — and says in `status` that the node is still cordoned meanwhile.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { readJournal, writeJournal, type Journal } from './journal.js';
import type { NodeDrainer } from './update.js';
import type { StatusWarning } from './warnings.js';

/** What `complete` did. */
export type PendingUncordonOutcome = 'none' | 'uncordoned' | 'unavailable' | 'failed';

export interface PendingUncordonOptions {
  stateDir: string;
  clock: Clock;
  logger: Logger;
  /** The uncordon of this node, or null while Kubernetes is not available (asked at each try). */
  drainer(): NodeDrainer | null;
  /** Why Kubernetes is not available, for the log. */
  unavailableReason(): string;
  /** Run `fn` while no operation runs or is admitted (`OperationSlot.exclusive`). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** Re-read the node after the uncordon. */
  refresh(): Promise<void>;
  /** Called after every change of the pending operation (an input of `status`). */
  onChange(): void;
}

export class PendingUncordon {
  readonly #o: PendingUncordonOptions;
  /** The interrupted operation whose cordon is still on the node (journal `uncordonPending`), or null. */
  #id: string | null = null;
  #completing: Promise<PendingUncordonOutcome> | null = null;

  constructor(options: PendingUncordonOptions) {
    this.#o = options;
  }

  /** The interrupted operation whose cordon agentd still has to take back, or null. */
  get id(): string | null {
    return this.#id;
  }

  #set(id: string | null): void {
    this.#id = id;
    this.#o.onChange();
  }

  /** After startup recovery: the closed journal (as recovery left it) says whether an uncordon is pending. */
  load(journal: Journal | null): void {
    this.#set(journal?.closed && journal.uncordonPending ? journal.operationId : null);
  }

  /**
   * Take the cordon back: uncordon when the Kubernetes API is available and clear the journal's
   * flag; otherwise log that the node is still cordoned and keep the flag. Concurrent callers
   * share one try. Never throws.
   */
  complete(): Promise<PendingUncordonOutcome> {
    this.#completing ??= this.#complete().finally(() => {
      this.#completing = null;
    });
    return this.#completing;
  }

  async #complete(): Promise<PendingUncordonOutcome> {
    const id = this.#id;
    if (id === null) return 'none';
    const log = this.#o.logger.child({ interruptedOperation: id });
    try {
      const drainer = this.#o.drainer();
      if (!drainer) {
        log.warn(
          { reason: this.#o.unavailableReason() },
          `the node is still cordoned by interrupted operation ${id} and the Kubernetes API is not available; once it is, run agentctl uncordon`,
        );
        return 'unavailable';
      }
      // Under the slot, so that no update's cordon or drain interleaves with this uncordon.
      const done = await this.#o.exclusive(async () => {
        // An operator's `uncordon` may have done it meanwhile.
        if (this.#id !== id) return false;
        await drainer.uncordon();
        await this.clear();
        return true;
      });
      if (!done) return 'none';
      log.info(`uncordoned the node: interrupted operation ${id} had cordoned it`);
      await this.#o.refresh().catch(() => undefined);
      return 'uncordoned';
    } catch (err) {
      log.warn(
        { err: describeError(err) },
        `the node is still cordoned by interrupted operation ${id}: the uncordon failed; agentd retries after the next operation, or run agentctl uncordon`,
      );
      return 'failed';
    }
  }

  /**
   * The pending uncordon is done: clear the flag in the journal (atomically). Only while no
   * operation writes the journal: under `exclusive`, or from the `uncordon` operation itself.
   */
  async clear(): Promise<void> {
    if (this.#id === null) return;
    const journal = await readJournal(this.#o.stateDir);
    if (journal?.closed && journal.uncordonPending) {
      await writeJournal(this.#o.stateDir, {
        ...journal,
        uncordonPending: false,
        updatedAt: new Date(this.#o.clock.now()).toISOString(),
      });
    }
    this.#set(null);
  }

  /** What `status` warns while the cordon is still on the node, or null. */
  warning(): StatusWarning | null {
    const id = this.#id;
    if (id === null) return null;
    return {
      code: 'pending-uncordon',
      operationId: id,
      message: `the node is still cordoned by interrupted operation ${id}: run agentctl uncordon`,
    };
  }
}
