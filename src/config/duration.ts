/** Durations as operators write them: `30s`, `5m`, `1500ms`, `1h30m`, or a bare number of seconds. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h)/;

/**
 * The longest duration agentd waits for: 596h, the whole hours below 2^31-1 ms. A timer holds
 * at most 2^31-1 ms (about 24.8 days); a longer one would fire at once.
 */
export const MAX_DURATION_MS = 596 * 3_600_000;
/** MAX_DURATION_MS as messages and help show it. */
export const MAX_DURATION_TEXT = '596h';

/** Parse a duration to milliseconds; returns null when the text is not a duration. */
export function parseDuration(text: string): number | null {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  let rest = trimmed;
  let total = 0;
  if (rest === '') return null;
  while (rest !== '') {
    const m = DURATION_RE.exec(rest);
    if (!m) return null;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

/** Render milliseconds the way `parseDuration` reads them (for defaults in help and docs). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
