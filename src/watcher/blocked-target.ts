/**
 * No silent retry of a bad version (docs/watcher.md, "RolledBack"): a target whose update rolled
 * back (or failed) on this node is recorded in the state dir, and the watcher does not apply it
 * again until the Machine asks anew — a new `spec.operations.repaveCounter` or a different target.
 * The record survives a restart of agentd; it is agentd's own file, written atomically.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import * as z from 'zod';
import { describeError } from '../errors.js';
import { fsyncDir, pathExists, writeFileAtomic } from '../host/fs-atomic.js';
import type { Machine } from '../kube/index.js';
import { sameGoalSet } from './machine-goal.js';
import type { MachineGoalSet } from './machine-goal.js';

/** The file in the state dir. */
export const BLOCKED_TARGET_FILE = 'watcher-blocked-target.json';

const goalSetSchema = z.strictObject({
  kubernetesVersion: z.string().optional(),
  image: z.string().optional(),
  nodeLabels: z.record(z.string(), z.string()).optional(),
  registerWithTaints: z.array(z.string()).optional(),
});

const blockedTargetSchema = z.strictObject({
  version: z.literal(1),
  /** The Machine the request came from (a re-created Machine asks anew). */
  machineUid: z.string(),
  /** `spec.operations.repaveCounter` when it was asked for. */
  repaveCounter: z.number().int().min(0),
  /** What the Machine's spec asked for (the `update` set). */
  target: goalSetSchema,
  operationId: z.string().nullable(),
  /** How the update ended. */
  outcome: z.enum(['rolled_back', 'failed']),
  /** The error's stable code (`HEALTH_GATE_FAILED`, `VERIFY_FAILED`…). */
  code: z.string(),
  /** The error's message, clipped. */
  message: z.string(),
  since: z.string(),
});

/** A target this node will not apply again until the Machine asks anew. */
export type BlockedTarget = z.infer<typeof blockedTargetSchema>;

/** Where the record lives; `read` is cheap after the first call. */
export interface BlockedTargetStore {
  read(): Promise<BlockedTarget | null>;
  /** Record a block, or (null) clear it. */
  write(block: BlockedTarget | null): Promise<void>;
}

/** Whether `block` is about exactly what the Machine asks for now (same uid, counter and target). */
export function blocksRequest(block: BlockedTarget, machine: Machine, set: MachineGoalSet): boolean {
  return (
    block.machineUid === (machine.metadata.uid ?? '') &&
    block.repaveCounter === machine.spec.operations.repaveCounter &&
    sameGoalSet(block.target, set)
  );
}

/** Why the watcher does not apply the blocked target (status, logs). */
export function describeBlock(block: BlockedTarget): string {
  const what = block.operationId ? `update ${block.operationId}` : 'the update';
  return `${what} ${block.outcome === 'rolled_back' ? 'rolled back' : 'failed'} (${block.code}): not applied again until the Machine asks anew (a new spec.operations.repaveCounter or a different target)`;
}

/** A store that keeps the record in memory only (tests, and a watcher without a state dir). */
export function createMemoryBlockedTargetStore(initial: BlockedTarget | null = null): BlockedTargetStore {
  let current = initial;
  return {
    read: () => Promise.resolve(current),
    write(block) {
      current = block;
      return Promise.resolve();
    },
  };
}

/**
 * The record as a file in the state dir. An unreadable or invalid file is logged and treated as
 * no record (it is agentd's own, written atomically, so that means someone edited it).
 */
export function createBlockedTargetFile(stateDir: string, logger: Logger): BlockedTargetStore {
  const file = path.join(stateDir, BLOCKED_TARGET_FILE);
  let loaded: Promise<BlockedTarget | null> | null = null;

  async function load(): Promise<BlockedTarget | null> {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      logger.warn({ file, err: describeError(err) }, 'cannot read the blocked target record; ignoring it');
      return null;
    }
    try {
      return blockedTargetSchema.parse(JSON.parse(text));
    } catch (err) {
      logger.warn({ file, err: describeError(err) }, 'the blocked target record is not valid; ignoring it');
      return null;
    }
  }

  return {
    read: () => (loaded ??= load()),
    async write(block) {
      if (block === null) {
        if (await pathExists(file)) {
          await rm(file, { force: true });
          await fsyncDir(stateDir);
        }
      } else await writeFileAtomic(file, `${JSON.stringify(blockedTargetSchema.parse(block), null, 2)}\n`);
      loaded = Promise.resolve(block);
    },
  };
}
