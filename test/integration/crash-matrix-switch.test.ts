/**
 * Crash matrix, part 2 (docs/architecture.md, issue 4): the daemon is SIGKILLed inside the down window —
 * at the boundaries of stop, start and verify, and in the middle of each (host-command
 * failpoints for stop and verify) — then restarted. Nothing is committed yet, so recovery must
 * remove kube2 and bring kube1 back: one machine running, on the old version.
 */
import { describeUpdateCrashes, type UpdateCrashCase } from '../support/sim-node.js';

const CASES: UpdateCrashCase[] = [
  { failpoint: 'update.stop.before', phase: 'stop', committed: false },
  // kubelet and containerd are stopped, the machine is not yet.
  { failpoint: 'cmd:machinectl disable kube1', phase: 'stop', committed: false },
  { failpoint: 'update.stop.after', phase: 'stop', committed: false },
  { failpoint: 'update.start.before', phase: 'start', committed: false },
  // kube2 runs, its services are not started.
  { failpoint: 'update.start.mid', phase: 'start', committed: false },
  { failpoint: 'update.start.after', phase: 'start', committed: false },
  { failpoint: 'update.verify.before', phase: 'verify', committed: false },
  // kubelet of kube2 is up and being checked.
  { failpoint: 'cmd:--machine=kube2 --pipe --wait systemctl is-active', phase: 'verify', committed: false },
];

describeUpdateCrashes('crash in the down window: recovery brings kube1 back', CASES);
