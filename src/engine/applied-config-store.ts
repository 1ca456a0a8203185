/**
 * Applied configs: `/etc/unbounded/agent/<machine>-applied-config.json` plus its `.sha256`
 * sidecar, in the upstream agent's format. Sidecar matches → trusted; missing → warning;
 * mismatch → CHECKSUM_MISMATCH (never silently trusted).
 *
 * Every read reads both files. Their hash, parse and validation are done again only when their
 * bytes differ from those of the last good read of that machine: the snapshot reads the node
 * every 30 s (repair's check), and on a cold runtime the hash, the JSON parse and the schema cost
 * ~14 ms of a check that is otherwise ~40 (measured on a real host; docs/benchmarks.md's git history). The bytes
 * themselves decide, not the files' times, so the answer is never older than the files.
 */
import { hash as oneShotHash } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import {
  AgentError,
  ChecksumMismatchError,
  InvalidConfigError,
  PreconditionFailedError,
  errorCode,
  toAgentError,
} from '../errors.js';
import { writeFileAtomic } from '../host/fs-atomic.js';
import type { HostPaths } from '../host/paths.js';
import type { MachineName } from '../host/types.js';
import { appliedConfigFileSchema, serializeAgentConfig, type AgentConfig } from '../config/agent-config.js';

export interface AppliedConfigRecord {
  machine: MachineName;
  config: AgentConfig;
  /** Lowercase hex SHA-256 of the file bytes. */
  hash: string;
  /** False when the sidecar was missing (the file was read with a warning). */
  verified: boolean;
}

export function sha256Hex(data: string | Uint8Array): string {
  return oneShotHash('sha256', data, 'hex');
}

/** Freeze a parsed config all the way down: a record is shared by every read that finds the same bytes. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** The bytes of the last good read of a machine's two files, and what they were read as. */
interface LastRead {
  bytes: Buffer;
  sidecar: Buffer | null;
  record: AppliedConfigRecord;
}

const sameBytes = (a: Buffer | null, b: Buffer | null): boolean =>
  a === null || b === null ? a === b : a.equals(b);

/** The file's bytes, or null when it does not exist; anything else names the file and what is wrong. */
async function readOptional(file: string, what: string): Promise<Buffer | null> {
  try {
    return await readFile(file);
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ENOENT') return null;
    if (code === 'EISDIR') {
      throw new PreconditionFailedError(
        `${what} ${file} is a directory, not a file: move it aside, or restore the file`,
        { cause: err, data: { file, errno: code } },
      );
    }
    throw toAgentError(err, `read ${what} ${file}`, {
      otherwise: (message, cause) =>
        new AgentError('PRECONDITION_FAILED', message, { cause, data: { file } }),
    });
  }
}

/** A SHA-256 in hex: what a `.sha256` sidecar must start with. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

export interface AppliedConfigStore {
  /** The machine's applied config, or null when it has none. Throws on a bad file or sidecar. */
  read(m: MachineName): Promise<AppliedConfigRecord | null>;
  /** Write config then sidecar, each atomically (mode 0600). Returns the hash. */
  write(m: MachineName, config: AgentConfig): Promise<string>;
  /** Remove the config and its sidecar (absent files are fine). */
  remove(m: MachineName): Promise<void>;
}

export function createAppliedConfigStore(paths: HostPaths, logger?: Logger): AppliedConfigStore {
  const last = new Map<MachineName, LastRead>();
  return {
    async read(m) {
      const file = paths.appliedConfig(m);
      const bytes = await readOptional(file, 'applied config');
      if (bytes === null) {
        last.delete(m);
        return null;
      }
      const sidecarFile = paths.appliedConfigSidecar(m);
      const sidecar = await readOptional(sidecarFile, 'applied config sidecar');
      const before = last.get(m);
      if (before && sameBytes(before.bytes, bytes) && sameBytes(before.sidecar, sidecar))
        return before.record;
      last.delete(m);
      const hash = sha256Hex(bytes);
      let verified = false;
      if (sidecar === null) {
        logger?.warn({ file }, 'applied config has no .sha256 sidecar; reading it unverified');
      } else {
        const want = sidecar.toString('utf8').trim().split(/\s+/)[0]?.toLowerCase() ?? '';
        // A sidecar that is not a digest is said to be garbled; its bytes are never echoed.
        if (!SHA256_HEX.test(want)) {
          throw new AgentError(
            'CHECKSUM_MISMATCH',
            `applied config ${file}: its sidecar ${sidecarFile} is garbled (${sidecar.length} bytes, not a SHA-256 hex digest): restore it, or write the digest of the file into it`,
            { data: { file, sidecar: sidecarFile, actual: hash } },
          );
        }
        if (want !== hash)
          throw new ChecksumMismatchError(`applied config ${file}`, want, hash, { data: { file } });
        verified = true;
      }
      let json: unknown;
      try {
        json = JSON.parse(bytes.toString('utf8'));
      } catch (err) {
        throw new InvalidConfigError(`applied config ${file}: not valid JSON: ${(err as Error).message}`, {
          cause: err,
          data: { file },
        });
      }
      const parsed = appliedConfigFileSchema.safeParse(json);
      if (!parsed.success) {
        const first = parsed.error.issues[0];
        throw new InvalidConfigError(
          `applied config ${file}: ${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : 'invalid'}`,
          { data: { file, issues: parsed.error.issues } },
        );
      }
      // A copy: zod hands out the inner objects of a schema's defaults shared between parses, and
      // freezing them would freeze every later parse's too.
      const config = structuredClone(parsed.data) as AgentConfig;
      const record = deepFreeze({ machine: m, config, hash, verified });
      last.set(m, { bytes, sidecar, record });
      return record;
    },

    async write(m, config) {
      const bytes = serializeAgentConfig(config);
      const hash = sha256Hex(bytes);
      // Config first, sidecar second: a crash between the two leaves a mismatch that reads as
      // CHECKSUM_MISMATCH, which recovery resolves from the journal, never by guessing.
      await writeFileAtomic(paths.appliedConfig(m), bytes, { mode: 0o600, dirMode: 0o700 });
      await writeFileAtomic(paths.appliedConfigSidecar(m), `${hash}\n`, { mode: 0o600, dirMode: 0o700 });
      return hash;
    },

    async remove(m) {
      await rm(paths.appliedConfigSidecar(m), { force: true });
      await rm(paths.appliedConfig(m), { force: true });
    },
  };
}
