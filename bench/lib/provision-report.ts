/** Table printing, number formatting and timing for `bench/provision.ts`. */
import { readFileSync } from 'node:fs';

/** Print rows as a left-aligned table with a header underline. */
export function printTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  console.log(`  ${line(header)}`);
  console.log(`  ${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const r of rows) console.log(`  ${line(r)}`);
}

export const MiB = 1024 * 1024;
export const seconds = (ms: number): string => (ms / 1000).toFixed(3);
export const mibps = (bytes: number, ms: number): string => (bytes / MiB / (ms / 1000)).toFixed(0);
export const ratio = (x: number): string => x.toFixed(2);

/**
 * CPU time used so far, in milliseconds: this process (every thread) and its waited-for children
 * (`/proc/self/stat` cutime + cstime, in clock ticks of 10 ms on Linux).
 */
export function cpuMs(): { self: number; children: number } {
  const usage = process.cpuUsage();
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    self: (usage.user + usage.system) / 1000,
    children: (Number(fields[13]) + Number(fields[14])) * 10,
  };
}

/** Wall time of `fn` in milliseconds. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now();
  const value = await fn();
  return { ms: performance.now() - start, value };
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
