/**
 * The simulated host's commands that act on the host itself rather than on its machines:
 *
 * - `ldconfig -p`, answered from a recorded cache listing under the root, so a test or a
 *   `--sim` try-out presents a GPU host made of files (docs/testing.md, "A GPU host, and the upstream agent's leftovers");
 * - `systemctl is-enabled|is-active|disable --now unbounded-agent-daemon.service`: the upstream
 *   agent's daemon, enabled when its `multi-user.target.wants` link exists under the root,
 *   running when `var/lib/agentd-sim/upstream-daemon-active` does (docs/testing.md).
 */
import { lstat, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { errorCode, toAgentError } from '../../errors.js';
import type { HostPaths } from '../../host/paths.js';
import { UPSTREAM_DAEMON_UNIT } from '../../host/upstream-daemon.js';

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

export type UpstreamDaemonVerb = 'is-enabled' | 'is-active' | 'disable-now';

/** The upstream daemon's `systemctl` lines the sim accepts, or undefined. */
export function parseUpstreamDaemon(args: readonly string[]): UpstreamDaemonVerb | undefined {
  if (args.at(-1) !== UPSTREAM_DAEMON_UNIT) return undefined;
  if (args.length === 2 && (args[0] === 'is-enabled' || args[0] === 'is-active')) return args[0];
  if (args.length === 3 && args[0] === 'disable' && args[1] === '--now') return 'disable-now';
  return undefined;
}

/** The upstream daemon's enablement link, relative to the root. */
export const SIM_UPSTREAM_DAEMON_WANTS = `etc/systemd/system/multi-user.target.wants/${UPSTREAM_DAEMON_UNIT}`;
/** Present while the simulated upstream daemon runs, relative to the root. */
export const SIM_UPSTREAM_DAEMON_ACTIVE = 'var/lib/agentd-sim/upstream-daemon-active';

async function present(file: string): Promise<boolean> {
  return lstat(file).then(
    () => true,
    () => false,
  );
}

/** `systemctl … unbounded-agent-daemon.service` on the simulated host, as systemd answers. */
export async function simUpstreamDaemon(
  paths: HostPaths,
  verb: UpstreamDaemonVerb,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const wants = path.join(paths.root, SIM_UPSTREAM_DAEMON_WANTS);
  const active = path.join(paths.root, SIM_UPSTREAM_DAEMON_ACTIVE);
  const unitFile = path.join(paths.root, 'etc/systemd/system', UPSTREAM_DAEMON_UNIT);
  switch (verb) {
    case 'is-enabled': {
      if (await present(wants)) return { exitCode: 0, stdout: 'enabled\n', stderr: '' };
      if (await present(unitFile)) return { exitCode: 1, stdout: 'disabled\n', stderr: '' };
      return {
        exitCode: 1,
        stdout: '',
        stderr: `Failed to get unit file state for ${UPSTREAM_DAEMON_UNIT}: No such file or directory\n`,
      };
    }
    case 'is-active':
      return (await present(active))
        ? { exitCode: 0, stdout: 'active\n', stderr: '' }
        : { exitCode: 3, stdout: 'inactive\n', stderr: '' };
    case 'disable-now': {
      if (!(await present(unitFile)) && !(await present(wants))) {
        return {
          exitCode: 1,
          stdout: '',
          stderr: `Failed to disable unit: Unit file ${UPSTREAM_DAEMON_UNIT} does not exist.\n`,
        };
      }
      const removed = await present(wants);
      await rm(wants, { force: true });
      await rm(active, { force: true });
      return {
        exitCode: 0,
        stdout: '',
        stderr: removed ? `Removed "/${SIM_UPSTREAM_DAEMON_WANTS}".\n` : '',
      };
    }
  }
}
