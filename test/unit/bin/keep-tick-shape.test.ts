import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { keepNextTickShape } from '../../../src/bin/keep-tick-shape.js';

const CHILD = path.resolve(import.meta.dirname, '../../support/tick-shape-child.ts');

describe('keepNextTickShape', () => {
  it('keeps one of process.nextTick’s own queue entries, the same one on every call', () => {
    const kept = keepNextTickShape();
    expect(kept).toBeDefined();
    // A nextTick entry: Node's async-id symbols, then the callback and its arguments.
    const symbols = Object.getOwnPropertySymbols(kept).map((s) => s.description);
    expect(symbols).toEqual(expect.arrayContaining(['async_id_symbol', 'trigger_async_id_symbol']));
    expect(Object.keys(kept!)).toEqual(['callback', 'args']);
    expect(keepNextTickShape()).toBe(kept);
  });

  it('keeps the hidden class of nextTick entries through a memory-reducing collection', async () => {
    // In a process of its own: the collection and V8's natives are flags of the whole process.
    // The burst timings it prints are for bench/next-tick.ts; only the class is checked here.
    const { stdout } = await execa(
      process.execPath,
      ['--expose-gc', '--allow-natives-syntax', '--import', 'tsx', CHILD, 'keep'],
      { env: { TICK_BURSTS: '1', TICK_ROUNDS: '50' } },
    );
    const result = JSON.parse(stdout) as { kept: boolean; sameMap: boolean | null };
    expect(result).toMatchObject({ kept: true, sameMap: true });
  });
});
