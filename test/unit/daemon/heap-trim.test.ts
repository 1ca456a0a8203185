import { copyFile, mkdtemp, open, rm, statfs } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  createHeapTrimmer,
  executableRanges,
  fixMmapThreshold,
  loadMallocTrim,
  loadPageOut,
  TRIM_AFTER_IDLE_MS,
  TRIM_SOON_MS,
} from '../../../src/daemon/heap-trim.js';
import { createManualClock, settle } from '../../support/manual-clock.js';

const MODULE = path.resolve(import.meta.dirname, '../../../src/daemon/heap-trim.ts');
/** statfs(2)'s type of a tmpfs. */
const TMPFS_MAGIC = 0x01021994;

function recordingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

describe('createHeapTrimmer', () => {
  it('trims soon after a piece of work, and again once agentd has been idle for the whole wait', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    let trims = 0;
    const trimmer = createHeapTrimmer({ trim: () => (trims++, true), clock, logger });
    trimmer.poke();
    await clock.advance(TRIM_SOON_MS - 1);
    await settle();
    expect(trims).toBe(0);
    await clock.advance(1);
    await settle();
    expect(trims).toBe(1);
    expect(lines.at(-1)).toMatchObject({
      after: 'work',
      released: true,
      msg: expect.stringContaining('malloc_trim'),
    });
    // More work ends before the idle trim: both waits start again.
    await clock.advance(TRIM_AFTER_IDLE_MS - TRIM_SOON_MS - 1);
    await settle();
    expect(trims).toBe(1);
    trimmer.poke();
    await clock.advance(TRIM_SOON_MS);
    await settle();
    expect(trims).toBe(2);
    await clock.advance(TRIM_AFTER_IDLE_MS - TRIM_SOON_MS - 1);
    await settle();
    expect(trims).toBe(2);
    await clock.advance(1);
    await settle();
    expect(trims).toBe(3);
    expect(lines.at(-1)).toMatchObject({ after: 'idle', released: true });
    // Nothing more happens until the next piece of work.
    await clock.advance(10 * TRIM_AFTER_IDLE_MS);
    await settle();
    expect(trims).toBe(3);
    expect(clock.pending).toBe(0);
  });

  it('never trims after stop, and does nothing where malloc_trim cannot be called', async () => {
    const clock = createManualClock();
    const { logger } = recordingLogger();
    let trims = 0;
    const trimmer = createHeapTrimmer({ trim: () => (trims++, true), clock, logger });
    trimmer.poke();
    trimmer.stop();
    trimmer.poke();
    await clock.advance(2 * TRIM_AFTER_IDLE_MS);
    await settle();
    expect(trims).toBe(0);
    const none = createHeapTrimmer({ trim: null, clock, logger });
    none.poke();
    expect(clock.pending).toBe(0);
  });

  it('logs a failed trim as a warning and keeps serving', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    const trimmer = createHeapTrimmer({
      trim: () => {
        throw new Error('no such symbol');
      },
      clock,
      logger,
    });
    trimmer.poke();
    await clock.advance(TRIM_AFTER_IDLE_MS);
    await settle();
    const failed = { err: 'no such symbol', msg: 'malloc_trim failed' };
    // One warning per trim (soon, then idle); the debug line after each says what was done.
    expect(lines.filter((l) => l.level === 40)).toMatchObject([failed, failed]);
  });
});

describe('createHeapTrimmer with the page-out', () => {
  it('pages the executable out once, at the trim soon after work, beside malloc_trim', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    const calls: string[] = [];
    const trimmer = createHeapTrimmer({
      trim: () => (calls.push('trim'), true),
      pageOut: () => (calls.push('page-out'), 4096),
      clock,
      logger,
    });
    trimmer.poke();
    await clock.advance(TRIM_SOON_MS);
    await settle();
    expect(calls).toEqual(['trim', 'page-out']);
    expect(lines.at(-1)).toMatchObject({ after: 'work', released: true, pagedOutBytes: 4096 });
    // The idle trim leaves the pages idle has read back since.
    await clock.advance(TRIM_AFTER_IDLE_MS - TRIM_SOON_MS);
    await settle();
    expect(calls).toEqual(['trim', 'page-out', 'trim']);
    expect(lines.at(-1)).toMatchObject({ after: 'idle', released: true });
    expect(lines.at(-1)).not.toHaveProperty('pagedOutBytes');
    // The next piece of work pages out again.
    trimmer.poke();
    await clock.advance(TRIM_SOON_MS);
    await settle();
    expect(calls.filter((c) => c === 'page-out')).toHaveLength(2);
  });

  it('pages out where malloc_trim cannot be called', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    let pageOuts = 0;
    const trimmer = createHeapTrimmer({ trim: null, pageOut: () => (pageOuts++, 1), clock, logger });
    trimmer.poke();
    await clock.advance(TRIM_SOON_MS);
    await settle();
    expect(pageOuts).toBe(1);
    expect(lines.at(-1)).not.toHaveProperty('released');
  });

  it('says once that the kernel refused, stops asking, and keeps trimming malloc', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    let trims = 0;
    let pageOuts = 0;
    const trimmer = createHeapTrimmer({
      trim: () => (trims++, true),
      pageOut: () => {
        pageOuts++;
        throw new Error('the kernel refused madvise(MADV_PAGEOUT) on /usr/bin/agentd');
      },
      clock,
      logger,
    });
    for (let i = 0; i < 3; i++) {
      trimmer.poke();
      await clock.advance(TRIM_AFTER_IDLE_MS);
      await settle();
    }
    expect(trims).toBe(6);
    expect(pageOuts).toBe(1);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      err: expect.stringContaining('MADV_PAGEOUT'),
      msg: expect.stringContaining('not trying again'),
    });
  });
});

describe('executableRanges', () => {
  const exe = '/usr/bin/agentd';
  const maps = [
    '55d0c0000000-55d0c2000000 r--p 00000000 fd:01 1234 /usr/bin/agentd',
    '55d0c2000000-55d0c4c00000 r-xp 02000000 fd:01 1234 /usr/bin/agentd',
    '55d0c4c00000-55d0c4d00000 r--p 04c00000 fd:01 1234 /usr/bin/agentd',
    '55d0c4d00000-55d0c4d10000 rw-p 04d00000 fd:01 1234 /usr/bin/agentd',
    '55d0c4d10000-55d0c4e00000 rw-p 00000000 00:00 0 ',
    '55d0c5000000-55d0c6000000 rw-p 00000000 00:00 0                          [heap]',
    '7f0000000000-7f0000200000 r-xp 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6',
    '7f0000300000-7f0000301000 r--p 00000000 fd:01 77 /usr/bin/agentd-other',
    '',
  ].join('\n');

  it('takes the executable’s mappings that cannot be written, and nothing else', () => {
    expect(executableRanges(maps, exe)).toEqual([
      { start: 0x55d0c0000000n, length: 0x2000000n },
      { start: 0x55d0c2000000n, length: 0x2c00000n },
      { start: 0x55d0c4c00000n, length: 0x100000n },
    ]);
  });

  it('still finds them once an upgrade has renamed a new file over the executable', () => {
    const replaced = maps.replaceAll('/usr/bin/agentd\n', '/usr/bin/agentd (deleted)\n');
    expect(executableRanges(replaced, `${exe} (deleted)`)).toHaveLength(3);
    expect(executableRanges(replaced, exe)).toEqual([]);
  });

  it('matches a path with spaces whole', () => {
    const spaced = '400000-500000 r-xp 00000000 fd:01 5 /opt/my agent/agentd\n';
    expect(executableRanges(spaced, '/opt/my agent/agentd')).toHaveLength(1);
    expect(executableRanges(spaced, '/opt/my')).toEqual([]);
  });
});

describe('loadMallocTrim', () => {
  // Asked without loading it: a load here would print the warning this module keeps quiet.
  const hasFfi = builtinModules.includes('ffi') || builtinModules.includes('node:ffi');

  it.runIf(hasFfi)('calls glibc’s malloc_trim on a runtime with node:ffi', () => {
    const trim = loadMallocTrim();
    expect(trim).toBeTypeOf('function');
    expect(typeof trim!()).toBe('boolean');
  });

  it.skipIf(hasFfi)('is null on a runtime without node:ffi', () => {
    expect(loadMallocTrim()).toBeNull();
  });

  it.skipIf(hasFfi)('fixMmapThreshold does nothing on a runtime without node:ffi', () => {
    expect(fixMmapThreshold()).toBe(false);
  });

  it.skipIf(hasFfi)('loadPageOut is null on a runtime without node:ffi', () => {
    expect(loadPageOut()).toBeNull();
  });

  it.runIf(hasFfi)(
    'loadPageOut gives the executable’s resident pages back to the kernel',
    { timeout: 60_000 },
    async () => {
      // The kernel leaves a page alone that another process maps too, and this test run's
      // processes map this runtime's executable: the child runs a copy of it, which it alone
      // maps. On a file system whose pages are memory (tmpfs) nothing could be reclaimed, so the
      // copy goes there only when that is not the case. Written through (fsync) first: the kernel
      // reclaims only clean pages.
      const base =
        (await statfs(os.tmpdir())).type === TMPFS_MAGIC ? path.resolve('node_modules/.cache') : os.tmpdir();
      const dir = await mkdtemp(path.join(base, 'agentd-page-out-'));
      try {
        const node = path.join(dir, 'node');
        await copyFile(process.execPath, node);
        const fh = await open(node, 'r+');
        await fh.sync();
        await fh.close();
        const script = `
          import { readFileSync } from 'node:fs';
          const fileKiB = () => Number(/RssFile:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
          const m = await import(${JSON.stringify(MODULE)});
          const pageOut = m.loadPageOut();
          const before = fileKiB();
          const bytes = pageOut();
          console.log(JSON.stringify({ before, after: fileKiB(), bytes }));
        `;
        const { stdout } = await execa(node, ['--import', 'tsx', '--input-type=module', '-e', script]);
        const r = JSON.parse(stdout) as { before: number; after: number; bytes: number };
        // The mappings of the whole executable were advised; most of what was resident left.
        expect(r.bytes).toBeGreaterThan(64 * 1024 * 1024);
        expect(r.before).toBeGreaterThan(16 * 1024);
        expect(r.after).toBeLessThan(r.before / 2);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  it.runIf(hasFfi)(
    'fixMmapThreshold keeps large blocks out of the C heap after glibc would have raised its threshold',
    async () => {
      // A process of its own, so the threshold is not this test run's. One 8 MiB block is
      // allocated and freed (mmap'd, so glibc raises its threshold to 8 MiB), then 32 blocks of
      // 1 MiB are kept: the growth of the [heap] mapping says where they went.
      const script = `
        import { readFileSync } from 'node:fs';
        const heapKiB = () => {
          const smaps = readFileSync('/proc/self/smaps', 'utf8');
          const at = smaps.indexOf('[heap]');
          return at < 0 ? 0 : Number(/Rss:\\s+(\\d+)/.exec(smaps.slice(at))[1]);
        };
        const m = await import(${JSON.stringify(MODULE)});
        const fixed = process.argv[1] === 'fix' ? m.fixMmapThreshold() : null;
        let big = Buffer.allocUnsafeSlow(8 << 20);
        big.fill(1);
        big = null;
        globalThis.gc();
        const before = heapKiB();
        const kept = [];
        for (let i = 0; i < 32; i++) kept.push(Buffer.allocUnsafeSlow(1 << 20).fill(2));
        console.log(JSON.stringify({ fixed, growthMiB: (heapKiB() - before) / 1024, kept: kept.length }));
      `;
      const run = async (mode: string) => {
        const { stdout } = await execa(process.execPath, [
          '--expose-gc',
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          script,
          mode,
        ]);
        return JSON.parse(stdout) as { fixed: boolean | null; growthMiB: number; kept: number };
      };
      const plain = await run('plain');
      const fixed = await run('fix');
      expect(plain.kept).toBe(32);
      expect(plain.growthMiB).toBeGreaterThan(16);
      expect(fixed).toMatchObject({ fixed: true, kept: 32 });
      expect(fixed.growthMiB).toBeLessThan(4);
    },
  );

  it('prints no experimental-feature warning, and lets other warnings through', async () => {
    // A process of its own: Node warns once per process, and a test run may have loaded it.
    const script = `import(${JSON.stringify(MODULE)}).then((m) => { m.loadMallocTrim(); process.emitWarning('other', 'ExperimentalWarning'); });`;
    const { stderr } = await execa(process.execPath, [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script,
    ]);
    expect(stderr).not.toMatch(/FFI/);
    expect(stderr).toMatch(/ExperimentalWarning: other/);
  });
});
