import { describe, expect, it } from 'vitest';
import {
  renderContainerdConfig,
  renderContainerdService,
} from '../../../../src/provision/files/containerd-files.js';
import { parseSections, values } from './ini.js';

describe('containerd config.toml', () => {
  const toml = renderContainerdConfig();
  const s = parseSections(`[top]\n${toml}`);
  const runtime = "plugins.'io.containerd.cri.v1.runtime'";
  const images = "plugins.'io.containerd.cri.v1.images'";

  it('uses schema version 3, the one containerd 2.x reads natively', () => {
    expect(values(s, 'top', 'version')).toEqual(['3']);
  });

  it('runs runc with systemd cgroups as the default runtime', () => {
    expect(values(s, `${runtime}.containerd`, 'default_runtime_name')).toEqual(["'runc'"]);
    expect(values(s, `${runtime}.containerd.runtimes.runc`, 'runtime_type')).toEqual([
      "'io.containerd.runc.v2'",
    ]);
    expect(values(s, `${runtime}.containerd.runtimes.runc.options`, 'SystemdCgroup')).toEqual(['true']);
  });

  it('points CNI at /opt/cni/bin and /etc/cni/net.d', () => {
    expect(values(s, `${runtime}.cni`, 'bin_dir')).toEqual(["'/opt/cni/bin'"]);
    expect(values(s, `${runtime}.cni`, 'conf_dir')).toEqual(["'/etc/cni/net.d'"]);
  });

  it('pins the MCR pause image as sandbox and serves metrics on 0.0.0.0:10257', () => {
    expect(values(s, `${images}.pinned_images`, 'sandbox')).toEqual([
      "'mcr.microsoft.com/oss/kubernetes/pause:3.9'",
    ]);
    expect(values(s, 'metrics', 'address')).toEqual(["'0.0.0.0:10257'"]);
  });

  it("imports the conf.d drop-ins, so operators' and the GPU runtime's files take effect", () => {
    expect(values(s, 'top', 'imports')).toEqual(["['/etc/containerd/conf.d/*.toml']"]);
    expect(values(s, 'top', 'oom_score')).toEqual(['0']);
  });

  it('defines an untrusted runtime beside runc, both runc with NoNewKeyring as upstream', () => {
    for (const name of ['runc', 'untrusted']) {
      expect(values(s, `${runtime}.containerd.runtimes.${name}`, 'runtime_type')).toEqual([
        "'io.containerd.runc.v2'",
      ]);
      const options = `${runtime}.containerd.runtimes.${name}.options`;
      expect(values(s, options, 'BinaryName')).toEqual(["'/usr/local/bin/runc'"]);
      expect(values(s, options, 'NoNewKeyring')).toEqual(['true']);
      expect(values(s, options, 'SystemdCgroup')).toEqual(['true']);
    }
    expect(values(s, `${runtime}.containerd`, 'default_runtime_name')).toEqual(["'runc'"]);
  });

  it('reads registry hosts from /etc/containerd/certs.d', () => {
    expect(values(s, `${images}.registry`, 'config_path')).toEqual(["'/etc/containerd/certs.d'"]);
  });

  it("sends upstream's X-Meta-Source-Client header to registries", () => {
    expect(values(s, `${images}.registry.headers`, 'X-Meta-Source-Client')).toEqual([
      "['unbounded-kube/kubelet']",
    ]);
  });

  it('has no version-2 plugin names left', () => {
    expect(toml).not.toContain('io.containerd.grpc.v1.cri');
    expect(toml).not.toContain('sandbox_image');
  });
});

describe('containerd.service', () => {
  it('starts /usr/local/bin/containerd as a notify service with delegated cgroups', () => {
    const s = parseSections(renderContainerdService());
    expect(values(s, 'Service', 'ExecStart')).toEqual([
      '/usr/local/bin/containerd --config /etc/containerd/config.toml',
    ]);
    expect(values(s, 'Service', 'Type')).toEqual(['notify']);
    expect(values(s, 'Service', 'Delegate')).toEqual(['yes']);
    expect(values(s, 'Service', 'KillMode')).toEqual(['process']);
    expect(values(s, 'Install', 'WantedBy')).toEqual(['multi-user.target']);
  });

  it('gives containers an unlimited open-file limit, as upstream', () => {
    const s = parseSections(renderContainerdService());
    expect(values(s, 'Service', 'LimitNOFILE')).toEqual(['infinity']);
  });

  it("restarts after 1 s with upstream's backoff (to 60 s over 10 steps) and never gives up", () => {
    const s = parseSections(renderContainerdService());
    expect(values(s, 'Service', 'Restart')).toEqual(['always']);
    expect(values(s, 'Service', 'RestartSec')).toEqual(['1']);
    expect(values(s, 'Service', 'RestartSteps')).toEqual(['10']);
    expect(values(s, 'Service', 'RestartMaxDelaySec')).toEqual(['60']);
    expect(values(s, 'Unit', 'StartLimitIntervalSec')).toEqual(['0']);
  });
});
