/**
 * Parsing of published checksum files: bare hex (`dl.k8s.io`'s `.sha256`) and `sha256sum`
 * output (`<hex>  <name>` or `<hex> *<name>` per line, as in containerd's `.sha256sum` and
 * runc's release-wide `runc.sha256sum`).
 */
import { DownloadFailedError } from '../../errors.js';
import type { ChecksumFormat } from './types.js';

const HEX_RE = /^[0-9a-fA-F]{64}$/;

interface ChecksumLine {
  hex: string;
  /** File name as written (without `*` or a leading `./`), or null for a bare hex line. */
  name: string | null;
}

/**
 * The lowercase SHA-256 hex for `entry` in the checksum file `text` fetched from `source`.
 * Throws `DownloadFailedError` when the file is malformed or does not list `entry`.
 */
export function parseChecksumFile(
  text: string,
  entry: string,
  format: ChecksumFormat,
  source: string,
): string {
  const lines = parseLines(text, source);
  const named = lines.find((l) => l.name !== null && baseName(l.name) === entry);
  if (named) return named.hex;
  if (format === 'single' && lines.length === 1 && lines[0]) return lines[0].hex;
  const listed = lines.map((l) => l.name ?? '(bare hex)').join(', ');
  throw new DownloadFailedError(
    `checksum file ${source} does not list ${entry} (it lists ${listed || 'nothing'})`,
    { data: { url: source, entry } },
  );
}

function parseLines(text: string, source: string): ChecksumLine[] {
  const out: ChecksumLine[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(\S+)(?:\s+\*?(.+))?$/.exec(line);
    const hex = m?.[1];
    if (hex === undefined || !HEX_RE.test(hex)) {
      throw new DownloadFailedError(
        `checksum file ${source}: expected "<64 hex digits>" or "<64 hex digits>  <file>" per line, received ${JSON.stringify(line.slice(0, 120))}`,
        { data: { url: source } },
      );
    }
    out.push({ hex: hex.toLowerCase(), name: m?.[2]?.trim().replace(/^\.\//, '') ?? null });
  }
  if (out.length === 0) {
    throw new DownloadFailedError(`checksum file ${source} is empty`, { data: { url: source } });
  }
  return out;
}

function baseName(name: string): string {
  const i = name.lastIndexOf('/');
  return i === -1 ? name : name.slice(i + 1);
}
