import { describe, expect, it } from 'vitest';
import { agentConfigSchema, type AgentConfig } from '../../../../src/config/agent-config.js';
import {
  kubeletNodeArgs,
  renderKubeletDropIn,
  renderKubeletNodeDropIn,
  renderKubeletService,
} from '../../../../src/provision/files/kubelet-units.js';
import { makeAgentConfig } from '../../../support/agent-config.js';
import { parseSections, values } from './ini.js';

function config(kubelet: Partial<AgentConfig['Kubelet']> = {}, version = '1.34.0'): AgentConfig {
  const base = makeAgentConfig();
  return agentConfigSchema.parse({
    ...base,
    Cluster: { ...base.Cluster, Version: version },
    Kubelet: { ...base.Kubelet, ...kubelet },
  });
}

describe('kubelet.service', () => {
  it('keeps StartLimitIntervalSec in [Unit] and orders kubelet after containerd', () => {
    const s = parseSections(renderKubeletService());
    expect(values(s, 'Unit', 'StartLimitIntervalSec')).toEqual(['0']);
    expect(values(s, 'Service', 'StartLimitIntervalSec')).toEqual([]);
    expect(values(s, 'Unit', 'After')[0]).toContain('containerd.service');
    expect(values(s, 'Service', 'ExecStart')).toEqual(['/usr/local/bin/kubelet']);
    expect(values(s, 'Service', 'Restart')).toEqual(['always']);
  });

  it('reads /etc/default/kubelet when it exists, as upstream', () => {
    const s = parseSections(renderKubeletService());
    expect(values(s, 'Service', 'EnvironmentFile')).toEqual(['-/etc/default/kubelet']);
  });

  it("restarts after 1 s with upstream's backoff and takes exit 143 (SIGTERM) as a stop", () => {
    const s = parseSections(renderKubeletService());
    expect(values(s, 'Service', 'RestartSec')).toEqual(['1']);
    expect(values(s, 'Service', 'RestartSteps')).toEqual(['10']);
    expect(values(s, 'Service', 'RestartMaxDelaySec')).toEqual(['60']);
    expect(values(s, 'Service', 'SuccessExitStatus')).toEqual(['143']);
  });
});

describe('10-agentd.conf', () => {
  it('passes no --bootstrap-kubeconfig with an exec credential: kubelet uses its kubeconfig as is', () => {
    const s = parseSections(
      renderKubeletDropIn(config({ Auth: { ExecCredential: { command: '/usr/local/bin/tok' } } })),
    );
    expect(values(s, 'Service', 'Environment')).toContain(
      '"KUBELET_KUBECONFIG_ARGS=--kubeconfig=/var/lib/kubelet/kubeconfig"',
    );
    expect(values(s, 'Service', 'Environment').join(' ')).not.toContain('bootstrap');
  });

  it("ends the command line with the operator's KUBELET_TUNING_ARGS and KUBELET_EXTRA_ARGS", () => {
    const s = parseSections(renderKubeletDropIn(config()));
    expect(values(s, 'Service', 'ExecStart')[1]).toMatch(/ \$KUBELET_TUNING_ARGS \$KUBELET_EXTRA_ARGS$/);
  });

  it('carries the version line the simulated host reads, without a leading v', () => {
    const text = renderKubeletDropIn(config({}, 'v1.35.2'));
    expect(text.split('\n')).toContain('Environment=AGENTD_KUBERNETES_VERSION=1.35.2');
  });

  it('resets ExecStart and passes the kubeconfig, bootstrap kubeconfig and config file', () => {
    const s = parseSections(renderKubeletDropIn(config()));
    expect(values(s, 'Service', 'ExecStart')).toEqual([
      '',
      '/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_NODE_ARGS $KUBELET_TUNING_ARGS $KUBELET_EXTRA_ARGS',
    ]);
    expect(values(s, 'Service', 'Environment')).toContain(
      '"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig --kubeconfig=/var/lib/kubelet/kubeconfig"',
    );
    expect(values(s, 'Service', 'Environment')).toContain(
      '"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"',
    );
  });

  it('refuses a version that would break the unit line', () => {
    const bad = structuredClone(config());
    bad.Cluster.Version = '1.34.0\nExecStart=/bin/sh';
    expect(() => renderKubeletDropIn(bad)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
  });
});

describe('20-node.conf', () => {
  it('renders labels sorted by key, taints in order, cluster DNS and the client CA', () => {
    const c = config({
      Labels: { 'z.example.com/last': 'z', 'a.example.com/first': 'a', 'm-middle': '' },
      RegisterWithTaints: ['dedicated=gpu:NoSchedule', 'maintenance:NoExecute'],
    });
    expect(kubeletNodeArgs(c)).toEqual([
      '--node-labels=a.example.com/first=a,m-middle=,z.example.com/last=z',
      '--register-with-taints=dedicated=gpu:NoSchedule,maintenance:NoExecute',
      '--cluster-dns=10.96.0.10',
      '--client-ca-file=/etc/kubernetes/pki/apiserver-client-ca.crt',
    ]);
    expect(parseSections(renderKubeletNodeDropIn(c)).get('Service')).toEqual([
      ['Environment', `"KUBELET_NODE_ARGS=${kubeletNodeArgs(c).join(' ')}"`],
    ]);
  });

  it('gives the same bytes whatever order the labels came in', () => {
    const a = config({ Labels: { b: '2', a: '1', c: '3' } });
    const b = config({ Labels: { c: '3', a: '1', b: '2' } });
    expect(renderKubeletNodeDropIn(a)).toBe(renderKubeletNodeDropIn(b));
  });

  it('leaves out the label and taint flags when there are none', () => {
    expect(kubeletNodeArgs(config({ Labels: {}, RegisterWithTaints: [] }))).toEqual([
      '--cluster-dns=10.96.0.10',
      '--client-ca-file=/etc/kubernetes/pki/apiserver-client-ca.crt',
    ]);
  });

  it('refuses values that would change the flags even if they got past validation', () => {
    const withComma = structuredClone(config());
    withComma.Kubelet.Labels = { a: 'b,evil=1' };
    expect(() => kubeletNodeArgs(withComma)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    const withSpace = structuredClone(config());
    withSpace.Kubelet.RegisterWithTaints = ['a=b:NoSchedule --anonymous-auth=true'];
    expect(() => kubeletNodeArgs(withSpace)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
  });
});
