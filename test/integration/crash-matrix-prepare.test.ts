/**
 * Crash matrix, part 1 (docs/architecture.md, issue 4): the daemon is SIGKILLed at the phase boundaries
 * of preflight, provision and stage and in the middle of provision, then restarted; recovery
 * must leave the node on kube1 with nothing of kube2. Also a crash in the middle of the first
 * join, which must leave a node with no machine at all.
 */
import { describe, expect, it } from 'vitest';
import {
  crashAndRestart,
  createSimNode,
  describeUpdateCrashes,
  expectRecovered,
  type UpdateCrashCase,
} from '../support/sim-node.js';

const CASES: UpdateCrashCase[] = [
  { failpoint: 'update.preflight.before', phase: 'preflight', committed: false },
  { failpoint: 'update.preflight.after', phase: 'preflight', committed: false },
  { failpoint: 'update.provision.before', phase: 'provision', committed: false },
  { failpoint: 'update.provision.mid', phase: 'provision', committed: false },
  { failpoint: 'update.provision.after', phase: 'provision', committed: false },
  { failpoint: 'update.stage.before', phase: 'stage', committed: false },
  { failpoint: 'update.stage.after', phase: 'stage', committed: false },
];

describeUpdateCrashes('crash before the switch-over: recovery keeps kube1', CASES);

describe('crash during the first join', () => {
  it('update.provision.mid on a fresh node: recovery removes the partial kube1', async () => {
    const node = await createSimNode();
    await crashAndRestart(node, 'update.provision.mid', (n) => n.update({}));
    const op = await expectRecovered(node, { active: null, version: null });
    expect(op).toMatchObject({ kind: 'update', from: null, to: 'kube1' });
    expect(op.result?.recovery).toMatchObject({
      interruptedIn: 'provision',
      outcome: 'removed the partial join; the node has no machine',
    });
    expect(op.phases.find((p) => p.name === 'provision')).toMatchObject({
      state: 'failed',
      error: { code: 'CANCELLED' },
    });
  });
});
