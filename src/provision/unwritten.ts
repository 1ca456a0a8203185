/** After a partial write: what is left of `buffers` once their first `written` bytes went out. */
export function unwritten<T extends Uint8Array>(buffers: readonly T[], written: number): T[] {
  const out: T[] = [];
  let skip = written;
  for (const b of buffers) {
    if (skip >= b.byteLength) skip -= b.byteLength;
    else {
      out.push(skip > 0 ? (b.subarray(skip) as T) : b);
      skip = 0;
    }
  }
  return out;
}
