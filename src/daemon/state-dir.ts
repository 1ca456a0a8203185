/**
 * The state dir at start: created when missing (mode 0700, its missing parents 0755), and proven
 * writable before agentd writes anything, so a state dir it cannot write refuses the start
 * (INVALID_CONFIG naming --state-dir, exit 2) instead of failing the first operation. Every
 * operation is journaled there (docs/operations.md, "A corrupt state file").
 */
import { mkdir, open, realpath, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { describeError, errorCode, InvalidConfigError } from '../errors.js';

function stateDirError(dir: string, what: string, cause?: unknown): InvalidConfigError {
  return new InvalidConfigError(`--state-dir ${dir}: ${what}`, {
    cause,
    data: { option: 'stateDir', ...(errorCode(cause) ? { errno: errorCode(cause) } : {}) },
  });
}

/** Create the state dir if it is missing; returns it with symlinks resolved (what the instance lock names). */
export async function prepareStateDir(dir: string): Promise<string> {
  try {
    await mkdir(path.dirname(dir), { recursive: true, mode: 0o755 });
    await mkdir(dir, { mode: 0o700 });
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
  return real;
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
