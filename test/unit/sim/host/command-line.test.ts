import { describe, expect, it } from 'vitest';
import { formatCommandLine, parseSimCommand } from '../../../../src/sim/host/command-line.js';

const run = (m: string, ...cmd: string[]): string[] => [`--machine=${m}`, '--pipe', '--wait', ...cmd];

describe('parseSimCommand', () => {
  it.each<[string, string[], unknown]>([
    ['machinectl', ['enable', 'kube1'], { kind: 'machinectl', verb: 'enable', machine: 'kube1' }],
    ['machinectl', ['disable', 'kube2'], { kind: 'machinectl', verb: 'disable', machine: 'kube2' }],
    ['machinectl', ['start', 'kube1'], { kind: 'machinectl', verb: 'start', machine: 'kube1' }],
    [
      'systemctl',
      [
        'show',
        '--property=ActiveState',
        '--property=SubState',
        '--property=Result',
        'systemd-nspawn@kube2.service',
      ],
      { kind: 'nspawn-unit-state', machine: 'kube2' },
    ],
    ['machinectl', ['terminate', 'kube1'], { kind: 'machinectl', verb: 'terminate', machine: 'kube1' }],
    ['machinectl', ['show', 'kube2'], { kind: 'machinectl', verb: 'show', machine: 'kube2' }],
    ['machinectl', ['remove', 'kube2'], { kind: 'machinectl', verb: 'remove', machine: 'kube2' }],
    ['systemctl', ['daemon-reload'], { kind: 'daemon-reload' }],
    [
      'systemctl',
      ['status', 'systemd-nspawn@kube2.service', '--no-pager', '-n', '20'],
      { kind: 'nspawn-status', machine: 'kube2', lines: 20 },
    ],
    [
      'systemd-run',
      run('kube2', 'journalctl', '-u', 'kubelet.service', '-n', '50', '--no-pager'),
      {
        kind: 'in-machine',
        machine: 'kube2',
        action: { type: 'journal', unit: 'kubelet.service', lines: 50 },
      },
    ],
    [
      'systemctl',
      ['reset-failed', 'systemd-nspawn@kube1.service'],
      { kind: 'nspawn-unit', verb: 'reset-failed', machine: 'kube1' },
    ],
    [
      'systemctl',
      ['stop', 'systemd-nspawn@kube2.service'],
      { kind: 'nspawn-unit', verb: 'stop', machine: 'kube2' },
    ],
    [
      'systemd-run',
      run('kube1', '/bin/true'),
      { kind: 'in-machine', machine: 'kube1', action: { type: 'true' } },
    ],
    [
      'systemd-run',
      run('kube1', 'systemctl', 'enable', '--now', 'containerd.service'),
      { kind: 'in-machine', machine: 'kube1', action: { type: 'enable-now', units: ['containerd.service'] } },
    ],
    [
      'systemd-run',
      run('kube2', 'systemctl', 'enable', '--now', 'kubelet.service'),
      { kind: 'in-machine', machine: 'kube2', action: { type: 'enable-now', units: ['kubelet.service'] } },
    ],
    [
      'systemd-run',
      run('kube2', 'systemctl', 'enable', '--now', 'containerd.service', 'kubelet.service'),
      {
        kind: 'in-machine',
        machine: 'kube2',
        action: { type: 'enable-now', units: ['containerd.service', 'kubelet.service'] },
      },
    ],
    [
      'systemd-run',
      run('kube1', 'systemctl', 'stop', 'kubelet.service', 'containerd.service'),
      {
        kind: 'in-machine',
        machine: 'kube1',
        action: { type: 'stop', units: ['kubelet.service', 'containerd.service'] },
      },
    ],
    [
      'systemctl',
      ['--machine=kube2', 'start', '--no-block', 'default.target'],
      { kind: 'in-machine', machine: 'kube2', action: { type: 'start-default' } },
    ],
    [
      'systemd-run',
      run('kube2', 'systemctl', 'stop', 'containerd.service'),
      { kind: 'in-machine', machine: 'kube2', action: { type: 'stop', units: ['containerd.service'] } },
    ],
    [
      'systemd-run',
      run('kube1', 'systemctl', 'is-active', 'kubelet.service'),
      { kind: 'in-machine', machine: 'kube1', action: { type: 'is-active', unit: 'kubelet.service' } },
    ],
    [
      'systemd-run',
      run('kube2', 'test', '-f', '/etc/ready'),
      { kind: 'in-machine', machine: 'kube2', action: { type: 'exec', argv: ['test', '-f', '/etc/ready'] } },
    ],
    [
      'systemd-run',
      run('kube1', '/bin/false'),
      { kind: 'in-machine', machine: 'kube1', action: { type: 'exec', argv: ['/bin/false'] } },
    ],
  ])('accepts %s %j', (file, args, expected) => {
    expect(parseSimCommand(file, args)).toEqual(expected);
  });

  it.each<[string, string[]]>([
    ['machinectl', ['start', 'kube3']],
    ['machinectl', ['start']],
    ['machinectl', ['poweroff', 'kube1']],
    ['machinectl', ['start', 'kube1', '--quiet']],
    ['/usr/bin/machinectl', ['start', 'kube1']],
    ['systemctl', ['daemon-reload', '--now']],
    ['systemctl', ['restart', 'systemd-nspawn@kube1.service']],
    ['systemctl', ['stop', 'systemd-nspawn@kube9.service']],
    ['systemctl', ['stop', 'kubelet.service']],
    ['systemd-run', ['--machine=kube1', '--wait', '--pipe', '/bin/true']],
    ['systemd-run', run('kube1', 'journalctl', '-u', 'kubelet.service')],
    ['systemd-run', run('kube1')],
    ['systemd-run', run('kube1', 'systemctl', 'enable', 'kubelet.service')],
    ['systemd-run', run('kube1', 'systemctl', 'enable', '--now', 'docker.service')],
    ['systemd-run', run('kube1', 'systemctl', 'is-active', 'containerd.service')],
    ['systemd-run', run('kube1', 'systemctl', 'restart', 'kubelet.service')],
    ['rm', ['-rf', '/']],
  ])('rejects %s %j', (file, args) => {
    expect(parseSimCommand(file, args)).toBeUndefined();
  });
});

describe('formatCommandLine', () => {
  it('quotes only what needs quoting', () => {
    expect(formatCommandLine('systemd-run', run('kube1', '/bin/true'))).toBe(
      'systemd-run --machine=kube1 --pipe --wait /bin/true',
    );
    expect(formatCommandLine('sh', ['-c', "echo 'x' y"])).toBe(`sh -c 'echo '\\''x'\\'' y'`);
  });
});
