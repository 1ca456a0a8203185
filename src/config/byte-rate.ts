/** Byte rates as operators write them: `10KiB/s`, `1MiB/s`, `500B/s`, or a bare number of bytes per second. */
const UNIT_BYTES: Record<string, number> = {
  B: 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  kB: 1000,
  MB: 1000 ** 2,
};
const RATE_RE = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|kB|MB)\/s$/;

/** Parse a rate to bytes per second; null when the text is not a rate. */
export function parseByteRate(text: string): number | null {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed));
  const m = RATE_RE.exec(trimmed);
  if (!m) return null;
  return Math.round(Number(m[1]) * (UNIT_BYTES[m[2] as string] as number));
}

/** Render bytes per second the way `parseByteRate` reads them: `10KiB/s`, `1.5MiB/s`, `300B/s`. */
export function formatByteRate(bytesPerSecond: number): string {
  return `${formatBytes(bytesPerSecond)}/s`;
}

/** Bytes in the largest binary unit that keeps a figure ≥ 1: `826B`, `10KiB`, `1.5MiB`, `2GiB`. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(1))}${unit}`;
  }
  return `${bytes}B`;
}
