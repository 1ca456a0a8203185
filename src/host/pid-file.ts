/**
 * The PID file: written by agentd at start, read by `agentctl stop`. A PID only counts when
 * the process behind it is really agentd (PIDs are reused), so both sides check
 * `/proc/<pid>/cmdline` before trusting or signalling it.
 */
import { readFileSync, rmSync } from 'node:fs';
import { link, lstat, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidConfigError, noSpaceOr, PreconditionFailedError } from '../errors.js';
import { writeFileAtomic } from './fs-atomic.js';

export type PidFileState =
  | { kind: 'absent' }
  | { kind: 'garbage'; content: string }
  | { kind: 'dead'; pid: number }
  | { kind: 'foreign'; pid: number; cmdline: string }
  | { kind: 'agentd'; pid: number; cmdline: string };

/** The command line of a live process, or null when it does not exist. */
export function processCmdline(pid: number, procDir = '/proc'): string | null {
  try {
    return readFileSync(path.join(procDir, String(pid), 'cmdline'), 'utf8')
      .replace(/\0+$/, '')
      .split('\0')
      .join(' ');
  } catch {
    return null;
  }
}

const AGENTD_NAME = /^agentd(\.js)?$/;
const NODE_NAME = /^node(js)?$/;
const baseName = (arg: string): string => arg.slice(arg.lastIndexOf('/') + 1);

/**
 * True when the command line is agentd's: the program itself is named agentd (the installed
 * binary, or the process title agentd sets), or the program is node and the script it runs —
 * its first argument that is not a node option — is agentd(.js). A program that merely has
 * agentd as an argument (`less /usr/bin/agentd`, `vim agentd.js`) is not agentd.
 */
export function isAgentdCmdline(cmdline: string): boolean {
  const [program, ...args] = cmdline.split(' ').filter((a) => a !== '');
  if (program === undefined) return false;
  if (AGENTD_NAME.test(baseName(program))) return true;
  if (!NODE_NAME.test(baseName(program))) return false;
  const script = nodeScript(args);
  return script !== null && AGENTD_NAME.test(baseName(script));
}

/** node options whose value is the next argument (so that value is not taken for the script). */
const NODE_VALUE_OPTIONS = new Set([
  '-r',
  '--require',
  '--import',
  '--loader',
  '--experimental-loader',
  '-C',
  '--conditions',
  '--title',
  '--env-file',
  '--input-type',
]);
/** node options that run code given on the command line: there is no script then. */
const NODE_EVAL_OPTIONS = new Set(['-e', '--eval', '-p', '--print', '-i', '--interactive']);

/** The script node runs: its first argument that is neither a node option nor an option's value. */
function nodeScript(args: readonly string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (NODE_EVAL_OPTIONS.has(arg)) return null;
    if (NODE_VALUE_OPTIONS.has(arg)) i++;
    else if (!arg.startsWith('-')) return arg;
  }
  return null;
}

/**
 * Read and classify a PID file. Never throws for a missing or malformed file; refuses a path
 * that holds something other than a regular file (`--pid-file /dev/null`, a directory, a link):
 * agentd would otherwise read it as a stale PID file and then fail to replace it.
 */
export async function inspectPidFile(file: string, procDir = '/proc'): Promise<PidFileState> {
  const st = await lstat(file).catch(() => undefined);
  if (st && !st.isFile()) {
    const what = st.isSymbolicLink()
      ? 'a symbolic link'
      : st.isDirectory()
        ? 'a directory'
        : 'not a regular file';
    throw new InvalidConfigError(
      `--pid-file ${file}: the path is ${what}; the PID file must be a regular file (or not exist yet)`,
    );
  }
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    throw err;
  }
  const trimmed = text.trim();
  if (!isPidFileContent(text) || Number(trimmed) <= 1)
    return { kind: 'garbage', content: trimmed.slice(0, 64) };
  const pid = Number(trimmed);
  const cmdline = processCmdline(pid, procDir);
  if (cmdline === null) return { kind: 'dead', pid };
  return isAgentdCmdline(cmdline) ? { kind: 'agentd', pid, cmdline } : { kind: 'foreign', pid, cmdline };
}

/**
 * The refusal of a file at the PID file's path that is not a PID file (exit 2): agentd neither
 * replaces it nor, at stop, removes it.
 */
export function foreignPidFileError(file: string, content: string): InvalidConfigError {
  return new InvalidConfigError(
    `--pid-file ${file}: the file holds something other than a PID (${JSON.stringify(content)}), so it is not agentd's PID file and is left as it is; choose another --pid-file, or remove the file if it is yours to remove`,
    { data: { option: 'pidFile', pidFile: file } },
  );
}

/**
 * Whether `text` is a PID file's content: a decimal PID (agentd writes it with a newline; blanks
 * around it are tolerated, as `agentctl stop` always has), nothing else.
 */
export function isPidFileContent(text: string): boolean {
  return /^\d{1,10}$/.test(text.trim());
}

/**
 * Write the PID file. `create`: only where nothing is (O_EXCL semantics: the file is written
 * under a temp name and hard-linked into place, which fails when a file appeared there, so it
 * is never seen empty or half-written). `replace`: over a stale PID file the caller inspected
 * (`inspectPidFile` said `dead` or `foreign`: a PID file's content), atomically.
 */
export async function writePidFile(
  file: string,
  pid: number,
  how: 'create' | 'replace' = 'create',
): Promise<void> {
  if (how === 'replace') {
    await writeFileAtomic(file, `${pid}\n`, { mode: 0o644 });
    return;
  }
  await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  const tmp = `${file}.${pid}.tmp`;
  try {
    await writeFile(tmp, `${pid}\n`, { mode: 0o644, flag: 'wx' });
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new PreconditionFailedError(
        `--pid-file ${file}: a file appeared there while agentd started; agentd creates its PID file only where nothing is`,
      );
    }
    throw noSpaceOr(err, `write the PID file ${file}`);
  } finally {
    await rm(tmp, { force: true });
  }
}

/** Remove the PID file only if it still names `pid` (a newer daemon may own it now). */
export async function removePidFile(file: string, pid: number): Promise<void> {
  try {
    if ((await readFile(file, 'utf8')).trim() !== String(pid)) return;
  } catch {
    return;
  }
  await rm(file, { force: true });
}

/**
 * `removePidFile` in one synchronous step, for a process about to exit at once: nothing else of
 * it runs between the removal and the exit.
 */
export function removePidFileSync(file: string, pid: number): void {
  try {
    if (readFileSync(file, 'utf8').trim() !== String(pid)) return;
  } catch {
    return;
  }
  rmSync(file, { force: true });
}
