/**
 * The host's available memory, as the kernel estimates it (`MemAvailable` in /proc/meminfo: what
 * can be allocated without swapping, page cache that can be dropped included). The standby
 * check reads it before a second machine boots (docs/architecture.md, "Hot standby").
 */
import { readFile } from 'node:fs/promises';

/** `MemAvailable` of a /proc/meminfo text, in bytes; null when it has none. */
export function parseMemAvailable(meminfo: string): number | null {
  const m = /^MemAvailable:\s+(\d+) kB$/m.exec(meminfo);
  return m ? Number(m[1]) * 1024 : null;
}

/** The host's `MemAvailable` in bytes; null when the file has no such line (kernels before 3.14). */
export async function readMemAvailable(file = '/proc/meminfo'): Promise<number | null> {
  return parseMemAvailable(await readFile(file, 'utf8'));
}
