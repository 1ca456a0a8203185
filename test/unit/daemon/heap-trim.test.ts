import { builtinModules } from 'node:module';
import path from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createHeapTrimmer, loadMallocTrim, TRIM_AFTER_IDLE_MS } from '../../../src/daemon/heap-trim.js';
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
  it('trims once agentd has been idle for the whole wait after the last piece of work', async () => {
    const clock = createManualClock();
    const { logger, lines } = recordingLogger();
    let trims = 0;
    const trimmer = createHeapTrimmer({ trim: () => (trims++, true), clock, logger });
    trimmer.poke();
    await clock.advance(TRIM_AFTER_IDLE_MS - 1);
    await settle();
    expect(trims).toBe(0);
    // More work ends: the wait starts again.
    trimmer.poke();
    await clock.advance(TRIM_AFTER_IDLE_MS - 1);
    await settle();
    expect(trims).toBe(0);
    await clock.advance(1);
    await settle();
    expect(trims).toBe(1);
    expect(lines.at(-1)).toMatchObject({ released: true, msg: expect.stringContaining('malloc_trim') });
    // Nothing more happens until the next piece of work.
    await clock.advance(10 * TRIM_AFTER_IDLE_MS);
    await settle();
    expect(trims).toBe(1);
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
