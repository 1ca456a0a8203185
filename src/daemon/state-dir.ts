/**
 * The state dir at start: created when missing (mode 0700, its missing parents 0755), marked as
 * agentd's, and proven writable before agentd writes anything, so a state dir it cannot write refuses the start
 * (INVALID_CONFIG naming --state-dir, exit 2) instead of failing the first operation. Every
 * operation is journaled there (docs/operations.md, "A corrupt state file").
 */
import { mkdir, open, readdir, realpath, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { describeError, errorCode, InvalidConfigError } from '../errors.js';
import { markStateDir, STATE_DIR_MARKER } from '../host/state-dir-marker.js';

function stateDirError(dir: string, what: string, cause?: unknown): InvalidConfigError {
  return new InvalidConfigError(`--state-dir ${dir}: ${what}`, {
    cause,
    data: { option: 'stateDir', ...(errorCode(cause) ? { errno: errorCode(cause) } : {}) },
  });
}

/** The prepared state dir: its real path, and the directories this start created (deepest first). */
export interface PreparedStateDir {
  real: string;
  created: string[];
}

/**
 * Create the state dir if it is missing; returns it with symlinks resolved (what the instance
 * lock names) and what was created, so that a start refused later can take it back.
 */
export async function prepareStateDir(dir: string): Promise<PreparedStateDir> {
  const created: string[] = [];
  try {
    const first = await mkdir(path.dirname(dir), { recursive: true, mode: 0o755 });
    // mkdir -p returns the first directory it made: every one from there down to the parent is new.
    for (let p = path.dirname(dir); first !== undefined; p = path.dirname(p)) {
      created.push(p);
      if (p === first || p === path.dirname(p)) break;
    }
    await mkdir(dir, { mode: 0o700 });
    created.unshift(dir);
  } catch (err) {
    if (errorCode(err) !== 'EEXIST') throw stateDirError(dir, `cannot create it: ${describeError(err)}`, err);
  }
  let isDirectory: boolean;
  let real: string;
  try {
    isDirectory = (await stat(dir)).isDirectory();
    real = await realpath(dir);
  } catch (err) {
    throw stateDirError(dir, describeError(err), err);
  }
  if (!isDirectory) throw stateDirError(dir, 'exists and is not a directory');
  return { real, created };
}

/**
 * Put agentd's marker into the state dir (src/host/state-dir-marker.ts) when it is agentd's: one
 * it created, an empty one, or one holding agentd's layout (a node from before the marker).
 * A directory that holds anything else is used but not marked: `agentctl uninstall` will not
 * remove it, and the log says so.
 */
export async function markOrWarn(
  dir: string,
  created: boolean,
  logger: { warn(obj: object, msg: string): void },
): Promise<void> {
  let marked: boolean;
  try {
    marked = await markStateDir(dir, created);
  } catch (err) {
    throw stateDirError(dir, `cannot write its marker ${STATE_DIR_MARKER} (${describeError(err)})`, err);
  }
  if (!marked) {
    logger.warn(
      { stateDir: dir },
      `the state directory ${dir} holds files that are not agentd's: it is not marked as agentd's, and agentctl uninstall will not remove it`,
    );
  }
}

/**
 * After a failed start: remove the directories that start created, deepest first, each only when
 * nothing but agentd's marker is in it (rmdir never removes what another put there).
 */
export async function removeCreatedStateDir(created: readonly string[]): Promise<void> {
  for (const d of created) {
    try {
      const entries = await readdir(d);
      if (entries.length === 1 && entries[0] === STATE_DIR_MARKER) await rm(path.join(d, STATE_DIR_MARKER));
      await rmdir(d);
    } catch {
      return; // not empty (or gone): it and its parents stay
    }
  }
}

/** Create and remove a file in the state dir; throws naming --state-dir when that cannot be done. */
export async function checkStateDirWritable(dir: string): Promise<void> {
  const probe = path.join(dir, `.agentd-write-check-${process.pid}`);
  try {
    const handle = await open(probe, 'w', 0o600);
    await handle.close();
    await rm(probe, { force: true });
  } catch (err) {
    throw stateDirError(dir, `not writable (${describeError(err)})`, err);
  }
}
