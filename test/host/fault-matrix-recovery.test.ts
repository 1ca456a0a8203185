/**
 * The fault matrix on a real systemd host, part 2 (test/support/real-host/fault-matrix.ts): the
 * state dir's disk full, or agentd's descriptors exhausted, during the verify and the rollback of
 * an update to a kubelet that never turns healthy, and during startup recovery after a SIGKILL
 * before and after the commit.
 */
import { RECOVERY, ROLLBACK, describeFaultMatrix } from '../support/real-host/fault-matrix.js';

describeFaultMatrix('rollback', [...ROLLBACK, ...RECOVERY]);
