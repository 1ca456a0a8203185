import type { MachineName } from '../host/types.js';
import { writeJournal, type Journal } from './journal.js';

/** The open journal of one operation: every change is written (fsync + rename) before it counts. */
export class JournalWriter {
  #j: Journal;
  readonly #stateDir: string;
  readonly #now: () => string;

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
  ) {
    this.#stateDir = stateDir;
    this.#now = now;
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

  async set(patch: Partial<Omit<Journal, 'version' | 'operationId' | 'kind' | 'updatedAt'>>): Promise<void> {
    this.#j = { ...this.#j, ...patch, updatedAt: this.#now() };
    await writeJournal(this.#stateDir, this.#j);
  }

  async close(outcome: string): Promise<void> {
    await this.set({ closed: true, outcome });
  }
}
