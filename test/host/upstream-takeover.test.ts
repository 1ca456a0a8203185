/**
 * The takeover on real systemd: a stand-in for the upstream agent's daemon
 * (`unbounded-agent-daemon.service`, `Restart=always`, enabled in multi-user.target) runs in
 * the host. agentd stops and disables it at its start and before an update, says so in
 * `status`, and `agentctl reset` removes its unit and the upstream agent's files. Also shown
 * here, on the machine the node runs: containerd's `LimitNOFILE=infinity` reaches what it starts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OperationJson, type StatusJson } from '../support/real-host/assert-node.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

const UNIT = 'unbounded-agent-daemon.service';
const UNIT_FILE = `/etc/systemd/system/${UNIT}`;

describe.skipIf(!requireRealHost())(
  'taking over from the upstream daemon on a real systemd host',
  { timeout: 180_000 },
  () => {
    let node: RealNode;

    const state = async (verb: 'is-enabled' | 'is-active'): Promise<string> =>
      (await node.host.exec(['systemctl', verb, UNIT])).stdout.trim();

    /** Install (once) and enable --now the stand-in, as the upstream agent leaves it. */
    const startUpstream = async (): Promise<void> => {
      await node.host.execOk([
        'sh',
        '-c',
        `printf '[Unit]\\nDescription=stand-in for the upstream agent daemon\\n[Service]\\nExecStart=/bin/sleep infinity\\nRestart=always\\n[Install]\\nWantedBy=multi-user.target\\n' > ${UNIT_FILE}` +
          ' && printf "#!/bin/sh\\n" > /usr/local/bin/unbounded-agent && mkdir -p /tmp/unbounded-agent' +
          ' && systemctl daemon-reload',
      ]);
      await node.host.execOk(['systemctl', 'enable', '--now', UNIT]);
      expect([await state('is-enabled'), await state('is-active')]).toEqual(['enabled', 'active']);
    };

    beforeAll(async () => {
      node = await startJoinedNode({ label: 'takeover' });
    }, 600_000);

    afterAll(async () => {
      await node?.stop();
    }, 120_000);

    it('a process containerd starts in the machine gets an unlimited open-file limit (LimitNOFILE=infinity)', async () => {
      // The containerd stand-in is the unit's main process; what it starts (its `sleep`) inherits.
      const script =
        'pid=$(systemctl show -p MainPID --value containerd.service); ' +
        'for c in $(cat /proc/$pid/task/$pid/children); do grep "Max open files" /proc/$c/limits; done';
      const res = await node.host.execOk([
        'systemd-run',
        '--machine=kube1',
        '--pipe',
        '--wait',
        'sh',
        '-c',
        script,
      ]);
      // `infinity` is as high as the machine may go: its PID 1's hard limit (this VM caps it below
      // fs.nr_open: no CAP_SYS_RESOURCE). Without LimitNOFILE, systemd's default soft limit is 1024.
      const pid1 = await node.host.execOk([
        'systemd-run',
        '--machine=kube1',
        '--pipe',
        '--wait',
        'grep',
        'Max open files',
        '/proc/1/limits',
      ]);
      const ceiling = pid1.stdout.trim().split(/\s+/)[4] as string;
      expect(Number(ceiling)).toBeGreaterThan(1024);
      const lines = res.stdout.trim().split('\n');
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) expect(line.split(/\s+/).slice(3, 5)).toEqual([ceiling, ceiling]);
    });

    it('stops and disables the running upstream daemon when agentd starts, and says so in status', async () => {
      await startUpstream();
      await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
      await node.waitReady();
      expect([await state('is-enabled'), await state('is-active')]).toEqual(['disabled', 'inactive']);
      const status = await node.agentctlJson<StatusJson>(['status']);
      expect(status.node.warnings.join('\n')).toContain(
        `agentd stopped and disabled the upstream agent's daemon ${UNIT} (it was enabled and running)`,
      );
    });

    it('stops it again before an update when it was enabled meanwhile', async () => {
      await startUpstream();
      const op = await node.agentctlJson<OperationJson>(['update', '--force']);
      expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded' });
      expect([await state('is-enabled'), await state('is-active')]).toEqual(['disabled', 'inactive']);
    });

    it('reset removes the unit and the upstream agent’s files', async () => {
      await node.agentctlJson<OperationJson>(['reset', '--yes']);
      expect((await node.host.exec(['test', '-e', UNIT_FILE])).exitCode).not.toBe(0);
      expect((await node.host.exec(['test', '-e', '/usr/local/bin/unbounded-agent'])).exitCode).not.toBe(0);
      expect((await node.host.exec(['test', '-e', '/tmp/unbounded-agent'])).exitCode).not.toBe(0);
      expect((await node.host.exec(['test', '-e', '/usr/local/bin/agentd'])).exitCode).toBe(0);
    });
  },
);
