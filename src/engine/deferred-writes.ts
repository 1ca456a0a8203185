/**
 * Records agentd owes: a write of its own state (an operation record, the journal, the node
 * state) that failed while the node was being brought back — the disk full, the descriptors
 * exhausted — and is written later instead of stopping what brings the node back
 * (docs/operations.md, "A full disk, exhausted descriptors"). Each is keyed by what it writes,
 * so only the newest content of a file is kept; `flush` tries them again, `warnings` says what
 * is still owed (`status` shows it).
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { StatusWarning } from './warnings.js';

interface Owed {
  what: string;
  write: () => Promise<void>;
  error: string;
  since: string;
}

export class DeferredWrites {
  readonly #owed = new Map<string, Owed>();
  readonly #logger: Logger | undefined;
  readonly #now: () => string;
  #flushing: Promise<number> | null = null;
  /** Counted: writes done late. */
  written = 0;

  constructor(options: { logger?: Logger; now?: () => string } = {}) {
    this.#logger = options.logger;
    this.#now = options.now ?? (() => new Date().toISOString());
  }

  get size(): number {
    return this.#owed.size;
  }

  has(key: string): boolean {
    return this.#owed.has(key);
  }

  /** Owe `write` under `key` (replacing an older one of the same key), after it failed with `err`. */
  defer(key: string, what: string, write: () => Promise<void>, err: unknown): void {
    const first = !this.#owed.has(key);
    this.#owed.set(key, {
      what,
      write,
      error: describeError(err),
      since: this.#owed.get(key)?.since ?? this.#now(),
    });
    if (first)
      this.#logger?.warn(
        { err: describeError(err), what },
        `${what} could not be written; agentd writes it once it can`,
      );
  }

  /** Forget what is owed under `key` (a newer write of the same file succeeded). */
  settle(key: string): void {
    this.#owed.delete(key);
  }

  /** Try every owed write again; resolves to how many are still owed. Never throws. */
  flush(): Promise<number> {
    if (this.#owed.size === 0) return Promise.resolve(0);
    this.#flushing ??= this.#flush().finally(() => (this.#flushing = null));
    return this.#flushing;
  }

  async #flush(): Promise<number> {
    for (const [key, owed] of [...this.#owed]) {
      try {
        await owed.write();
        // A newer write of the same key may have been owed meanwhile: keep that one.
        if (this.#owed.get(key) === owed) this.#owed.delete(key);
        this.written++;
        this.#logger?.info({ what: owed.what, since: owed.since }, `${owed.what} written late`);
      } catch (err) {
        owed.error = describeError(err);
      }
    }
    return this.#owed.size;
  }

  /** One warning per owed write, for `status`. */
  warnings(): StatusWarning[] {
    return [...this.#owed].map(([key, o]) => ({
      code: 'deferred-writes',
      write: key,
      since: o.since,
      message: `${o.what} is not written yet (since ${o.since}: ${o.error}); agentd writes it once space or descriptors return`,
    }));
  }
}
