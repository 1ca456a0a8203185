/**
 * The simulated host's commands that act on the host itself rather than on its machines:
 * `ldconfig -p`, answered from a recorded cache listing under the root, so a test or a
 * `--sim` try-out presents a GPU host made of files (docs/testing.md, "A GPU host").
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { errorCode, toAgentError } from '../../errors.js';
import type { HostPaths } from '../../host/paths.js';

/** Where the simulated host keeps the output its `ldconfig -p` prints (relative to the root). */
export const SIM_LDCONFIG_OUTPUT = 'var/lib/agentd-sim/ldconfig-p.txt';

/** What `ldconfig -p` prints on a host whose cache the test did not record: an empty cache. */
export const EMPTY_LDCONFIG_OUTPUT = "0 libs found in cache `/etc/ld.so.cache'\n";

/** `ldconfig -p` of the simulated host. */
export async function simLdconfigCache(
  paths: HostPaths,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const file = path.join(paths.root, SIM_LDCONFIG_OUTPUT);
  try {
    return { exitCode: 0, stdout: await readFile(file, 'utf8'), stderr: '' };
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return { exitCode: 0, stdout: EMPTY_LDCONFIG_OUTPUT, stderr: '' };
    throw toAgentError(err, `sim: read the recorded ldconfig cache ${file}`);
  }
}
