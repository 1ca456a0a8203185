/**
 * Maintenance windows (docs/fleet.md, "Windows"): whether a window is open at an instant, and
 * when the next one opens. Weekday and wall time are computed in each window's own time zone with
 * Intl, so DST shifts move the window with the local clock. A window whose end is before its start
 * crosses midnight: it opens on one of its days and closes the next day.
 */
import { WEEKDAYS, type MaintenanceWindow, type Weekday } from './policy.js';

interface LocalTime {
  weekday: Weekday;
  /** Minutes since local midnight. */
  minutes: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The weekday and wall-clock minute of `ms` in `timeZone`. */
export function localTime(ms: number, timeZone: string): LocalTime {
  let weekday: Weekday = 'Mon';
  let hour = 0;
  let minute = 0;
  for (const part of formatter(timeZone).formatToParts(new Date(ms))) {
    if (part.type === 'weekday') weekday = part.value as Weekday;
    else if (part.type === 'hour') hour = Number(part.value);
    else if (part.type === 'minute') minute = Number(part.value);
  }
  return { weekday, minutes: hour * 60 + minute };
}

function toMinutes(hhmm: string): number {
  const [h = '0', m = '0'] = hhmm.split(':');
  return Number(h) * 60 + Number(m);
}

function previousDay(day: Weekday): Weekday {
  const i = WEEKDAYS.indexOf(day);
  return WEEKDAYS[(i + WEEKDAYS.length - 1) % WEEKDAYS.length] as Weekday;
}

/** Whether `w` is open at `ms`. */
export function isWindowOpen(w: MaintenanceWindow, ms: number): boolean {
  const { weekday, minutes } = localTime(ms, w.timeZone);
  const start = toMinutes(w.start);
  const end = toMinutes(w.end);
  if (start < end) return w.days.includes(weekday) && minutes >= start && minutes < end;
  // Crosses midnight: the evening part on a listed day, the morning part on the day after one.
  if (w.days.includes(weekday) && minutes >= start) return true;
  return w.days.includes(previousDay(weekday)) && minutes < end;
}

/** Whether any window is open at `ms`; no windows at all means always open. */
export function anyWindowOpen(windows: readonly MaintenanceWindow[], ms: number): boolean {
  return windows.length === 0 || windows.some((w) => isWindowOpen(w, ms));
}

/**
 * The first minute at or after `ms` at which a window is open, or null when none opens within
 * eight days (cannot happen for a valid policy). Windows are set to the minute, so stepping minute
 * by minute is exact; it runs only while every window is closed (at most ~11,500 steps, a few ms).
 */
export function nextWindowOpen(windows: readonly MaintenanceWindow[], ms: number): number | null {
  if (anyWindowOpen(windows, ms)) return ms;
  const minute = 60_000;
  const limit = ms + 8 * 24 * 60 * minute;
  for (let t = Math.ceil((ms + 1) / minute) * minute; t < limit; t += minute) {
    if (anyWindowOpen(windows, t)) return t;
  }
  return null;
}
