/**
 * The artifact mirror as a process of its own, for the real-host suite: started in a host's
 * network namespace (`ip netns exec`), where the test process cannot listen.
 * usage: node --import tsx mirror-child.ts PORT [UNHEALTHY_KUBELET_VERSIONS_REGEX]
 */
import { startMirror } from '../../../src/sim/mirror/index.js';

const port = Number(process.argv[2]);
const unhealthy = process.argv[3];
const mirror = await startMirror({
  port,
  artifacts: unhealthy ? { unhealthyKubeletVersions: new RegExp(unhealthy) } : {},
});
process.stdout.write(`${mirror.url}\n`);
const close = (): void => void mirror.close().then(() => process.exit(0));
process.once('SIGTERM', close);
process.once('SIGINT', close);
