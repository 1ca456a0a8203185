/**
 * What agentd keeps back so that rollback and recovery can record what they must when the host
 * runs out (docs/operations.md, "A full disk, exhausted descriptors"):
 *
 * - **space**: `<state-dir>/space-reserve`, a file of RESERVE_BYTES of real (not sparse) zeros,
 *   created with the state dir and kept at that size. A journal write that fails with ENOSPC
 *   frees it, is tried again on the space it leaves, and the reserve is taken back at once
 *   (a journal replaced atomically takes no more room than the one it replaces), or later,
 *   once space returns;
 * - **descriptors**: RESERVE_DESCRIPTORS open handles on `/dev/null`, closed when a step of a
 *   rollback or a recovery fails with EMFILE or ENFILE, so that the step can be tried again.
 *
 * `exhaustion(err)` says whether an error is one of those; `StateReserve.retry` runs a step and,
 * when it fails so, frees what it needs and runs it once more.
 */
import { open, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { describeError, errorCode, isAgentError } from '../errors.js';
import type { StatusWarning } from './warnings.js';

/** The size of the space reserve: room for the few journal and node-state writes of a rollback or recovery. */
export const RESERVE_BYTES = 1024 * 1024;
/** Descriptors held back for a rollback or recovery. */
export const RESERVE_DESCRIPTORS = 32;
const CHUNK = 64 * 1024;

export type Exhaustion = 'space' | 'descriptors';

const SPACE_CODES = new Set(['ENOSPC', 'EDQUOT']);
const FD_CODES = new Set(['EMFILE', 'ENFILE']);

/** Whether `err` (or its cause, or an AgentError's recorded errno) says the disk or the descriptors ran out. */
export function exhaustion(err: unknown): Exhaustion | null {
  let e: unknown = err;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 6; depth++) {
    const code = isAgentError(e) ? e.data.errno : (e as { code?: unknown }).code;
    if (isAgentError(e) && e.code === 'NO_SPACE') return 'space';
    if (typeof code === 'string' && SPACE_CODES.has(code)) return 'space';
    if (typeof code === 'string' && FD_CODES.has(code)) return 'descriptors';
    e = (e as { cause?: unknown }).cause;
  }
  const code = errorCode(err);
  if (code !== undefined && SPACE_CODES.has(code)) return 'space';
  if (code !== undefined && FD_CODES.has(code)) return 'descriptors';
  // A host command's stderr or a wrapped message may carry only the text.
  const text = describeError(err);
  if (/\bENOSPC\b|no space left on device/i.test(text)) return 'space';
  if (/\bE[MN]FILE\b|too many open files/i.test(text)) return 'descriptors';
  return null;
}

export interface ReserveState {
  /** Bytes of the space reserve on disk (RESERVE_BYTES when whole). */
  bytes: number;
  /** Descriptors held. */
  descriptors: number;
}

export class StateReserve {
  readonly file: string;
  readonly #logger: Logger | undefined;
  readonly #bytesWanted: number;
  readonly #fdsWanted: number;
  #bytes = 0;
  #fds: FileHandle[] = [];
  /** Counted: how often each reserve was released (tests, logs). */
  readonly released = { space: 0, descriptors: 0 };

  constructor(stateDir: string, options: { logger?: Logger; bytes?: number; descriptors?: number } = {}) {
    this.file = path.join(stateDir, 'space-reserve');
    this.#logger = options.logger;
    this.#bytesWanted = options.bytes ?? RESERVE_BYTES;
    this.#fdsWanted = options.descriptors ?? RESERVE_DESCRIPTORS;
  }

  get state(): ReserveState {
    return { bytes: this.#bytes, descriptors: this.#fds.length };
  }

  /** Whether both reserves are whole. */
  get whole(): boolean {
    return this.#bytes >= this.#bytesWanted && this.#fds.length >= this.#fdsWanted;
  }

  /** What `status` warns while the reserve is not whole, or null. */
  warning(): StatusWarning | null {
    if (this.whole) return null;
    return {
      code: 'reserve-not-whole',
      file: this.file,
      message: `agentd's reserve for rollback and recovery is not whole (${Math.floor(this.#bytes / 1024)} KiB of space in ${this.file}, ${this.#fds.length} descriptors): free space or descriptors on the host`,
    };
  }

  /**
   * Take both reserves back up to their size, as far as the host allows (never throws). Called
   * at start, after a release, and whenever agentd finds space again.
   */
  async ensure(): Promise<void> {
    while (this.#fds.length < this.#fdsWanted) {
      try {
        this.#fds.push(await open('/dev/null', 'r'));
      } catch {
        break;
      }
    }
    if (this.#bytes < this.#bytesWanted) this.#bytes = await this.#grow();
  }

  async #grow(): Promise<number> {
    let have = 0;
    try {
      have = (await stat(this.file)).size;
    } catch {
      have = 0;
    }
    if (have >= this.#bytesWanted) return have;
    let handle: FileHandle | null = null;
    try {
      handle = await open(this.file, 'a', 0o600);
      const zeros = Buffer.alloc(CHUNK);
      while (have < this.#bytesWanted) {
        const n = Math.min(CHUNK, this.#bytesWanted - have);
        await handle.write(zeros, 0, n, have);
        have += n;
      }
      await handle.sync();
    } catch (err) {
      // Out of space: the reserve is as big as it got, and grows at the next `ensure`.
      this.#logger?.debug({ err: describeError(err), bytes: have }, 'the space reserve is not whole');
      if (handle) {
        await handle.truncate(have).catch(() => undefined);
        await handle.sync().catch(() => undefined);
      }
    } finally {
      await handle?.close().catch(() => undefined);
    }
    return have;
  }

  /** Free a reserve (the space reserve's file, or the held descriptors). */
  async release(kind: Exhaustion): Promise<boolean> {
    if (kind === 'space') {
      if (this.#bytes === 0 && !(await exists(this.file))) return false;
      await rm(this.file, { force: true }).catch(() => undefined);
      this.#bytes = 0;
    } else {
      if (this.#fds.length === 0) return false;
      const fds = this.#fds;
      this.#fds = [];
      await Promise.all(fds.map((fd) => fd.close().catch(() => undefined)));
    }
    this.released[kind]++;
    this.#logger?.warn({ reserve: kind }, `released agentd's ${kind} reserve to finish a step`);
    return true;
  }

  /**
   * Run `fn`; when it fails because the disk or the descriptors ran out, free that reserve and
   * run it once more, then take the reserve back as far as possible (a replaced journal takes no
   * more room than the old one). Other failures, and a second failure, are thrown.
   */
  async retry<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const kind = exhaustion(err);
      if (kind === null || !(await this.release(kind))) throw err;
      try {
        return await fn();
      } finally {
        await this.ensure();
      }
    }
  }

  /** Close the held descriptors (the daemon's end; tests). */
  async close(): Promise<void> {
    const fds = this.#fds;
    this.#fds = [];
    await Promise.all(fds.map((fd) => fd.close().catch(() => undefined)));
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}
