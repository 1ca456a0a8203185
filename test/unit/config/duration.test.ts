import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../../src/config/duration.js';

describe('parseDuration', () => {
  it.each([
    ['30s', 30_000],
    ['5m', 300_000],
    ['1500ms', 1500],
    ['1h', 3_600_000],
    ['1h30m', 5_400_000],
    ['2m30s', 150_000],
    ['1.5s', 1500],
    ['0s', 0],
    ['0', 0],
    ['30', 30_000],
    ['2.5', 2500],
    [' 10s ', 10_000],
    ['1m1ms', 60_001],
  ])('%j is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', ' ', 's', '5x', '-5s', '5 s', '1d', '5s5', 'ten seconds', '1.s', '.5s', '5s ms', '0x10'])(
    '%j is not a duration',
    (text) => {
      expect(parseDuration(text)).toBeNull();
    },
  );
});

describe('formatDuration', () => {
  it.each([
    [30_000, '30s'],
    [300_000, '5m'],
    [3_600_000, '1h'],
    [7_200_000, '2h'],
    [90_000, '90s'],
    [1500, '1500ms'],
    [0, '0s'],
  ])('%d ms is %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([1, 999, 1000, 61_000, 90_000, 3_600_000, 5_400_000, 86_400_000])(
    'round-trips %d ms through parseDuration',
    (ms) => {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    },
  );
});
