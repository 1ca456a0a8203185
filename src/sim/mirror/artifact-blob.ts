/**
 * Large deterministic files for the download benchmark (`/bench/blob-<bytes>.bin`): one 1 MiB
 * block from a xorshift PRNG, repeated. Streamed with backpressure, never held whole in memory.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';

const BLOCK_SIZE = 1 << 20;
/** Upper bound of a blob size, so a typo cannot make the mirror stream for hours. */
export const MAX_BLOB_BYTES = 16 * 1024 ** 3;

let block: Buffer | undefined;

function blobBlock(): Buffer {
  if (!block) {
    const words = new Uint32Array(BLOCK_SIZE / 4);
    let x = 0x9e3779b9;
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      words[i] = x >>> 0;
    }
    block = Buffer.from(words.buffer);
  }
  return block;
}

/** The chunks making up a blob of `bytes` (views of the shared block). */
function* blobChunks(bytes: number): Generator<Buffer> {
  const b = blobBlock();
  for (let left = bytes; left > 0; left -= BLOCK_SIZE) yield left >= BLOCK_SIZE ? b : b.subarray(0, left);
}

const digests = new Map<number, Promise<string>>();

/** SHA-256 hex of the blob of `bytes` (computed once, yielding to the event loop between blocks). */
export function blobSha256(bytes: number): Promise<string> {
  let digest = digests.get(bytes);
  if (!digest) {
    digest = (async () => {
      const hash = createHash('sha256');
      let n = 0;
      for (const chunk of blobChunks(bytes)) {
        hash.update(chunk);
        if (++n % 32 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
      return hash.digest('hex');
    })();
    digests.set(bytes, digest);
  }
  return digest;
}

/**
 * Stream the first `sendBytes` bytes of the blob of `bytes` to `res` (headers already set),
 * waiting for `drain`; stops early if the client goes away.
 */
export async function streamBlob(res: ServerResponse, bytes: number, sendBytes = bytes): Promise<void> {
  let sent = 0;
  for (const chunk of blobChunks(bytes)) {
    if (res.destroyed || sent >= sendBytes) return;
    const part = sent + chunk.length > sendBytes ? chunk.subarray(0, sendBytes - sent) : chunk;
    sent += part.length;
    if (!res.write(part)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
}
