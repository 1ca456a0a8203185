/**
 * Give memory back to the kernel after work: the C heap's free memory, and the executable's
 * clean pages that idle does not use.
 *
 * **The C heap.** Work allocates outside the JavaScript heap too: V8 compiles the code an update
 * runs for the first time, partly on its worker threads, in memory from malloc; so do TLS, zlib
 * and the HTTP parsers. When that memory is freed, glibc keeps it in its arenas for reuse, and an
 * arena of a thread gives nothing back by itself. V8's memory reducer returns the JavaScript
 * heap's free pages within ~30 s of a busy process going idle; this returns malloc's, with glibc's
 * `malloc_trim(0)`, after the reducer's collections (which free memory held for the JavaScript
 * heap by malloc too). Measured on a joined daemon at idle (docs/benchmarks.md, "Footprint",
 * 2026-11-27): the release 89.4 → 87.7 MiB; `node dist/bin/agentd.js` on Node 26, which
 * compiles its bundle without a code cache made for that runtime, 110.2 → 91.4 MiB.
 *
 * **The executable's pages.** The release is one ~120 MB executable: the runtime's code, its
 * read-only data and agentd's bundles. What a piece of work ran stays resident after it, as clean
 * file pages: V8's optimizing compilers, the download and layer code. The kernel drops such pages
 * only under memory pressure, and until then they count in agentd's resident set and in its
 * service's memory. Once, soon after work, agentd asks the kernel to reclaim its executable's
 * read-only mappings now (`madvise(MADV_PAGEOUT)`, Linux 5.4); what idle needs (serving, the
 * watcher, repair's checks) is read back from the file at its next use, ~20 MiB, and stays. The
 * kernel leaves alone a page another process also maps, and writes nothing: these pages are the
 * file's. Not again at the idle trim: that would only evict idle's own pages, read back a
 * moment before, to read them once more. Measured on the release, joined and idle: 91 → 58 MiB
 * (the executable's resident pages 53.6 → 20.1 MiB), the first `status` after it 40–50 ms slower
 * while its code is read back, an update as fast (docs/benchmarks.md, "Footprint", "the
 * executable's clean pages").
 *
 * malloc is trimmed twice after each piece of work: soon (TRIM_SOON_MS), for what the work
 * itself left, and once idle (TRIM_AFTER_IDLE_MS), after V8's collections. On the real-host
 * harness the first trim after an update gave 40–75 MiB back, which until then stayed resident
 * 40 s longer.
 *
 * And at start, `mallopt(M_MMAP_THRESHOLD, 128 KiB)`: glibc serves blocks of 128 KiB and more with
 * mmap and unmaps them when freed, but raises that threshold to the size of each such block freed
 * (up to 32 MiB), after which those blocks come from the heap and stay there until a trim.
 * Setting it fixes it for the life of the process. After a real update on the real-host harness,
 * one run each: 103 against 112 MiB resident 30 s after the update, 91 against 94 after the idle
 * trim (docs/benchmarks.md, "Footprint on a real host", 2026-11-27).
 *
 * The calls go through `node:ffi` (Node 26.1 and later, experimental; the release embeds a
 * fixed Node 26, so the API it calls is that build's). Where the module is missing (Node 20),
 * disabled (`--no-experimental-ffi`) or libc lacks a function (musl has no malloc_trim), agentd
 * does without; where the kernel refuses MADV_PAGEOUT (before 5.4) it says so once and stops
 * asking.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import type { Clock } from '../host/types.js';
import type { Logger } from '../log.js';
import { bindLibc } from './ffi.js';

/**
 * How long agentd must have been idle (no operation ending) before it trims: longer than V8's
 * memory reducer takes to run its collections after work.
 */
export const TRIM_AFTER_IDLE_MS = 40_000;
/**
 * The first trim after work: once what ends with it is done (the snapshot, the status write) and
 * the download worker, idle since the work's last download, has ended (WORKER_IDLE_MS, 5 s, in
 * src/provision/artifacts/sink.ts), freeing the buffers it held.
 */
export const TRIM_SOON_MS = 10_000;
/** glibc's `M_MMAP_THRESHOLD` (malloc.h), and the value set: glibc's own default. */
const M_MMAP_THRESHOLD = -3;
export const MMAP_THRESHOLD_BYTES = 128 * 1024;
/** Linux's `MADV_PAGEOUT` (include/uapi/asm-generic/mman-common.h, Linux 5.4). */
const MADV_PAGEOUT = 21;

/** The libc functions used here, bound once through `node:ffi` (ffi.ts). */
interface Libc {
  mallocTrim: ((pad: bigint) => unknown) | null;
  mallopt: ((param: number, value: number) => unknown) | null;
  madvise: ((addr: bigint, length: bigint, advice: number) => unknown) | null;
}
let libc: Libc | undefined;

function loadLibc(): Libc {
  libc ??= {
    mallocTrim: bindLibc('malloc_trim', { arguments: ['uint64'], return: 'int32' }),
    mallopt: bindLibc('mallopt', { arguments: ['int32', 'int32'], return: 'int32' }),
    // `void *addr, size_t length`: both are 64-bit integers to the x86-64 and arm64 C ABIs.
    madvise: bindLibc('madvise', { arguments: ['uint64', 'uint64', 'int32'], return: 'int32' }),
  };
  return libc;
}

/** glibc's `malloc_trim(0)`: true when it gave memory back. Null where it cannot be called. */
export function loadMallocTrim(): (() => boolean) | null {
  const { mallocTrim } = loadLibc();
  return mallocTrim ? () => mallocTrim(0n) === 1 : null;
}

/**
 * Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES (see above). True when set; false where
 * mallopt cannot be called or refused.
 */
export function fixMmapThreshold(): boolean {
  const { mallopt } = loadLibc();
  try {
    return mallopt !== null && mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) === 1;
  } catch {
    return false;
  }
}

/** One mapping of /proc/self/maps: where it starts and how long it is. */
export interface MappedRange {
  start: bigint;
  length: bigint;
}

const MAPS_LINE = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+ +(.*)$/;

/**
 * The mappings of `executable` in `maps` (the text of /proc/self/maps) that cannot be written:
 * its code and read-only data, whose pages are the file's. `executable` is what /proc/self/exe
 * links to; both name the file as the kernel does, with " (deleted)" once it has been replaced
 * (an upgrade renames a new file over it), so they still match then.
 */
export function executableRanges(maps: string, executable: string): MappedRange[] {
  const ranges: MappedRange[] = [];
  for (const line of maps.split('\n')) {
    const [, from = '', to = '', perms = '', file] = MAPS_LINE.exec(line) ?? [];
    if (file !== executable || perms[1] === 'w') continue;
    const start = BigInt(`0x${from}`);
    ranges.push({ start, length: BigInt(`0x${to}`) - start });
  }
  return ranges;
}

/**
 * Ask the kernel to reclaim the running executable's clean pages now (see above). Returns the
 * bytes of mappings advised; throws when the kernel refuses. Null where madvise cannot be called.
 */
export function loadPageOut(): (() => number) | null {
  const { madvise } = loadLibc();
  if (madvise === null) return null;
  return () => {
    const executable = readlinkSync('/proc/self/exe');
    let bytes = 0n;
    for (const r of executableRanges(readFileSync('/proc/self/maps', 'utf8'), executable)) {
      if (madvise(r.start, r.length, MADV_PAGEOUT) !== 0) {
        throw new Error(
          `the kernel refused madvise(MADV_PAGEOUT) on ${executable} (Linux 5.4 or later has it)`,
        );
      }
      bytes += r.length;
    }
    return Number(bytes);
  };
}

export interface HeapTrimmer {
  /** Work just ended: trim after `soonMs`, and again once nothing else has ended for `idleMs`. */
  poke(): void;
  /** Stop waiting (shutdown). */
  stop(): void;
}

export function createHeapTrimmer(o: {
  /** `loadMallocTrim()`; null: no malloc trim. */
  trim: (() => boolean) | null;
  /** `loadPageOut()`; null: no page-out. With both null the trimmer does nothing. */
  pageOut?: (() => number) | null;
  clock: Clock;
  logger: Logger;
  idleMs?: number;
  soonMs?: number;
}): HeapTrimmer {
  const idleMs = o.idleMs ?? TRIM_AFTER_IDLE_MS;
  const soonMs = Math.min(o.soonMs ?? TRIM_SOON_MS, idleMs);
  const trim = o.trim;
  let pageOut = o.pageOut ?? null;
  let waiting: AbortController | null = null;
  let stopped = false;
  const trimNow = (after: 'work' | 'idle'): void => {
    const before = process.memoryUsage.rss();
    const done: { released?: boolean; pagedOutBytes?: number } = {};
    if (trim !== null) {
      try {
        done.released = trim();
      } catch (err) {
        o.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'malloc_trim failed');
      }
    }
    if (pageOut !== null && after === 'work') {
      try {
        done.pagedOutBytes = pageOut();
      } catch (err) {
        // A kernel without MADV_PAGEOUT says so every time: once is enough.
        pageOut = null;
        o.logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'cannot give the executable’s clean pages back to the kernel; not trying again',
        );
      }
    }
    o.logger.debug(
      { after, ...done, rssBeforeBytes: before, rssAfterBytes: process.memoryUsage.rss() },
      'gave memory back to the kernel (malloc_trim, the executable’s clean pages)',
    );
  };
  return {
    poke() {
      if ((trim === null && pageOut === null) || stopped) return;
      waiting?.abort();
      const ac = new AbortController();
      waiting = ac;
      const trimLater = async (): Promise<void> => {
        await o.clock.sleep(soonMs, ac.signal);
        if (waiting !== ac) return;
        trimNow('work');
        await o.clock.sleep(idleMs - soonMs, ac.signal);
        if (waiting !== ac) return;
        waiting = null;
        trimNow('idle');
      };
      trimLater().catch(() => undefined); // poked again, or stopped
    },
    stop() {
      stopped = true;
      waiting?.abort();
      waiting = null;
    },
  };
}
