/**
 * Child process for the download-sink tests: writes `bytes` bytes through a worker sink into
 * `file` and prints one JSON line, `{"sha256":…}` or, after aborting, `{"error":…,"code":…,"fileLeft":…}`.
 * Run under `prlimit --fsize` to make the worker's writes fail part-way, as a full disk would.
 * Usage: node --import tsx test/support/sink-child.ts <file> <bytes>
 */
import { existsSync } from 'node:fs';
import { createDownloadSink } from '../../src/provision/artifacts/sink.js';

const [file, bytesArg] = process.argv.slice(2);
if (!file || !bytesArg) throw new Error('usage: sink-child.ts <file> <bytes>');
const bytes = Number(bytesArg);
const sink = createDownloadSink(file, { expectedBytes: bytes, mode: 0o644, durable: false, where: 'worker' });
try {
  for (let sent = 0; sent < bytes; sent += 65_536) {
    if (!sink.write(Buffer.alloc(Math.min(65_536, bytes - sent), 1))) {
      await new Promise<void>((resume) => sink.onRoom(resume));
    }
  }
  process.stdout.write(`${JSON.stringify(await sink.finish())}\n`);
} catch (err) {
  await sink.abort();
  const e = err as NodeJS.ErrnoException;
  process.stdout.write(`${JSON.stringify({ error: e.message, code: e.code, fileLeft: existsSync(file) })}\n`);
}
