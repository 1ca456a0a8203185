/**
 * Installation from the cache into a rootfs. The cache file's digest is checked again while it
 * is read (a cache entry corrupted on disk is caught here), and nothing lands at its final path
 * until all of it is written: single binaries go to a temp file beside the target and are
 * renamed; tarballs are unpacked into a temp dir in the rootfs and their files renamed.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, mkdtemp, realpath, rename } from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { Parser, type ReadEntry } from 'tar';
import { ChecksumMismatchError, DownloadFailedError, noSpaceOr, UnsafeArchiveError } from '../../errors.js';
import {
  destroyQuietly,
  endWritable,
  ensureDirInRootfs,
  openForWrite,
  removeQuietly,
  tempNameFor,
  writeChunk,
} from './file-io.js';
import type { ArchiveInstall, ArtifactSpec, FileInstall, OpenWrite } from './types.js';

export interface InstallDeps {
  openWrite: OpenWrite;
  signal: AbortSignal;
}

/** Install `spec` from the verified cache file `cached` (digest `sha256`) into `rootfsDir`. */
export async function installFromCache(
  spec: ArtifactSpec,
  cached: string,
  sha256: string,
  rootfsDir: string,
  deps: InstallDeps,
): Promise<void> {
  const what = `install ${spec.name} ${spec.version}`;
  try {
    if (spec.install.kind === 'file') await installFile(what, spec.install, cached, sha256, rootfsDir, deps);
    else await installArchive(what, spec.url, spec.install, cached, sha256, rootfsDir, deps);
  } catch (err) {
    throw noSpaceOr(err, what);
  }
}

function mismatch(what: string, cached: string, want: string, got: string): ChecksumMismatchError {
  return new ChecksumMismatchError(`${what}: cache entry ${cached}`, want, got, {
    data: { cacheFile: cached },
  });
}

async function installFile(
  what: string,
  plan: FileInstall,
  cached: string,
  sha256: string,
  rootfsDir: string,
  deps: InstallDeps,
): Promise<void> {
  const dir = await ensureDirInRootfs(rootfsDir, path.posix.dirname(plan.path));
  const target = path.join(dir, path.posix.basename(plan.path));
  const tmp = tempNameFor(target);
  let out: Writable | undefined;
  try {
    out = openForWrite(deps.openWrite, tmp, plan.mode, true);
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(cached, { highWaterMark: 1 << 20, signal: deps.signal })) {
      hash.update(chunk as Buffer);
      await writeChunk(out, chunk as Buffer);
    }
    await endWritable(out);
    out = undefined;
    const got = hash.digest('hex');
    if (got !== sha256) throw mismatch(what, cached, sha256, got);
    // The create mode is filtered by the umask; the installed mode must be exact.
    await chmod(tmp, plan.mode);
    await rename(tmp, target);
  } catch (err) {
    if (out) await destroyQuietly(out);
    await removeQuietly(tmp);
    throw err;
  }
}

/** Why an archive entry path is refused, or null when it is acceptable. */
export function unsafeEntryReason(entryPath: string): string | null {
  if (entryPath.startsWith('/')) return 'absolute paths are not allowed';
  if (entryPath.split('/').includes('..')) return "paths containing '..' are not allowed";
  return null;
}

/** The base name under which an entry is installed, or null when the plan does not take it. */
function selectEntry(entry: ReadEntry, plan: ArchiveInstall): string | null {
  if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') return null;
  const rel = entry.path.replace(/^(\.\/)+/, '');
  const dir = path.posix.dirname(rel);
  const base = path.posix.basename(rel);
  if ((dir === '.' ? '' : dir) !== plan.dir) return null;
  if (plan.names && !plan.names.includes(base)) return null;
  return base;
}

async function installArchive(
  what: string,
  url: string,
  plan: ArchiveInstall,
  cached: string,
  sha256: string,
  rootfsDir: string,
  deps: InstallDeps,
): Promise<void> {
  const destDir = await ensureDirInRootfs(rootfsDir, plan.destDir);
  // The temp dir is in the rootfs so the final renames stay on one filesystem.
  const tmpDir = await mkdtemp(path.join(await realpath(rootfsDir), '.agentd-unpack-'));
  const writes: Promise<void>[] = [];
  try {
    const selected = new Map<string, string>();
    let unsafe: UnsafeArchiveError | undefined;
    const parser = new Parser({
      strict: true,
      // Called with the raw header path, before anything is written.
      filter: (entryPath, entry) => {
        const reason = unsafeEntryReason(entryPath);
        if (reason !== null) unsafe ??= new UnsafeArchiveError(entryPath, `${reason} (${what} from ${url})`);
        return !unsafe && selectEntry(entry as ReadEntry, plan) !== null;
      },
    });
    parser.on('entry', (entry: ReadEntry) => {
      const base = selectEntry(entry, plan) ?? '';
      // Flat, numbered temp names: a later entry with the same name wins, like tar.
      const file = path.join(tmpDir, `${writes.length}`);
      selected.set(base, file);
      const write = pumpEntry(entry, openForWrite(deps.openWrite, file, plan.mode, true));
      write.catch(() => undefined);
      writes.push(write);
    });
    let hex: string;
    try {
      hex = await feedArchive(parser, cached, deps.signal);
      await Promise.all(writes);
    } catch (err) {
      if (deps.signal.aborted) throw err;
      // A damaged cache entry makes tar fail before the digest is known: report the mismatch.
      const got = await hashFile(cached);
      throw got === sha256 ? err : mismatch(what, cached, sha256, got);
    }
    if (hex !== sha256) throw mismatch(what, cached, sha256, hex);
    if (unsafe) throw unsafe;
    for (const name of plan.required) {
      if (!selected.has(name)) {
        throw new DownloadFailedError(
          `${what}: the archive from ${url} has no ${name} in ${plan.dir || 'its root'}`,
          {
            data: { url, missing: name },
          },
        );
      }
    }
    for (const [base, file] of selected) {
      await chmod(file, plan.mode);
      await rename(file, path.join(destDir, base));
    }
  } finally {
    // Why wait: a write still in flight could recreate a file after the temp dir is removed.
    await Promise.allSettled(writes);
    await removeQuietly(tmpDir);
  }
}

/** Copy one archive entry into `out`, pausing the entry while `out` is full. */
function pumpEntry(entry: ReadEntry, out: Writable): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let failed = false;
    out.on('error', (err) => {
      failed = true;
      // Let the parser go on (discarding this entry) so it can finish or fail by itself.
      entry.resume();
      reject(err);
    });
    entry.on('data', (chunk: Buffer) => {
      if (failed) return;
      if (!out.write(chunk)) {
        entry.pause();
        out.once('drain', () => entry.resume());
      }
    });
    entry.on('end', () => {
      if (failed) return;
      endWritable(out).then(resolve, (err: unknown) => {
        failed = true;
        reject(err instanceof Error ? err : new Error(String(err)));
      });
    });
  }).catch(async (err: unknown) => {
    await destroyQuietly(out);
    throw err;
  });
}

/** Stream the cache file into tar's parser while hashing it; resolves with the digest once parsed. */
async function feedArchive(parser: Parser, cached: string, signal: AbortSignal): Promise<string> {
  const done = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
  });
  done.catch(() => undefined);
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(cached, { highWaterMark: 1 << 20, signal })) {
    hash.update(chunk as Buffer);
    if (!parser.write(chunk as Buffer)) {
      await Promise.race([done, new Promise<void>((resolve) => parser.once('drain', resolve))]);
    }
  }
  parser.end();
  await done;
  return hash.digest('hex');
}

async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
