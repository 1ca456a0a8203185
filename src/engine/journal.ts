/**
 * The switch-over journal (`<state-dir>/journal.json`): the single source of truth for which
 * machine is active while an update or reset is under way. Written atomically and fsynced
 * before each phase starts and when it ends; startup recovery reads it and nothing else to
 * decide what to do.
 */
import path from 'node:path';
import * as z from 'zod';
import { writeFileAtomic } from '../host/fs-atomic.js';
import { readJsonStateFile } from '../host/state-file.js';
import { MACHINE_NAMES } from '../host/types.js';

export const journalSchema = z.object({
  version: z.literal(1),
  operationId: z.string(),
  kind: z.enum(['update', 'reset']),
  /** The machine that served when the operation started (null on a fresh node). */
  source: z.enum(MACHINE_NAMES).nullable(),
  /** The machine being provisioned (update), or null (reset). */
  target: z.enum(MACHINE_NAMES).nullable(),
  phase: z.string(),
  phaseState: z.enum(['running', 'done']),
  /** True once the target's applied config is written: from here the target is the active machine. */
  committed: z.boolean(),
  /** True once the source was asked to stop (the node may be down). */
  sourceStopped: z.boolean(),
  /**
   * How the update switches (docs/architecture.md, "Hot standby"): `standby` once the target is
   * booted in standby beside the source. Absent in journals written before it existed, and in the
   * cold order.
   */
  switchOrder: z.enum(['cold', 'standby']).optional(),
  /** True once cleanup powered off a source that stayed booted through a standby switch. */
  sourcePoweredOff: z.boolean().optional(),
  /** True when this operation cordoned the node (so recovery uncordons it). */
  cordonedByUs: z.boolean(),
  /**
   * True when the node is still cordoned by an interrupted operation: recovery could not reach
   * the Kubernetes API, and agentd uncordons once it can (or an operator's `uncordon` does).
   * Absent in journals written before it existed (= false); carried into the next operation's
   * journal until done.
   */
  uncordonPending: z.boolean().optional(),
  /** SHA-256 of the applied config the target is meant to get. */
  targetHash: z.string().nullable(),
  closed: z.boolean(),
  outcome: z.string().nullable(),
  updatedAt: z.string(),
});
export type Journal = z.infer<typeof journalSchema>;

export function journalPath(stateDir: string): string {
  return path.join(stateDir, 'journal.json');
}

/** The journal, or null when there is none; a corrupt one is PRECONDITION_FAILED naming the file. */
export async function readJournal(stateDir: string): Promise<Journal | null> {
  return readJsonStateFile(journalPath(stateDir), journalSchema, 'switch-over journal');
}

/** Persist the journal (temp file + fsync + rename). */
export async function writeJournal(stateDir: string, journal: Journal): Promise<void> {
  await writeFileAtomic(journalPath(stateDir), `${JSON.stringify(journal, null, 2)}\n`, {
    mode: 0o600,
    dirMode: 0o700,
  });
}
