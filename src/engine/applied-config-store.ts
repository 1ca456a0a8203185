/**
 * Applied configs: `/etc/unbounded/agent/<machine>-applied-config.json` plus its `.sha256`
 * sidecar, in the upstream agent's format. Sidecar matches → trusted; missing → warning;
 * mismatch → CHECKSUM_MISMATCH (never silently trusted).
 */
import { createHash } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { ChecksumMismatchError, InvalidConfigError } from '../errors.js';
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
  return createHash('sha256').update(data).digest('hex');
}

async function readOptional(file: string): Promise<Buffer | null> {
  try {
    return await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export interface AppliedConfigStore {
  /** The machine's applied config, or null when it has none. Throws on a bad file or sidecar. */
  read(m: MachineName): Promise<AppliedConfigRecord | null>;
  /** Write config then sidecar, each atomically (mode 0600). Returns the hash. */
  write(m: MachineName, config: AgentConfig): Promise<string>;
  /** Remove the config and its sidecar (absent files are fine). */
  remove(m: MachineName): Promise<void>;
}

export function createAppliedConfigStore(paths: HostPaths, logger?: Logger): AppliedConfigStore {
  return {
    async read(m) {
      const file = paths.appliedConfig(m);
      const bytes = await readOptional(file);
      if (bytes === null) return null;
      const hash = sha256Hex(bytes);
      const sidecar = await readOptional(paths.appliedConfigSidecar(m));
      let verified = false;
      if (sidecar === null) {
        logger?.warn({ file }, 'applied config has no .sha256 sidecar; reading it unverified');
      } else {
        const want = sidecar.toString('utf8').trim().split(/\s+/)[0]?.toLowerCase() ?? '';
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
      return { machine: m, config: parsed.data as AgentConfig, hash, verified };
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
