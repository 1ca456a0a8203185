/**
 * The standby boot (docs/architecture.md, "Hot standby"). With `--switch-order standby` the target
 * machine boots beside the serving one before the node goes down, into agentd's own target: the
 * machine's systemd, `sysinit.target` (its mounts, journald, tmpfiles) and `dbus.socket` (so the
 * host can reach its systemd), and nothing else. Not `basic.target`: no `sockets.target`,
 * `timers.target` or `paths.target`, where listeners and scheduled jobs live; not
 * `multi-user.target`, so no containerd, kubelet, sshd or anything else that would listen on the
 * host network the two machines share.
 *
 * The machine's systemd is told by its `.nspawn` file (`[Exec] Parameters=systemd.unit=…`: nspawn
 * passes it to init), which the switch takes out again before it starts containerd and kubelet
 * and the machine's normal target. A boot after that, by agentd or after a host reboot, is a
 * normal one.
 */
import { readFile } from 'node:fs/promises';
import { toAgentError } from '../errors.js';
import { writeFileAtomic } from './fs-atomic.js';
import type { HostPaths } from './paths.js';
import type { MachineName } from './types.js';

/** agentd's boot target for a machine in standby (in the rootfs: `etc/systemd/system/agentd-standby.target`). */
export const STANDBY_TARGET = 'agentd-standby.target';

/**
 * The `.nspawn` line that boots a machine into standby. nspawn reads `Parameters=` of a settings
 * file only together with its start mode (`Boot=`): without `Boot=yes` beside it, systemd 252
 * boots the machine's default target (seen on the real host, test/host/sim-contract.test.ts).
 */
export const STANDBY_PARAMETERS = `Parameters=systemd.unit=${STANDBY_TARGET}`;
const STANDBY_BOOT = 'Boot=yes';

/** `/etc/systemd/system/agentd-standby.target` in a machine's rootfs. */
export function renderStandbyTarget(): string {
  return `# Written by agentd; rewritten on every update.
# A machine boots into this target in standby (docs/architecture.md, "Hot standby"): its systemd,
# journald and D-Bus, beside the machine that serves. Nothing here listens on the host network.
[Unit]
Description=agentd standby: systemd, journald and D-Bus only
Requires=sysinit.target
Wants=dbus.socket systemd-journald.service
After=sysinit.target dbus.socket systemd-journald.service
AllowIsolate=yes
`;
}

/** `settings` (a `.nspawn` file's text) booting into standby (`on`) or normally. */
export function withStandbyBoot(settings: string, on: boolean): string {
  // agentd's settings never say Boot= (the unit's --boot does): both lines are the standby's.
  const ours = new Set([STANDBY_PARAMETERS, STANDBY_BOOT]);
  const lines = settings.split('\n').filter((l) => !ours.has(l.trim()));
  if (!on) return lines.join('\n');
  const exec = lines.findIndex((l) => l.trim() === '[Exec]');
  if (exec === -1) return `${lines.join('\n').trimEnd()}\n\n[Exec]\n${STANDBY_BOOT}\n${STANDBY_PARAMETERS}\n`;
  return [...lines.slice(0, exec + 1), STANDBY_BOOT, STANDBY_PARAMETERS, ...lines.slice(exec + 1)].join('\n');
}

/**
 * Whether a `.nspawn` file's text boots into standby, as systemd-nspawn 252 reads it: the standby
 * `Parameters=` counts only beside `Boot=yes` (the simulated host decides with this).
 */
export function bootsIntoStandby(settings: string): boolean {
  const lines = new Set(settings.split('\n').map((l) => l.trim()));
  return lines.has(STANDBY_PARAMETERS) && lines.has(STANDBY_BOOT);
}

/**
 * Make machine `m`'s next boot a standby boot (`on`) or a normal one, in its `.nspawn` file (which
 * agentd wrote at provision). Idempotent; the file must exist.
 */
export async function setStandbyBoot(paths: HostPaths, m: MachineName, on: boolean): Promise<void> {
  const file = paths.nspawnFile(m);
  try {
    const before = await readFile(file, 'utf8');
    const after = withStandbyBoot(before, on);
    if (after !== before) await writeFileAtomic(file, after, { mode: 0o644 });
  } catch (err) {
    throw toAgentError(err, `${on ? 'set' : 'clear'} the standby boot of ${m} in ${file}`);
  }
}
