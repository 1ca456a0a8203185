/**
 * What `status` warns about, as typed values (docs/api.md, "Status warnings"). Each source makes
 * its own — the node snapshot, the state-file check, the deferred writes, the reserve, startup
 * recovery, the pending uncordon, repair, the host, the Kubernetes session's cordon, the status
 * reader — with a stable `code` and its `message`. Code decides by `code`, never by a
 * warning's text; `message` is for people, and is what `node.warnings` carries on the wire.
 */
import type { MachineName } from '../host/types.js';

/** Every warning code, in the order docs/api.md lists them. */
export const WARNING_CODES = [
  'applied-config-unverified',
  'applied-config-unreadable',
  'node-state-unreadable',
  'active-machine-unknown',
  'machine-uninspectable',
  'not-serving',
  'state-conflict',
  'stale-facts',
  'deferred-writes',
  'reserve-not-whole',
  'recovery-failed',
  'pending-uncordon',
  'host',
  'repair-backoff',
  'repair-gave-up',
  'cordon-unwatched',
] as const;

export type WarningCode = (typeof WARNING_CODES)[number];

/** What a state file disagrees with (`state-conflict`). */
export type ConflictAgainst = 'host' | 'node.json' | 'applied-config';

export type StatusWarning =
  /** An applied config without its .sha256 sidecar (read, with this warning). */
  | { code: 'applied-config-unverified'; message: string; machine: MachineName }
  /** An applied config that cannot be read (a sidecar mismatch, bad JSON). */
  | { code: 'applied-config-unreadable'; message: string; machine: MachineName }
  /** node.json cannot be read. */
  | { code: 'node-state-unreadable'; message: string; file: string }
  /** Both machines have applied configs and no node state says which is active. */
  | { code: 'active-machine-unknown'; message: string }
  /** The host could not be asked about a machine. */
  | { code: 'machine-uninspectable'; message: string; machine: MachineName }
  /** A joined node whose active machine does not serve. */
  | { code: 'not-serving'; message: string; machine: MachineName }
  /**
   * A state file disagrees with the host or with another file (docs/architecture.md, "Recovery
   * checks"): which file, what it disagrees with, and what agentd did about it.
   */
  | {
      code: 'state-conflict';
      message: string;
      file: string;
      against: ConflictAgainst;
      /** The machine the host says serves, when one does. */
      machine: MachineName | null;
      action: string;
    }
  /** A read of the node has not finished in time: the facts are older than they should be. */
  | { code: 'stale-facts'; message: string }
  /** A write of agentd's own state owed since the disk filled or the descriptors ran out. */
  | {
      code: 'deferred-writes';
      message: string;
      /** Which write: `journal`, `node-state` or `operation:<id>`. */
      write: string;
      since: string;
    }
  /** The space and descriptor reserve for rollback and recovery is not whole. */
  | { code: 'reserve-not-whole'; message: string; file: string }
  /** Startup recovery did not bring the node to one verified machine. */
  | { code: 'recovery-failed'; message: string; operationId: string | null }
  /** An interrupted operation's cordon is still on the node. */
  | { code: 'pending-uncordon'; message: string; operationId: string }
  /** What agentd did to the host or could not (the upstream agent's daemon). */
  | { code: 'host'; message: string }
  /** A failed repair waits for its next attempt. */
  | { code: 'repair-backoff'; message: string; operationId: string | null }
  /** Repair gave up after repeated failures. */
  | { code: 'repair-gave-up'; message: string; operationId: string | null }
  /** The cordon shown is the one agentd last saw: it cannot watch the Node. */
  | { code: 'cordon-unwatched'; message: string };

/** The warnings' text, as `node.warnings` shows it. */
export function warningMessages(warnings: readonly StatusWarning[]): string[] {
  return warnings.map((w) => w.message);
}
