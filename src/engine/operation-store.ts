/**
 * Operation history under `<state-dir>/operations/`: one JSON file per operation, written
 * atomically on every change, bounded to the newest `limit` operations.
 */
import { randomBytes } from 'node:crypto';
import { readFile, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { stateWriteError, writeFileAtomic } from '../host/fs-atomic.js';
import type { DeferredWrites } from './deferred-writes.js';
import type { Operation } from './operation.js';

export const DEFAULT_HISTORY_LIMIT = 200;

/** Sortable, unique operation ids: time first, then randomness (`op-<ms base36>-<hex>`). */
export function newOperationId(nowMs: number): string {
  return `op-${nowMs.toString(36).padStart(9, '0')}-${randomBytes(4).toString('hex')}`;
}

export class OperationStore {
  readonly #dir: string;
  readonly #limit: number;
  readonly #logger: Logger | undefined;
  readonly #deferred: DeferredWrites | undefined;
  /** Newest last. */
  #ops: Operation[] = [];
  #writes: Promise<void> = Promise.resolve();

  constructor(
    stateDir: string,
    options: { limit?: number; logger?: Logger; deferred?: DeferredWrites } = {},
  ) {
    this.#dir = path.join(stateDir, 'operations');
    this.#limit = options.limit ?? DEFAULT_HISTORY_LIMIT;
    this.#logger = options.logger;
    this.#deferred = options.deferred;
  }

  /** Load the history from disk (unreadable files are logged and skipped, never fatal). */
  async load(): Promise<void> {
    let names: string[] = [];
    try {
      names = (await readdir(this.#dir)).filter((n) => n.endsWith('.json'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const ops: Operation[] = [];
    for (const name of names) {
      try {
        ops.push(JSON.parse(await readFile(path.join(this.#dir, name), 'utf8')) as Operation);
      } catch (err) {
        this.#logger?.warn(
          { file: name, err: (err as Error).message },
          'skipping an unreadable operation record',
        );
      }
    }
    ops.sort((a, b) =>
      a.createdAt === b.createdAt ? a.id.localeCompare(b.id) : a.createdAt.localeCompare(b.createdAt),
    );
    this.#ops = ops;
  }

  get(id: string): Operation | undefined {
    return this.#ops.find((o) => o.id === id);
  }

  findByIdempotencyKey(key: string): Operation | undefined {
    return this.#ops.find((o) => o.idempotencyKey === key);
  }

  /** Newest first. */
  list(filter: { limit?: number; state?: string } = {}): Operation[] {
    const out: Operation[] = [];
    for (let i = this.#ops.length - 1; i >= 0 && out.length < (filter.limit ?? Infinity); i--) {
      const op = this.#ops[i] as Operation;
      if (!filter.state || op.state === filter.state) out.push(op);
    }
    return out;
  }

  /**
   * Insert or update, then persist (writes are serialized, so the file always holds the newest).
   * A write that fails throws naming the file (`stateWriteError`).
   */
  async save(op: Operation): Promise<void> {
    const i = this.#ops.findIndex((o) => o.id === op.id);
    const snapshot = structuredClone(op);
    if (i >= 0) this.#ops[i] = snapshot;
    else this.#ops.push(snapshot);
    const file = path.join(this.#dir, `${op.id}.json`);
    const write = this.#writes.then(async () => {
      try {
        await writeFileAtomic(file, `${JSON.stringify(snapshot, null, 2)}\n`, {
          mode: 0o600,
          dirMode: 0o700,
        });
      } catch (err) {
        throw stateWriteError(err, file);
      }
      await this.#prune();
    });
    this.#writes = write.catch(() => undefined);
    await write;
    this.#deferred?.settle(`operation:${op.id}`);
  }

  /**
   * Save best-effort: a write that fails (the disk full, no descriptor left) is owed instead
   * (`DeferredWrites`) and written later with the newest content; the history in memory has it
   * at once. Resolves to whether it was written now. Never throws.
   */
  async record(op: Operation): Promise<boolean> {
    try {
      await this.save(op);
      return true;
    } catch (err) {
      const id = op.id;
      if (!this.#deferred) {
        this.#logger?.warn(
          { err: (err as Error).message, operation: id },
          'an operation record could not be written',
        );
        return false;
      }
      this.#deferred.defer(
        `operation:${id}`,
        `the record of operation ${id}`,
        async () => {
          const latest = this.get(id);
          if (latest) await this.save(latest);
        },
        err,
      );
      return false;
    }
  }

  /** Drop an operation that never started (its first record could not be written) from the history. */
  forget(id: string): void {
    this.#ops = this.#ops.filter((o) => o.id !== id);
  }

  async #prune(): Promise<void> {
    while (this.#ops.length > this.#limit) {
      const oldest = this.#ops.shift() as Operation;
      await rm(path.join(this.#dir, `${oldest.id}.json`), { force: true });
    }
  }
}
