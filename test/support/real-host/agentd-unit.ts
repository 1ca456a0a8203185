/**
 * agentd.service on a real systemd host, as the real-host tests and benches drive it: failpoints
 * and the switch order through unit drop-ins (read at agentd's next start), its unit's state,
 * and a process stopped at a `stop:` failpoint. Free of vitest, so benches use it too.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from './node.js';

const DROP_IN_DIR = '/etc/systemd/system/agentd.service.d';
const DROP_IN = `${DROP_IN_DIR}/failpoint.conf`;

/** Arm `points` (AGENTD_FAILPOINTS) for agentd's next start, and restart it when asked. */
export async function armFailpoints(node: RealNode, points: string[]): Promise<void> {
  await node.host.execOk(['mkdir', '-p', DROP_IN_DIR]);
  await node.host.execOk([
    'sh',
    '-c',
    `printf '[Service]\\nEnvironment="AGENTD_FAILPOINTS=%s"\\n' "$1" > ${DROP_IN}`,
    'sh',
    points.join(','),
  ]);
  await node.host.execOk(['systemctl', 'daemon-reload']);
}

/**
 * Make agentd's next start switch in `order` (`AGENTD_SWITCH_ORDER` in a drop-in of its own; the
 * default, `standby`, removes it). The caller restarts agentd.
 */
export async function setSwitchOrder(node: RealNode, order: 'standby' | 'cold'): Promise<void> {
  const file = `${DROP_IN_DIR}/switch-order.conf`;
  await node.host.execOk(['mkdir', '-p', DROP_IN_DIR]);
  await node.host.execOk(
    order === 'standby'
      ? ['rm', '-f', file]
      : [
          'sh',
          '-c',
          `printf '[Service]\\nEnvironment=AGENTD_SWITCH_ORDER=%s\\n' "$1" > ${file}`,
          'sh',
          order,
        ],
  );
  await node.host.execOk(['systemctl', 'daemon-reload']);
}

/** Remove the failpoint drop-in (the running agentd keeps what it read at its start). */
export async function disarmFailpoints(node: RealNode): Promise<void> {
  await node.host.execOk(['rm', '-f', DROP_IN]);
  await node.host.execOk(['systemctl', 'daemon-reload']);
}

/** `systemctl show` properties of agentd.service. */
export async function agentdUnit(node: RealNode): Promise<Record<string, string>> {
  const res = await node.host.execOk([
    'systemctl',
    'show',
    '-p',
    'NRestarts,SubState,MainPID,InvocationID',
    'agentd.service',
  ]);
  return Object.fromEntries(
    res.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=', 2) as [string, string]),
  );
}

/** Wait until agentd's main process (whichever systemd runs now) is SIGSTOPped at `point`; returns its PID. */
export async function waitStopped(node: RealNode, point: string, timeoutMs = 120_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pid = Number((await agentdUnit(node)).MainPID);
    if (pid > 0) {
      const st = await node.host.exec(['cat', `/proc/${pid}/stat`]);
      if (/\) [Tt] /.test(st.stdout)) return pid;
    }
    if (Date.now() > deadline) throw new Error(`agentd did not stop at ${point}\n${await node.journal(100)}`);
    await delay(50);
  }
}

/** SIGCONT to the stopped agentd. */
export async function resume(node: RealNode, pid: number): Promise<void> {
  // `kill` is the shell's: the host's minimal rootfs has no procps.
  await node.host.execOk(['sh', '-c', 'kill -CONT "$1"', 'sh', String(pid)]);
}
