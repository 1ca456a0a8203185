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
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
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
import { baseOf, parentOf } from '../tar/entry-path.js';
import { EntryPolicy } from '../tar/entry-policy.js';
import type { EntryAction } from '../tar/entry-policy.js';
import { readTarEntries } from '../tar/tar-reader.js';
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

/** The base name under which an entry is installed, or null when the plan does not take it. */
function selectEntry(action: EntryAction, plan: ArchiveInstall): string | null {
  if (action.kind !== 'file') return null;
  const dir = parentOf(action.rel);
  const base = baseOf(action.rel);
  if (dir !== plan.dir) return null;
  if (plan.names && !plan.names.includes(base)) return null;
  return base;
}

/** The policy's refusal, saying which artifact and download it came from. */
function withContext(err: unknown, what: string, url: string): unknown {
  if (!(err instanceof UnsafeArchiveError)) return err;
  const { entry, reason } = err.data as { entry: string; reason: string };
  return new UnsafeArchiveError(entry, `${reason} (${what} from ${url})`);
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
  try {
    const selected = new Map<string, string>();
    const policy = new EntryPolicy({ layer: false });
    let written = 0;
    const hash = createHash('sha256');
    async function* hashing(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
      for await (const chunk of source) {
        hash.update(chunk);
        yield chunk;
      }
    }
    // Every entry passes the policy, taken or not: one refused entry refuses the archive.
    const unpack = async (tarStream: AsyncIterable<Buffer>): Promise<void> => {
      for await (const entry of readTarEntries(tarStream)) {
        const base = selectEntry(policy.check(entry), plan);
        if (base === null) continue; // its body is skipped by the reader
        // Flat, numbered temp names: a later entry with the same name wins, like tar.
        const file = path.join(tmpDir, `${written++}`);
        await writeEntry(entry.body, openForWrite(deps.openWrite, file, plan.mode, true));
        selected.set(base, file);
      }
    };
    try {
      await pipeline(createReadStream(cached, { highWaterMark: 1 << 20 }), hashing, createGunzip(), unpack, {
        signal: deps.signal,
      });
    } catch (err) {
      if (deps.signal.aborted) throw err;
      // A damaged cache entry makes the archive unreadable before the digest is known: report the mismatch.
      const got = await hashFile(cached);
      throw got === sha256 ? withContext(err, what, url) : mismatch(what, cached, sha256, got);
    }
    const hex = hash.digest('hex');
    if (hex !== sha256) throw mismatch(what, cached, sha256, hex);
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
    await removeQuietly(tmpDir);
  }
}

/** Copy one entry's body into `out` and close it; `out` is destroyed when anything fails. */
async function writeEntry(body: AsyncIterable<Buffer>, out: Writable): Promise<void> {
  try {
    for await (const chunk of body) await writeChunk(out, chunk);
    await endWritable(out);
  } catch (err) {
    await destroyQuietly(out);
    throw err;
  }
}

async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
