import { describe, expect, it } from 'vitest';
import type { MaintenanceWindow } from '../../../src/fleet/policy.js';
import { anyWindowOpen, isWindowOpen, localTime, nextWindowOpen } from '../../../src/fleet/windows.js';

const at = (iso: string): number => Date.parse(iso);
const win = (w: Partial<MaintenanceWindow>): MaintenanceWindow => ({
  days: ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'],
  start: '01:00',
  end: '03:00',
  timeZone: 'UTC',
  ...w,
});

describe('maintenance windows', () => {
  it('computes weekday and wall time in the zone', () => {
    // 2026-11-25 is a Wednesday; 23:30 UTC is already Thursday 00:30 in Berlin.
    expect(localTime(at('2026-11-25T23:30:00Z'), 'UTC')).toEqual({ weekday: 'Wed', minutes: 23 * 60 + 30 });
    expect(localTime(at('2026-11-25T23:30:00Z'), 'Europe/Berlin')).toEqual({ weekday: 'Thu', minutes: 30 });
  });

  it('opens at start and closes at end, on listed days only', () => {
    const w = win({ days: ['Wed'] });
    expect(isWindowOpen(w, at('2026-11-25T00:59:00Z'))).toBe(false);
    expect(isWindowOpen(w, at('2026-11-25T01:00:00Z'))).toBe(true);
    expect(isWindowOpen(w, at('2026-11-25T02:59:59Z'))).toBe(true);
    expect(isWindowOpen(w, at('2026-11-25T03:00:00Z'))).toBe(false);
    expect(isWindowOpen(w, at('2026-11-26T01:30:00Z'))).toBe(false);
  });

  it('crosses midnight when the end is before the start', () => {
    const w = win({ days: ['Fri'], start: '22:00', end: '02:00' });
    expect(isWindowOpen(w, at('2026-11-27T21:59:00Z'))).toBe(false); // Fri
    expect(isWindowOpen(w, at('2026-11-27T23:00:00Z'))).toBe(true); // Fri evening
    expect(isWindowOpen(w, at('2026-11-28T01:59:00Z'))).toBe(true); // Sat morning: Friday's window
    expect(isWindowOpen(w, at('2026-11-28T02:00:00Z'))).toBe(false);
    expect(isWindowOpen(w, at('2026-11-28T23:00:00Z'))).toBe(false); // Sat evening: not listed
    expect(isWindowOpen(w, at('2026-11-27T01:00:00Z'))).toBe(false); // Fri morning: Thursday's
  });

  it('follows the local clock across DST changes', () => {
    // Europe/Berlin springs forward on 2026-03-29 at 02:00 CET (01:00 UTC) to 03:00 CEST.
    const spring = win({ days: ['Sun'], start: '02:00', end: '04:00', timeZone: 'Europe/Berlin' });
    expect(isWindowOpen(spring, at('2026-03-29T00:30:00Z'))).toBe(false); // 01:30 CET
    expect(isWindowOpen(spring, at('2026-03-29T01:00:00Z'))).toBe(true); // 03:00 CEST
    expect(isWindowOpen(spring, at('2026-03-29T01:59:00Z'))).toBe(true); // 03:59 CEST
    expect(isWindowOpen(spring, at('2026-03-29T02:00:00Z'))).toBe(false); // 04:00 CEST
    expect(nextWindowOpen([spring], at('2026-03-29T00:30:00Z'))).toBe(at('2026-03-29T01:00:00Z'));
    // It falls back on 2026-10-25 at 03:00 CEST (01:00 UTC): 02:00-02:30 local happens twice.
    const fall = win({ days: ['Sun'], start: '02:00', end: '02:30', timeZone: 'Europe/Berlin' });
    expect(isWindowOpen(fall, at('2026-10-25T00:10:00Z'))).toBe(true); // 02:10 CEST
    expect(isWindowOpen(fall, at('2026-10-25T00:40:00Z'))).toBe(false); // 02:40 CEST
    expect(isWindowOpen(fall, at('2026-10-25T01:10:00Z'))).toBe(true); // 02:10 CET
    // New York: 09:00-17:00 local is 14:00 UTC in winter, 13:00 UTC in summer.
    const ny = win({ days: ['Mon'], start: '09:00', end: '17:00', timeZone: 'America/New_York' });
    expect(nextWindowOpen([ny], at('2026-01-05T00:00:00Z'))).toBe(at('2026-01-05T14:00:00Z'));
    expect(nextWindowOpen([ny], at('2026-07-06T00:00:00Z'))).toBe(at('2026-07-06T13:00:00Z'));
  });

  it('treats no windows as always open and finds the earliest of several', () => {
    expect(anyWindowOpen([], at('2026-11-25T12:00:00Z'))).toBe(true);
    const a = win({ days: ['Sat'], start: '10:00', end: '11:00' });
    const b = win({ days: ['Thu'], start: '10:15', end: '10:30' });
    const now = at('2026-11-25T12:00:00Z'); // Wed
    expect(nextWindowOpen([a, b], now)).toBe(at('2026-11-26T10:15:00Z'));
    expect(nextWindowOpen([a, b], at('2026-11-26T10:20:00Z'))).toBe(at('2026-11-26T10:20:00Z'));
  });
});
