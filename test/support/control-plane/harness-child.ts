/**
 * A process that starts a control plane, prints its PIDs and temp dir as one JSON line, and
 * waits to be killed: for the test that kills it with SIGKILL and sees the reaper clean up.
 */
import { startControlPlane } from './index.js';

const cp = await startControlPlane({ deploy: false });
const pids = [cp.etcd.process.pid, cp.apiServer.process().pid, cp.controllerManager?.pid];
process.stdout.write(`${JSON.stringify({ pids, dir: cp.dir })}\n`);
setInterval(() => {}, 60_000);
