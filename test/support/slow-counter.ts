/** A counter file that loses increments unless something serializes them: the subject of lock tests. */
import { readFile, writeFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * One increment of the counter in `file` (absent = 0) with a pause between read and write, so
 * that two increments which overlap lose one: what a lock under test must prevent.
 */
export async function incrementSlowly(file: string): Promise<void> {
  const value = Number(await readFile(file, 'utf8').catch(() => '0'));
  await delay(2);
  await writeFile(file, String(value + 1));
}
