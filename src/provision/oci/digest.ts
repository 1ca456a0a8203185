/** SHA-256 content digests (`sha256:<64 hex>`), the only algorithm the puller accepts. */
import { createHash } from 'node:crypto';

const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;

/** True when `value` is a `sha256:<64 lowercase hex>` digest. */
export function isSha256Digest(value: string): boolean {
  return DIGEST_RE.test(value);
}

/** The digest of a buffer, `sha256:<hex>`. */
export function sha256Digest(data: Uint8Array): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** The hex part of a `sha256:` digest (callers validated it with `isSha256Digest`). */
export function digestHex(digest: string): string {
  return digest.slice('sha256:'.length);
}
