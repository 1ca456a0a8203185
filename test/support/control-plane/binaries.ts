/**
 * Where the control plane's binaries are: the bin dir `scripts/control-plane.sh` built (the test
 * run calls it before the cluster tests start and passes it on as AGENTD_CONTROL_PLANE_BIN), or,
 * for a file run alone, the one `scripts/control-plane.sh --print` names, if it was built. The
 * tests never build it themselves. Without it they are skipped, with a message saying how to
 * build it — and fail under AGENTD_REQUIRE_SYSTEM_TESTS=1 (CI).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SYSTEM_TESTS_REQUIRED } from '../system-tools.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/control-plane.sh', import.meta.url));
const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kubectl'];

let found: { bin: string | null; why: string } | null = null;

/** The bin dir holding all four binaries, or null with the reason. */
export function findControlPlane(): { bin: string | null; why: string } {
  if (found) return found;
  let bin = process.env.AGENTD_CONTROL_PLANE_BIN ?? '';
  let why = '';
  if (!bin) {
    const printed = spawnSync('bash', [SCRIPT, '--print'], { encoding: 'utf8' });
    if (printed.status !== 0) why = `scripts/control-plane.sh --print failed: ${printed.stderr.trim()}`;
    else bin = printed.stdout.trim();
  }
  if (bin) {
    const missing = BINARIES.filter((b) => !existsSync(path.join(bin, b)));
    if (missing.length > 0) why = `${bin} has no ${missing.join(', ')}`;
  }
  found = why ? { bin: null, why } : { bin, why: '' };
  return found;
}

/** The message a skipped cluster test file prints. */
export function controlPlaneMissingMessage(): string {
  return (
    `the real control plane is not built (${findControlPlane().why}): ` +
    'run scripts/control-plane.sh (about 20 minutes cold, docs/testing.md "The real control plane"), or npm test, which runs it'
  );
}

/**
 * For `describe.skipIf(!controlPlaneAvailable())`: true when it can run, and always under
 * AGENTD_REQUIRE_SYSTEM_TESTS=1, where `startControlPlane` then fails naming what is missing.
 * Prints the reason once when it skips.
 */
export function controlPlaneAvailable(): boolean {
  if (findControlPlane().bin !== null || SYSTEM_TESTS_REQUIRED) return true;
  process.stderr.write(`skipped: ${controlPlaneMissingMessage()}\n`);
  return false;
}

/** The bin dir; throws the missing message when there is none. */
export function controlPlaneBin(): string {
  const { bin } = findControlPlane();
  if (bin === null) throw new Error(controlPlaneMissingMessage());
  return bin;
}
