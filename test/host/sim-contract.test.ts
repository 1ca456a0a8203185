/**
 * The simulated host held to real systemd 252: the same command sequence — the command lines
 * agentd's machine manager issues, in the situations it meets (a running machine, a missing
 * one, one being stopped, one just started) — runs against a real systemd host and against the
 * simulated host, each starting from a node joined to kube1, and every step must end the same
 * way on both: success or failure, and for a failure the same class of error
 * (`classifyHostError`, the classes agentd decides on).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/host/clock.js';
import { classifyHostError, type HostErrorClass } from '../../src/host/machine-errors.js';
import { createHostPaths } from '../../src/host/paths.js';
import { setStandbyBoot, withStandbyBoot } from '../../src/host/standby-boot.js';
import { createSimHost } from '../../src/sim/host/index.js';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { mirrorAgentConfig, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

interface Outcome {
  exitCode: number;
  stdout: string;
  stderr: string;
}
type Exec = (argv: string[]) => Promise<Outcome>;
type Exists = (p: string) => Promise<boolean>;
type SetStandby = (on: boolean) => Promise<void>;

/** One step's result as compared across the hosts. */
type Seen = 'ok' | HostErrorClass | `exists=${boolean}` | `${'ok' | HostErrorClass}: ${string}`;

interface Step {
  argv?: string[];
  /** Compare `test -e` of a host path instead of a command. */
  exists?: string;
  /** Retry (up to 30 s) until the step ends this way: real systemd takes its time. */
  until?: 'ok' | 'fail';
  /** The outcomes either host may show (compared as a set, not one to one): a race on the real host. */
  either?: Seen[];
  /** Compare what it prints too (trimmed): agentd reads the answer, not only the exit code. */
  answer?: boolean;
  /** Make kube1's next boot a standby boot (true) or a normal one, as agentd does (its .nspawn file). */
  standby?: boolean;
}

const inM = (m: string, ...cmd: string[]): string[] => [
  'systemd-run',
  `--machine=${m}`,
  '--pipe',
  '--wait',
  ...cmd,
];

/** `systemctl --machine=<m> …`: the machine's systemd asked over its bus, no unit made in it. */
const onBus = (m: string, ...args: string[]): string[] => ['systemctl', `--machine=${m}`, ...args];

const SCRIPT: Step[] = [
  // kube1 runs: what agentd sees of a healthy machine
  { argv: ['machinectl', 'show', 'kube1'] },
  { argv: inM('kube1', 'systemctl', 'is-active', 'kubelet.service') },
  // status and repair ask the same of the machine's systemd over its bus
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true },
  // the image of a running machine cannot be removed
  { argv: ['machinectl', 'remove', 'kube1'] },
  // kube2 does not exist
  { argv: ['machinectl', 'show', 'kube2'] },
  { argv: inM('kube2', '/bin/true') },
  { argv: onBus('kube2', 'is-active', 'kubelet.service'), answer: true },
  { argv: ['machinectl', 'start', 'kube2'] },
  { argv: ['machinectl', 'terminate', 'kube2'] },
  { argv: ['machinectl', 'disable', 'kube2'] },
  { argv: ['machinectl', 'remove', 'kube2'] },
  { argv: ['systemctl', 'stop', 'systemd-nspawn@kube2.service'] },
  {
    argv: [
      'systemctl',
      'show',
      '--property=ActiveState',
      '--property=SubState',
      '--property=Result',
      'systemd-nspawn@kube2.service',
    ],
  },
  // stop kube1 the way agentd does
  { argv: inM('kube1', 'systemctl', 'stop', 'kubelet.service') },
  { argv: inM('kube1', 'systemctl', 'stop', 'containerd.service') },
  { argv: ['machinectl', 'disable', 'kube1'] },
  { argv: ['systemctl', 'stop', 'systemd-nspawn@kube1.service'] },
  { argv: ['machinectl', 'show', 'kube1'], until: 'fail' },
  { argv: inM('kube1', '/bin/true') },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true },
  { argv: ['machinectl', 'terminate', 'kube1'] },
  // start it again: its bus is not there at once
  { argv: ['machinectl', 'enable', 'kube1'] },
  { argv: ['machinectl', 'start', 'kube1'] },
  { argv: inM('kube1', '/bin/true'), either: ['ok', 'bus-not-ready'] },
  { argv: inM('kube1', '/bin/true'), until: 'ok' },
  // units enabled in the machine come back with it
  { argv: inM('kube1', 'systemctl', 'is-active', 'kubelet.service'), until: 'ok' },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true },
  // starting a running machine is a no-op
  { argv: ['machinectl', 'start', 'kube1'] },
  // the standby boot (docs/architecture.md, "Hot standby"): the machine's systemd and D-Bus
  // answer; kubelet and containerd, enabled in its rootfs, stay off
  { argv: ['systemctl', 'stop', 'systemd-nspawn@kube1.service'] },
  { argv: ['machinectl', 'show', 'kube1'], until: 'fail' },
  { standby: true },
  { argv: ['machinectl', 'start', 'kube1'] },
  { argv: inM('kube1', '/bin/true'), until: 'ok' },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true },
  { argv: inM('kube1', 'systemctl', 'is-active', 'kubelet.service'), answer: true },
  // the switch: the next boot a normal one, the services, then the machine's normal target
  { standby: false },
  { argv: inM('kube1', 'systemctl', 'enable', '--now', 'containerd.service', 'kubelet.service') },
  { argv: onBus('kube1', 'start', '--no-block', 'default.target') },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true, until: 'ok' },
  // the services stop in one transaction; the machine stays booted
  { argv: inM('kube1', 'systemctl', 'stop', 'kubelet.service', 'containerd.service') },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true },
  { argv: inM('kube1', '/bin/true') },
  // and come back without a boot
  { argv: inM('kube1', 'systemctl', 'enable', '--now', 'containerd.service', 'kubelet.service') },
  { argv: onBus('kube1', 'is-active', 'kubelet.service'), answer: true, until: 'ok' },
  // stop it, then remove its image: the directory goes, the .nspawn settings file with it
  { argv: ['systemctl', 'stop', 'systemd-nspawn@kube1.service'] },
  { argv: ['machinectl', 'show', 'kube1'], until: 'fail' },
  { argv: ['machinectl', 'remove', 'kube1'] },
  { exists: '/var/lib/machines/kube1' },
  { exists: '/etc/systemd/nspawn/kube1.nspawn' },
  { argv: ['machinectl', 'remove', 'kube1'] },
  { argv: ['machinectl', 'start', 'kube1'] },
];

const seenOf = (o: Outcome): 'ok' | HostErrorClass => (o.exitCode === 0 ? 'ok' : classifyHostError(o.stderr));

/** Run the script; one entry per step: what it ended as, and the raw output for messages. */
async function runScript(
  exec: Exec,
  exists: Exists,
  setStandby: SetStandby,
): Promise<Array<{ seen: Seen; raw: string }>> {
  const out: Array<{ seen: Seen; raw: string }> = [];
  for (const step of SCRIPT) {
    if (step.standby !== undefined) {
      await setStandby(step.standby);
      out.push({ seen: 'ok', raw: `standby boot of kube1: ${step.standby}` });
      continue;
    }
    if (step.exists) {
      const e = await exists(step.exists);
      out.push({ seen: `exists=${e}`, raw: step.exists });
      continue;
    }
    const argv = step.argv ?? [];
    const deadline = Date.now() + 30_000;
    let o = await exec(argv);
    while (step.until && (o.exitCode === 0) !== (step.until === 'ok') && Date.now() < deadline) {
      await delay(200);
      o = await exec(argv);
    }
    out.push({
      seen: step.answer ? `${seenOf(o)}: ${o.stdout.trim()}` : seenOf(o),
      raw: `${argv.join(' ')} → ${o.exitCode} ${o.stdout.trim()} ${o.stderr.trim()}`,
    });
  }
  return out;
}

describe.skipIf(!requireRealHost())(
  'the simulated host behaves as real systemd 252',
  { timeout: 300_000 },
  () => {
    let node: RealNode;
    let mirror: Mirror;
    let real: Array<{ seen: Seen; raw: string }>;
    let sim: Array<{ seen: Seen; raw: string }>;

    beforeAll(async () => {
      // The simulated side first: it needs a moment of CPU the real host would compete for.
      mirror = await startMirror();
      const d = await startSimDaemon();
      const joined = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
      expect(joined.state).toBe('succeeded');
      await d.stop();
      const host = createSimHost({ root: d.root, clock: systemClock });
      sim = await runScript(
        // An unsupported line throws even with reject:false: record it as a failure of its own.
        (argv) =>
          host
            .run(argv[0] as string, argv.slice(1), { reject: false })
            .catch((err: Error) => ({ exitCode: 1, stdout: '', stderr: `sim refused: ${err.message}` })),
        async (p) => existsSync(path.join(d.root, p)),
        (on) => setStandbyBoot(createHostPaths(d.root), 'kube1', on),
      );

      node = await startJoinedNode({ label: 'contract' });
      // agentd must not act on the machines while the script runs.
      await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
      real = await runScript(
        (argv) => node.host.exec(argv),
        async (p) => (await node.host.exec(['test', '-e', p])).exitCode === 0,
        async (on) => {
          // The same edit agentd makes, of the real host's file.
          const file = '/etc/systemd/nspawn/kube1.nspawn';
          const text = withStandbyBoot((await node.host.execOk(['cat', file])).stdout, on);
          const b64 = Buffer.from(text).toString('base64');
          await node.host.execOk(['sh', '-c', `echo ${b64} | base64 -d > ${file}`]);
        },
      );
    }, 900_000);

    afterAll(async () => {
      await mirror?.close();
      await node?.stop();
    }, 120_000);

    it('every step ends the same way on both hosts', () => {
      const rows = SCRIPT.map((step, i) => {
        const r = real[i];
        const s = sim[i];
        const allowed = step.either;
        const same = allowed
          ? allowed.includes(r?.seen as Seen) && allowed.includes(s?.seen as Seen)
          : r?.seen === s?.seen;
        return {
          same,
          line: `${same ? ' ' : '✗'} real: ${r?.raw} [${r?.seen}]\n  sim:  ${s?.raw} [${s?.seen}]`,
        };
      });
      const report = rows.map((r) => r.line).join('\n');
      expect(rows.filter((r) => !r.same).length, report).toBe(0);
    });

    it('the classes agentd decides on all occur (the script covers them)', () => {
      const seen = new Set(real.map((r) => r.seen));
      for (const cls of ['busy', 'host-down', 'no-machine', 'no-image'] as const) expect(seen).toContain(cls);
    });
  },
);
