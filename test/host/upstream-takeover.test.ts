/**
 * The takeover on real systemd: a stand-in for the upstream agent's daemon
 * (`unbounded-agent-daemon.service`, `Restart=always`, enabled in multi-user.target) runs in
 * the host. agentd stops and disables it at its start and before an update, says so in
 * `status`, and `agentctl reset` removes its unit and the upstream agent's files.
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
