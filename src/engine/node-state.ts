/**
 * Which machine is active. The journal/state file under `--state-dir` is the source of truth;
 * a node taken over from the upstream agent (no state file yet) is read from its applied
 * configs only when exactly one exists — never "the first file found".
 */
import path from 'node:path';
import * as z from 'zod';
import { writeFileAtomic } from '../host/fs-atomic.js';
import type { DeferredWrites } from './deferred-writes.js';
import type { StateReserve } from './reserve.js';
import { readJsonStateFile } from '../host/state-file.js';
import { MACHINE_NAMES, type MachineName } from '../host/types.js';

const nodeStateSchema = z.object({
  activeMachine: z.enum(MACHINE_NAMES).nullable(),
  updatedAt: z.string(),
});
export type NodeStateFile = z.infer<typeof nodeStateSchema>;

export function nodeStatePath(stateDir: string): string {
  return path.join(stateDir, 'node.json');
}

/** The recorded active machine, or undefined when no state file exists yet. */
export async function readNodeState(stateDir: string): Promise<NodeStateFile | undefined> {
  return (await readJsonStateFile(nodeStatePath(stateDir), nodeStateSchema, 'node state file')) ?? undefined;
}

export async function writeNodeState(
  stateDir: string,
  activeMachine: MachineName | null,
  now: Date,
): Promise<void> {
  const doc: NodeStateFile = { activeMachine, updatedAt: now.toISOString() };
  await writeFileAtomic(nodeStatePath(stateDir), `${JSON.stringify(doc, null, 2)}\n`, {
    mode: 0o600,
    dirMode: 0o700,
  });
}

export { MACHINE_NAMES };

/**
 * Write the node state where it must not stop what brings the node back (the commit, a
 * rollback, recovery): on the reserve when space or descriptors ran out, else owed and written
 * later. Resolves to whether it was written now; never throws.
 */
export async function writeNodeStateOn(
  stateDir: string,
  activeMachine: MachineName | null,
  now: Date,
  o: { reserve?: StateReserve | undefined; deferred?: DeferredWrites | undefined },
): Promise<boolean> {
  const write = (): Promise<void> => writeNodeState(stateDir, activeMachine, now);
  try {
    await (o.reserve ? o.reserve.retry(write) : write());
    o.deferred?.settle('node-state');
    return true;
  } catch (err) {
    o.deferred?.defer('node-state', `the node state ${nodeStatePath(stateDir)}`, write, err);
    return false;
  }
}
