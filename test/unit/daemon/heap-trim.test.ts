import { builtinModules } from 'node:module';
import path from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  createHeapTrimmer,
  fixMmapThreshold,
  loadMallocTrim,
  TRIM_AFTER_IDLE_MS,
  TRIM_SOON_MS,
} from '../../../src/daemon/heap-trim.js';
import { createManualClock, settle } from '../../support/manual-clock.js';

const MODULE = path.resolve(import.meta.dirname, '../../../src/daemon/heap-trim.ts');

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
    expect(lines.at(-1)).toMatchObject({ level: 40, err: 'no such symbol', msg: 'malloc_trim failed' });
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
