/**
 * Crash matrix, part 3 (docs/architecture.md, issue 4): the daemon is SIGKILLed around the commit and
 * during cleanup, then restarted. The journal's `committed` flag decides: before it recovery
 * goes back to kube1, after it forward to kube2 (removing kube1). Also a crash in the middle
 * of a reset, which recovery finishes.
 */
import { expect, it } from 'vitest';
import {
  cloneSimNode,
  crashAndRestart,
  describeUpdateCrashes,
  expectRecovered,
  type UpdateCrashCase,
} from '../support/sim-node.js';

const CASES: UpdateCrashCase[] = [
  { failpoint: 'update.verify.after', phase: 'verify', committed: false },
  { failpoint: 'update.commit.before', phase: 'commit', committed: false },
  // kube2's applied config is on disk but the journal has not committed: the journal is the
  // commit point, so recovery goes back to kube1 and removes kube2's applied config with it.
  { failpoint: 'update.commit.mid', phase: 'commit', committed: false },
  { failpoint: 'update.commit.after', phase: 'commit', committed: true },
  { failpoint: 'update.cleanup.before', phase: 'cleanup', committed: true },
  // kube1's rootfs is removed, its nspawn files and applied config are not.
  { failpoint: 'update.cleanup.mid', phase: 'cleanup', committed: true },
  { failpoint: 'update.cleanup.after', phase: 'cleanup', committed: true },
];

describeUpdateCrashes('crash around the commit: the journal decides the direction', CASES, (template) => {
  it('reset.remove.kube1: recovery finishes the reset', async () => {
    const node = await cloneSimNode(template());
    await crashAndRestart(node, 'reset.remove.kube1', (n) => n.call('reset', {}));
    const op = await expectRecovered(node, { active: null, version: null });
    expect(op).toMatchObject({ kind: 'reset', from: 'kube1' });
    expect(op.result?.recovery).toMatchObject({
      interruptedIn: 'remove',
      outcome: 'finished the reset: both machines removed',
    });
  });
});
