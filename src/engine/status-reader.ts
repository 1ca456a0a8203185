/**
 * What `status` shows of the engine, and how fresh (docs/architecture.md, "The status path"):
 * the node as last read (`NodeSnapshot`), read again when older than `maxAgeMs`, with the
 * running and the last operation and every warning of the engine's parts. The engine implements
 * the RPC layer's status reader through it.
 *
 * Freshness: the reader notes on the injected clock when the node was last read and gives the
 * status version a deadline, so the version moves on once the facts are old. An older snapshot
 * is read again before `status` answers, and every caller meanwhile waits for that one read, up
 * to STATUS_READ_WAIT_MS; past that, the answer carries the old facts and a `stale-facts`
 * warning. While an operation runs the node is not read (the operation is changing it, and its
 * end reads it again before it is reported ended).
 */
import type { Clock } from '../host/types.js';
import type { NodeSnapshot } from './node-snapshot.js';
import type { NodeStatus, Operation } from './operation.js';
import type { RepairStatus } from './repair.js';
import type { StatusVersion } from './status-version.js';
import type { StatusWarning } from './warnings.js';

/** How old the node's facts in `status` may be, by default (`EngineOptions.statusMaxAgeMs`). */
export const STATUS_MAX_AGE_MS = 1000;
/**
 * How long `status` waits for a re-read of old node facts. A host that does not answer (systemd
 * wedged, a read running to its command timeouts) must not hang `status`: past this, the old facts
 * are answered, with a warning that says how old they are.
 */
export const STATUS_READ_WAIT_MS = 2000;

export interface EngineStatus {
  node: NodeStatus;
  operation: Operation | null;
  lastOperation: Operation | null;
}

export interface StatusReaderOptions {
  /** The node as last read, and a read of it. */
  snapshot: Pick<NodeSnapshot, 'node' | 'refresh'>;
  clock: Clock;
  /** The version of what `status` shows: it expires `maxAgeMs` after every read. */
  version: StatusVersion;
  /** How old the node's facts may be (default STATUS_MAX_AGE_MS). */
  maxAgeMs?: number;
  /** The running operation, or null; while one runs the node is not read. */
  running(): Operation | null;
  /** The newest `limit` operation records, newest first (the running one among them). */
  history(limit: number): Operation[];
  /** Called first in every `status` (the engine's background upkeep); not awaited. */
  beforeStatus?(): void;
  /** Whether the node is cordoned, as agentd follows it (null: not known). */
  cordoned(): boolean | null;
  /** Repair as it is now. */
  repair(): RepairStatus;
  /** The warnings of the engine's parts, shown after the snapshot's. */
  warnings(): StatusWarning[];
}

export class StatusReader {
  readonly #o: StatusReaderOptions;
  /** The re-read that `status` callers wait for, while it runs (see `#readIfOld`). */
  #oldRead: Promise<boolean> | null = null;
  /** When the node was last read, on the injected clock (Infinity: not yet). */
  #readAt = Infinity;

  constructor(options: StatusReaderOptions) {
    this.#o = options;
  }

  get #maxAgeMs(): number {
    return this.#o.maxAgeMs ?? STATUS_MAX_AGE_MS;
  }

  /** Re-read the node (concurrent callers share one read); the facts are new from its end. */
  refresh(): Promise<void> {
    return this.#o.snapshot.refresh().finally(() => this.#noteRead());
  }

  /**
   * Read the node again when its facts are older than `maxAgeMs` (see `status`; /metrics calls
   * it before a scrape). False when that read has not ended within STATUS_READ_WAIT_MS.
   */
  async freshen(): Promise<boolean> {
    const read = this.#readIfOld();
    return read === null || (await read);
  }

  /** Status as the `status` method reports it (see the module comment). */
  async status(): Promise<EngineStatus> {
    this.#o.beforeStatus?.();
    const slow = !(await this.freshen());
    const operation = this.#o.running();
    const last = this.#o.history(2).find((op) => op.id !== operation?.id) ?? null;
    const node = this.#o.snapshot.node;
    const warnings = [...node.warnings, ...this.#o.warnings()];
    if (slow) {
      warnings.push({
        code: 'stale-facts',
        message: `the node's facts are from ${node.observedAt ?? 'before the first read'}: a read of the node has not finished in ${STATUS_READ_WAIT_MS / 1000} s`,
      });
    }
    return {
      node: { ...node, cordoned: this.#o.cordoned(), warnings, repair: { ...this.#o.repair() } },
      operation,
      lastOperation: last,
    };
  }

  /**
   * The re-read of an old snapshot that `status` waits for: it resolves true when the read ended
   * within STATUS_READ_WAIT_MS, false when it did not (it goes on; its end bumps the status
   * version). Null when the snapshot is not old, when an operation runs, and before the first
   * read (startup recovery is still deciding what the node is).
   */
  #readIfOld(): Promise<boolean> | null {
    const { clock } = this.#o;
    if (this.#o.running()) return null;
    if (this.#oldRead !== null) return this.#oldRead;
    if (clock.now() - this.#readAt < this.#maxAgeMs) return null;
    const read = this.refresh().catch(() => undefined);
    const wait = new AbortController();
    const inTime = Promise.race([
      read.then(() => true),
      clock.sleep(STATUS_READ_WAIT_MS, wait.signal).then(
        () => false,
        () => true,
      ),
    ]);
    this.#oldRead = inTime;
    void read.finally(() => {
      wait.abort();
      this.#oldRead = null;
    });
    return inTime;
  }

  /** A read of the node is done: the snapshot is new, and gets old `maxAgeMs` from now. */
  #noteRead(): void {
    this.#readAt = this.#o.clock.now();
    // An old snapshot is an input too: the version moves on then, so the next `status` is
    // answered afresh and refreshes it.
    this.#o.version.expireAfter(this.#maxAgeMs, this.#o.clock);
  }
}
