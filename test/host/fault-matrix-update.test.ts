/**
 * The fault matrix on a real systemd host, part 1 (test/support/real-host/fault-matrix.ts): the
 * state dir's disk full, or agentd's descriptors exhausted, at every phase of an update.
 */
import { UPDATE, describeFaultMatrix } from '../support/real-host/fault-matrix.js';

describeFaultMatrix('update', UPDATE);
