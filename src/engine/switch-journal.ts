import type { MachineName } from '../host/types.js';
import type { DeferredWrites } from './deferred-writes.js';
import { journalPath, writeJournal, type Journal } from './journal.js';
import type { StateReserve } from './reserve.js';

/** The key of an owed journal write in `DeferredWrites`. */
export const JOURNAL_KEY = 'journal';

/**
 * How a journal write that fails is taken: `required` throws (the step it guards does not
 * happen: a phase before the switch-over, the commit); `best-effort` owes it (a rollback, a
 * recovery, what follows the commit: recording never stops what brings the node back).
 * Either way a write that fails for want of space or descriptors is tried once more on the
 * reserve first.
 */
export type JournalWriteMode = 'required' | 'best-effort';

/** Write `journal` on the reserve; when it still fails, owe it (best-effort) or throw (required). */
export async function writeJournalOn(
  stateDir: string,
  journal: Journal,
  o: { reserve?: StateReserve | undefined; deferred?: DeferredWrites | undefined; mode: JournalWriteMode },
): Promise<boolean> {
  const write = (): Promise<void> => writeJournal(stateDir, journal);
  try {
    await (o.reserve ? o.reserve.retry(write) : write());
    o.deferred?.settle(JOURNAL_KEY);
    return true;
  } catch (err) {
    if (o.mode === 'required' || !o.deferred) throw err;
    o.deferred.defer(JOURNAL_KEY, `the switch-over journal ${journalPath(stateDir)}`, write, err);
    return false;
  }
}

/** The open journal of one operation: every change is written (fsync + rename) before it counts. */
export class JournalWriter {
  #j: Journal;
  readonly #stateDir: string;
  readonly #now: () => string;
  readonly #reserve: StateReserve | undefined;
  readonly #deferred: DeferredWrites | undefined;

  constructor(
    stateDir: string,
    init: {
      operationId: string;
      kind: Journal['kind'];
      source: MachineName | null;
      target: MachineName | null;
      targetHash: string | null;
      /** A pending uncordon of an earlier interrupted operation, carried until it is done. */
      uncordonPending?: boolean;
    },
    now: () => string,
    recording: { reserve?: StateReserve; deferred?: DeferredWrites } = {},
  ) {
    this.#stateDir = stateDir;
    this.#now = now;
    this.#reserve = recording.reserve;
    this.#deferred = recording.deferred;
    const { uncordonPending, ...rest } = init;
    this.#j = {
      version: 1,
      ...rest,
      ...(uncordonPending ? { uncordonPending: true } : {}),
      phase: 'init',
      phaseState: 'done',
      committed: false,
      sourceStopped: false,
      cordonedByUs: false,
      closed: false,
      outcome: null,
      updatedAt: now(),
    };
  }

  get state(): Readonly<Journal> {
    return this.#j;
  }

  /** Change the journal and write it; resolves to whether it was written now (see `JournalWriteMode`). */
  async set(
    patch: Partial<Omit<Journal, 'version' | 'operationId' | 'kind' | 'updatedAt'>>,
    mode: JournalWriteMode = 'required',
  ): Promise<boolean> {
    this.#j = { ...this.#j, ...patch, updatedAt: this.#now() };
    return writeJournalOn(this.#stateDir, this.#j, {
      reserve: this.#reserve,
      deferred: this.#deferred,
      mode,
    });
  }

  /** Close the journal with the outcome; best-effort (owed when it cannot be written). */
  async close(outcome: string): Promise<boolean> {
    return this.set({ closed: true, outcome }, 'best-effort');
  }
}
