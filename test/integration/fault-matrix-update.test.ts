/**
 * The fault matrix, part 1 (docs/operations.md, "A full disk, exhausted descriptors"; issue 40):
 * the state dir's disk fills, or the daemon's descriptors run out, at every phase of an update
 * kube1 → kube2 on the simulated host. Both faults are real: the state dir is a tmpfs of its own,
 * filled to ENOSPC, and RLIMIT_NOFILE is lowered with prlimit to what the daemon holds. The
 * moment is a `stop:` failpoint (the daemon SIGSTOPs itself there; the fault is applied; SIGCONT).
 * After each cell, once the fault is gone: one machine serves, no other runs, the operation's true
 * end is on disk, and the next update works.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FAULTS,
  applyFault,
  canFault,
  expectCaughtUp,
  mountStateTmpfs,
  waitLog,
  waitStopped,
  type Fault,
} from '../support/fault-node.js';
import {
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  type Machine,
  type Op,
  type SimNode,
} from '../support/sim-node.js';

/** Where the fault hits, and what the node may end as: the update's end and the machine that serves. */
interface Cell {
  point: string;
  /** AGENTD_SIM_FAULTS: a target that never turns healthy makes the update roll back. */
  simFaults?: string;
}

const HEALTHY: Cell[] = [
  'update.preflight.before',
  'update.provision.before',
  'update.stage.before',
  'update.stop.before',
  'update.start.before',
  'update.start.mid',
  'update.verify.before',
  'update.commit.before',
  'update.commit.mid',
  'update.cleanup.before',
  'update.cleanup.mid',
].map((point) => ({ point }));

/** An update whose target's kubelet never turns healthy: the fault hits its rollback. */
const ROLLBACK: Cell[] = [
  'update.verify.before',
  'update.rollback.before',
  'update.rollback.mid',
  'update.rollback.after',
].map((point) => ({ point, simFaults: 'kubelet-inactive:kube2' }));

/** Which machine must serve after an update that ended `state`. */
function servingAfter(state: string): Machine {
  return state === 'succeeded' ? 'kube2' : 'kube1';
}

async function runCell(template: SimNode, cell: Cell, fault: Fault): Promise<void> {
  const node = await cloneSimNode(template);
  const unmount = await mountStateTmpfs(node);
  let undo: (() => Promise<void>) | null = null;
  try {
    await node.start({ failpoints: `stop:${cell.point}`, faults: cell.simFaults });
    const d = node.daemon!;
    const answer = node.update({ set: { kubernetesVersion: NEW_VERSION } }).catch((err: unknown) => err);
    await waitStopped(d, cell.point);
    undo = await applyFault(node, fault);
    process.kill(d.pid, 'SIGCONT');
    // The update ends whatever the fault: its end is logged (the socket may not accept now).
    await waitLog(
      d,
      'the update to end',
      (l) => l.kind === 'update' && typeof l.msg === 'string' && / finished: /.test(l.msg),
    );
    await undo();
    undo = null;
    const started = (await answer) as Op;
    expect(started.id, `the update was admitted before the fault: ${JSON.stringify(started)}`).toEqual(
      expect.any(String),
    );
    const op = await node.call<Op>('operations.get', { id: started.id });
    expect(['succeeded', 'rolled_back', 'failed'], JSON.stringify(op)).toContain(op.state);
    if (cell.simFaults) expect(op.state).not.toBe('succeeded');
    const active = servingAfter(op.state);
    // Every ending says which machine serves, never only the file that could not be written.
    if (op.state !== 'succeeded') expect(op.error?.message).toContain(`the node: ${active} serves`);
    await expectCaughtUp(node, op.id, active);
    expect(d.logs()).not.toContain('operation crashed');
    // The next update works (a forced re-provision onto the other machine).
    const version = (await node.readVerifiedApplied(active)).Cluster.Version;
    await node.stop();
    await node.start();
    const next = await node.update({ force: true, wait: true });
    expect(next.state, JSON.stringify(next.error)).toBe('succeeded');
    await expectSingleMachine(node, { active: active === 'kube1' ? 'kube2' : 'kube1', version });
  } finally {
    await undo?.();
    await unmount();
  }
}

describe.skipIf(!canFault)('fault matrix: disk full and descriptors exhausted during an update', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  const cells = [...HEALTHY, ...ROLLBACK].flatMap((cell) =>
    FAULTS.map((fault) => ({
      name: `${fault} at ${cell.point}${cell.simFaults ? ` (${cell.simFaults})` : ''}`,
      cell,
      fault,
    })),
  );
  // Retried once, as the recovery matrix (a repair attempt inside the fault window).
  it.each(cells)('$name', { retry: 1 }, async ({ cell, fault }) => {
    await runCell(template, cell, fault);
  });
});
