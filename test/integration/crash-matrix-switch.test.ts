/**
 * Crash matrix, part 2 (docs/architecture.md, issue 4): the daemon is SIGKILLed inside the down window —
 * at the boundaries of stop, start and verify, and in the middle of each (host-command
 * failpoints for stop and verify) — then restarted. Nothing is committed yet, so recovery must
 * remove kube2 and bring kube1 back: one machine running, on the old version. In both switch
 * orders: the cold one (the source machine stops, the target boots in the window) and the standby
 * one (kube2 booted before; only kubelet and containerd move).
 */
import { describeUpdateCrashes, type UpdateCrashCase } from '../support/sim-node.js';

const CASES: UpdateCrashCase[] = [
  // The cold order (--switch-order cold): the source machine stops, the target boots.
  { failpoint: 'update.stop.before', phase: 'stop', committed: false, order: 'cold' },
  // kubelet and containerd are stopped, the machine is not yet.
  { failpoint: 'cmd:machinectl disable kube1', phase: 'stop', committed: false, order: 'cold' },
  { failpoint: 'update.stop.after', phase: 'stop', committed: false, order: 'cold' },
  { failpoint: 'update.start.before', phase: 'start', committed: false, order: 'cold' },
  // kube2 runs, its services are not started.
  { failpoint: 'update.start.mid', phase: 'start', committed: false, order: 'cold' },
  { failpoint: 'update.start.after', phase: 'start', committed: false, order: 'cold' },
  { failpoint: 'update.verify.before', phase: 'verify', committed: false, order: 'cold' },
  // kubelet of kube2 is up and being checked.
  {
    failpoint: 'cmd:--machine=kube2 --pipe --wait systemctl is-active',
    phase: 'verify',
    committed: false,
    order: 'cold',
  },
  // The standby order (the default, docs/architecture.md, "Hot standby"): kube2 boots beside kube1.
  // kube2's .nspawn file says standby; it is not booted.
  { failpoint: 'update.standby.mid', phase: 'standby', committed: false },
  // kube2 booted in standby, kube1 serving.
  { failpoint: 'update.standby.after', phase: 'standby', committed: false },
  // kubelet and containerd of kube1 stopping; kube1 stays booted.
  { failpoint: 'cmd:--machine=kube1 --pipe --wait systemctl stop', phase: 'stop', committed: false },
  // services moved off kube1, none in kube2: nothing serves, both machines booted.
  { failpoint: 'update.stop.after', phase: 'stop', committed: false },
  // kube2's next boot made a normal one, its services not started.
  { failpoint: 'update.start.mid', phase: 'start', committed: false },
  { failpoint: 'update.start.after', phase: 'start', committed: false },
  { failpoint: 'update.verify.before', phase: 'verify', committed: false },
  // kube1 taken out of machines.target at the commit, kube2 not yet in it.
  { failpoint: 'cmd:machinectl enable kube2', phase: 'commit', committed: false },
];

describeUpdateCrashes('crash in the down window: recovery brings kube1 back', CASES);
