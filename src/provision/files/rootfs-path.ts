/**
 * Writing files into a machine rootfs without ever leaving it. A rootfs unpacked from an
 * image is full of symlinks, some absolute (`var/run -> /run`, `etc/resolv.conf ->
 * /run/systemd/resolve/stub-resolv.conf`): followed from the host they point at the host's own
 * files. Paths are therefore resolved the way the machine will see them (absolute links
 * re-rooted at the rootfs, `..` clamped at its top), and a symlink in the place of a file we
 * write is replaced, never written through.
 */
import { chmod, lstat, mkdir, readlink, rename, rm, symlink } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { AgentError, errorCode, PreconditionFailedError, toAgentError } from '../../errors.js';
import { writeFileAtomic } from '../../host/fs-atomic.js';

/** Linux's own limit on symlinks followed while resolving one path. */
const MAX_SYMLINK_HOPS = 40;

function splitRelative(rel: string): string[] {
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
  if (rel.startsWith('/') || parts.length === 0 || parts.includes('..')) {
    throw new AgentError('INTERNAL', `rootfs path must be relative without "..": got ${JSON.stringify(rel)}`);
  }
  return parts;
}

/**
 * Resolve `parts` under `root` the way a process chrooted there would: absolute symlinks are
 * re-rooted, `..` stops at the top. Missing components are kept as they are (the caller
 * creates them or gets ENOENT).
 */
async function resolveComponents(root: string, parts: string[], what: string): Promise<string> {
  const pending = [...parts];
  let resolved: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === '.' || name === '') continue;
    if (name === '..') {
      resolved.pop(); // `..` at the top of the rootfs stays at the top, as in a chroot
      continue;
    }
    const candidate = path.join(root, ...resolved, name);
    const st = await lstat(candidate).catch((err: unknown) => {
      if (errorCode(err) === 'ENOENT') return undefined;
      throw toAgentError(err, `${what}: lstat ${candidate}`);
    });
    if (st?.isSymbolicLink()) {
      if (++hops > MAX_SYMLINK_HOPS) {
        throw new PreconditionFailedError(`${what}: more than ${MAX_SYMLINK_HOPS} symlinks to follow`);
      }
      const target = await readlink(candidate);
      if (target.startsWith('/')) resolved = [];
      pending.unshift(...target.split('/'));
      continue;
    }
    if (st !== undefined && !st.isDirectory() && pending.length > 0) {
      throw new PreconditionFailedError(`${what}: ${path.join(root, ...resolved, name)} is not a directory`);
    }
    resolved.push(name);
  }
  return path.join(root, ...resolved);
}

/**
 * The host path of the directory that will hold `rel` inside `rootfs`, with every symlink on
 * the way resolved as the machine would see it.
 */
export async function resolveParentInRootfs(rootfs: string, rel: string): Promise<string> {
  const parts = splitRelative(rel);
  parts.pop();
  return resolveComponents(path.resolve(rootfs), parts, `resolve ${rel} in ${rootfs}`);
}

/** The host path `rel` inside `rootfs` refers to, following symlinks (the last one too) inside it. */
export async function resolvePathInRootfs(rootfs: string, rel: string): Promise<string> {
  return resolveComponents(path.resolve(rootfs), splitRelative(rel), `resolve ${rel} in ${rootfs}`);
}

/** Where `rel` will be written, after clearing a symlink (or refusing a directory) in its place. */
async function prepareTarget(rootfs: string, rel: string): Promise<string> {
  const dir = await resolveParentInRootfs(rootfs, rel);
  const file = path.join(dir, path.posix.basename(rel));
  const st = await lstat(file).catch((err: unknown) => {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw toAgentError(err, `write ${rel} in ${rootfs}`);
  });
  if (st?.isDirectory()) {
    throw new PreconditionFailedError(`write ${rel} in ${rootfs}: a directory is in the way of the file`);
  }
  // Why unlink: the atomic writer resolves symlinks and would write through them, possibly
  // onto the host; the machine must get a regular file here instead.
  if (st?.isSymbolicLink()) await rm(file);
  return file;
}

/** Write `data` to `rel` inside `rootfs` atomically with `mode`, never through a symlink. */
export async function writeRootfsFile(
  rootfs: string,
  rel: string,
  data: string | Uint8Array,
  mode: number,
): Promise<void> {
  try {
    const file = await prepareTarget(rootfs, rel);
    await writeFileAtomic(file, data, { mode });
  } catch (err) {
    throw toAgentError(err, `write ${rel} in ${rootfs}`);
  }
}

/** Make `rel` inside `rootfs` a symlink to `target`, replacing whatever file or link is there. */
export async function writeRootfsSymlink(rootfs: string, rel: string, target: string): Promise<void> {
  try {
    const file = await prepareTarget(rootfs, rel);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
    // Create beside and rename over, so the link is never missing nor half-made.
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.agentd-${randomUUID()}`);
    await symlink(target, tmp);
    try {
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  } catch (err) {
    throw toAgentError(err, `link ${rel} -> ${target} in ${rootfs}`);
  }
}

/**
 * Make directory `rel` inside `rootfs` with exactly `mode` (an existing one gets that mode),
 * its parents 0755, never through a symlink out of the rootfs.
 */
export async function ensureRootfsDir(rootfs: string, rel: string, mode: number): Promise<void> {
  try {
    const dir = await resolvePathInRootfs(rootfs, rel);
    await mkdir(path.dirname(dir), { recursive: true, mode: 0o755 });
    await mkdir(dir, { mode }).catch((err: unknown) => {
      if (errorCode(err) !== 'EEXIST') throw err;
    });
    const st = await lstat(dir);
    if (!st.isDirectory()) {
      throw new PreconditionFailedError(`make ${rel} in ${rootfs}: a file is in the way of the directory`);
    }
    await chmod(dir, mode);
  } catch (err) {
    throw toAgentError(err, `make ${rel} in ${rootfs}`);
  }
}
