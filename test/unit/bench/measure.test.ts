/** The statistics the startup benches judge by (bench/lib/measure.ts). */
import { describe, expect, it } from 'vitest';
import { median, pairedRatio } from '../../../bench/lib/measure.js';

describe('median', () => {
  it('is the middle value, or the mean of the two middle ones', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});

describe('pairedRatio', () => {
  it('takes each round ratio first: a drift that moves both commands of a round cancels', () => {
    // The machine runs at half speed in the last three rounds: every round's ratio is 1.25.
    const base = [10, 10, 20, 20, 20];
    expect(pairedRatio([12.5, 12.5, 25, 25, 25], base).median).toBeCloseTo(1.25, 10);
    // One of them catches a fast moment in round 3: the rounds' ratios still say 1.25; the
    // ratio of the medians, which now come from different rounds, says 0.625.
    const of = [12.5, 12.5, 12.5, 25, 25];
    expect(pairedRatio(of, base).median).toBeCloseTo(1.25, 10);
    expect(median(of) / median(base)).toBeCloseTo(0.625, 10);
  });

  it('gives the middle half of the ratios', () => {
    const base = [10, 10, 10, 10, 10, 10, 10, 10];
    const of = [11, 12, 13, 14, 15, 16, 17, 18];
    const r = pairedRatio(of, base);
    expect(r.median).toBeCloseTo(1.45, 10);
    expect(r.q1).toBeCloseTo(1.3, 10);
    expect(r.q3).toBeCloseTo(1.7, 10);
  });
});
