/** Writing buffers to a file descriptor completely (a write may be partial), with ENOSPC as NO_SPACE. */
import fs from 'node:fs';
import { promisify } from 'node:util';
import { noSpaceOr } from '../../errors.js';
import { unwritten } from '../unwritten.js';

const writevAsync = promisify(fs.writev);

function total(buffers: readonly Buffer[]): number {
  let n = 0;
  for (const b of buffers) n += b.length;
  return n;
}

/** Write every byte of `buffers` at the descriptor's position (thread pool). `what` names the file for errors. */
export async function writeAll(fd: number, buffers: readonly Buffer[], what: string): Promise<void> {
  let pending = buffers.filter((b) => b.length > 0);
  try {
    while (pending.length > 0) {
      const { bytesWritten: written } = await writevAsync(fd, pending);
      pending = written >= total(pending) ? [] : unwritten(pending, written);
    }
  } catch (err) {
    throw noSpaceOr(err, `write ${what}`);
  }
}

/** `writeAll` on the calling thread: for small writes, where a thread-pool hop costs more than the write. */
export function writeAllSync(fd: number, buffers: readonly Buffer[], what: string): void {
  let pending = buffers.filter((b) => b.length > 0);
  try {
    while (pending.length > 0) {
      const written = fs.writevSync(fd, pending);
      pending = written >= total(pending) ? [] : unwritten(pending, written);
    }
  } catch (err) {
    throw noSpaceOr(err, `write ${what}`);
  }
}
