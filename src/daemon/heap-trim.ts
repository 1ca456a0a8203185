/**
 * Give the C heap's free memory back to the kernel once agentd is idle after work.
 *
 * Work allocates outside the JavaScript heap too: V8 compiles the code an update runs for the
 * first time, partly on its worker threads, in memory from malloc; so do TLS, zlib and the HTTP
 * parsers. When that memory is freed, glibc keeps it in its arenas for reuse, and an arena of a
 * thread gives nothing back by itself. V8's memory reducer returns the JavaScript heap's free
 * pages within ~30 s of a busy process going idle; this returns malloc's, with glibc's
 * `malloc_trim(0)`, after the reducer's collections (which free memory held for the JavaScript
 * heap by malloc too). Measured on a joined daemon at idle (docs/benchmarks.md, "Footprint",
 * 2026-11-27): the release 89.4 → 87.7 MiB; `node dist/bin/agentd.js` on Node 26, which
 * compiles its bundle without a code cache made for that runtime, 110.2 → 91.4 MiB.
 *
 * The call goes through `node:ffi` (Node 26.1 and later, experimental; the release embeds a
 * fixed Node 26, so the API it calls is that build's). Where the module is missing (Node 20),
 * disabled (`--no-experimental-ffi`) or libc has no `malloc_trim` (musl), agentd does without.
 */
import type { Clock } from '../host/types.js';
import type { Logger } from '../log.js';

/**
 * How long agentd must have been idle (no operation ending) before it trims: longer than V8's
 * memory reducer takes to run its collections after work.
 */
export const TRIM_AFTER_IDLE_MS = 40_000;

/** The part of `node:ffi` used here (its types are not in @types/node 20). */
interface Ffi {
  dlopen(
    path: string | null,
    definitions: Record<string, { arguments: string[]; return: string }>,
  ): { functions: Record<string, (...args: unknown[]) => unknown> };
}

/**
 * `node:ffi`, without the experimental-feature warning Node prints on its first load: agentd
 * uses one call of it on purpose (above), and an operator reading the journal need not wonder.
 * Other warnings pass through.
 */
function loadFfiQuietly(): Ffi | undefined {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    if (type === 'ExperimentalWarning' && /\bFFI\b/.test(text)) return;
    (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return process.getBuiltinModule('node:ffi') as Ffi | undefined;
  } catch {
    return undefined;
  } finally {
    process.emitWarning = emitWarning;
  }
}

/** glibc's `malloc_trim(0)`: true when it gave memory back. Null where it cannot be called. */
export function loadMallocTrim(): (() => boolean) | null {
  const ffi = loadFfiQuietly();
  if (!ffi) return null;
  try {
    const { functions } = ffi.dlopen(null, { malloc_trim: { arguments: ['uint64'], return: 'int32' } });
    const mallocTrim = functions.malloc_trim;
    if (typeof mallocTrim !== 'function') return null;
    return () => mallocTrim(0n) === 1;
  } catch {
    return null;
  }
}

export interface HeapTrimmer {
  /** Work just ended: trim once nothing else has ended for `idleMs`. */
  poke(): void;
  /** Stop waiting (shutdown). */
  stop(): void;
}

export function createHeapTrimmer(o: {
  /** `loadMallocTrim()`; null makes the trimmer do nothing. */
  trim: (() => boolean) | null;
  clock: Clock;
  logger: Logger;
  idleMs?: number;
}): HeapTrimmer {
  const idleMs = o.idleMs ?? TRIM_AFTER_IDLE_MS;
  let waiting: AbortController | null = null;
  let stopped = false;
  const trimNow = (trim: () => boolean): void => {
    const before = process.memoryUsage.rss();
    try {
      const released = trim();
      o.logger.debug(
        { released, rssBeforeBytes: before, rssAfterBytes: process.memoryUsage.rss() },
        'returned the C heap’s free memory to the kernel (malloc_trim)',
      );
    } catch (err) {
      o.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'malloc_trim failed');
    }
  };
  return {
    poke() {
      const trim = o.trim;
      if (trim === null || stopped) return;
      waiting?.abort();
      const ac = new AbortController();
      waiting = ac;
      o.clock.sleep(idleMs, ac.signal).then(
        () => {
          if (waiting !== ac) return;
          waiting = null;
          trimNow(trim);
        },
        () => undefined, // poked again, or stopped
      );
    },
    stop() {
      stopped = true;
      waiting?.abort();
      waiting = null;
    },
  };
}
