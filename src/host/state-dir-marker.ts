/**
 * agentd's mark on its state directory: a file that says the directory is agentd's. agentd
 * writes it into a state dir it creates (or finds empty, as systemd's `StateDirectory=` makes
 * it, or finds with agentd's own files in it: a node older than the mark); `agentctl uninstall`
 * removes a state dir only when the mark is there (docs/operations.md, "Uninstall").
 */
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from './fs-atomic.js';

/** The marker's name in the state dir. */
export const STATE_DIR_MARKER = '.agentd-state-dir';
const MARKER_FIRST_LINE = 'agentd state directory';
const MARKER_TEXT = `${MARKER_FIRST_LINE}\n# agentd keeps its journal, operations and caches here; agentctl uninstall removes this directory.\n`;

/** What agentd keeps in a state dir: a directory holding one of these is agentd's (docs/operations.md). */
export const STATE_DIR_LAYOUT = [
  'node.json',
  'journal.json',
  'operations',
  'cache',
  'watcher-blocked-target.json',
  'sim-mirror.json',
  // install.sh's record of the install, written into the state dir before agentd first starts.
  'install-sh.state',
] as const;

/** Whether `dir` carries agentd's marker: a regular file whose first line is the marker's. */
export async function hasStateDirMarker(dir: string): Promise<boolean> {
  const file = path.join(dir, STATE_DIR_MARKER);
  try {
    if (!(await lstat(file)).isFile()) return false;
    return (await readFile(file, 'utf8')).split('\n', 1)[0] === MARKER_FIRST_LINE;
  } catch {
    return false;
  }
}

/**
 * Mark `dir` as agentd's when it is: agentd just created it, it is empty, or it holds agentd's
 * layout and nothing that is not agentd's. Returns whether the marker is there afterwards.
 */
export async function markStateDir(dir: string, created: boolean): Promise<boolean> {
  if (await hasStateDirMarker(dir)) return true;
  if (!created) {
    // Hidden entries (write probes, temp files) say nothing either way; anything else must be ours.
    const entries = (await readdir(dir)).filter((e) => !e.startsWith('.'));
    const ours = (e: string): boolean => STATE_DIR_LAYOUT.some((n) => e === n || e.startsWith(`${n}.`));
    if (entries.length > 0 && !entries.every(ours)) return false;
  }
  await writeFileAtomic(path.join(dir, STATE_DIR_MARKER), MARKER_TEXT, { mode: 0o644 });
  return true;
}
