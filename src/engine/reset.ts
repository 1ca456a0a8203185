/**
 * `reset`: stop and remove both machines, their nspawn files and applied configs. Journaled
 * like an update, so a crash mid-reset is finished by recovery.
 */
import { describeError } from '../errors.js';
import { MACHINE_NAMES } from '../host/types.js';
import { writeNodeState } from './node-state.js';
import type { OperationRecorder } from './operation-recorder.js';
import { failpoint } from '../host/failpoints.js';
import { JournalWriter } from './switch-journal.js';
import type { UpdateDeps, UpdateOutcome } from './update.js';

export const RESET_PHASES = ['stop', 'remove'] as const;

export async function runReset(
  d: Omit<UpdateDeps, 'drainer' | 'metrics'>,
  rec: OperationRecorder,
  source: (typeof MACHINE_NAMES)[number] | null,
): Promise<UpdateOutcome> {
  const now = (): string => new Date(d.clock.now()).toISOString();
  const journal = new JournalWriter(
    d.stateDir,
    {
      operationId: rec.op.id,
      kind: 'reset',
      source,
      target: null,
      targetHash: null,
      uncordonPending: d.uncordonPending,
    },
    now,
  );
  const result: Record<string, unknown> = { removed: [] as string[] };
  let current = '';
  try {
    await journal.set({});
    await rec.start();
    current = 'stop';
    await journal.set({ phase: 'stop', phaseState: 'running', sourceStopped: true });
    await rec.phaseStarted('stop');
    for (const m of MACHINE_NAMES) await d.machines.stop(m);
    await rec.phaseEnded('stop', 'succeeded');
    current = 'remove';
    await journal.set({ phase: 'remove', phaseState: 'running' });
    await rec.phaseStarted('remove');
    for (const m of MACHINE_NAMES) {
      failpoint(`reset.remove.${m}`);
      await d.machines.remove(m);
      await d.provisioner.removeMachineFiles(m);
      await d.applied.remove(m);
      (result.removed as string[]).push(m);
    }
    await d.provisioner.removeUpstreamLeftovers?.();
    await d.machines.daemonReload();
    await writeNodeState(d.stateDir, null, new Date(d.clock.now()));
    await rec.phaseEnded('remove', 'succeeded');
    await journal.close('succeeded');
    return { state: 'succeeded', result };
  } catch (err) {
    await rec.phaseEnded(current || 'stop', 'failed', err);
    rec.skipPending();
    rec.logger.error({ err: describeError(err) }, 'reset failed; a rerun finishes it');
    // The operation ended (failed): a rerun of reset is the remedy, so the journal is closed.
    await journal.close('failed');
    return { state: 'failed', result, error: err };
  }
}
