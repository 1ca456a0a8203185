/**
 * Host paths of the upstream layout, resolved under `--root` so tests and `--sim` never
 * touch the real `/etc` or `/var/lib/machines`.
 */
import path from 'node:path';
import type { MachineName } from './types.js';

export interface HostPaths {
  readonly root: string;
  /** Resolve an absolute host path (`/etc/...`) under the root. */
  resolve(hostPath: string): string;
  machinesDir: string;
  machineDir(m: MachineName): string;
  nspawnFile(m: MachineName): string;
  nspawnDropInDir(m: MachineName): string;
  nspawnDropIn(m: MachineName): string;
  agentConfigDir: string;
  appliedConfig(m: MachineName): string;
  appliedConfigSidecar(m: MachineName): string;
  kubeConfigDir: string;
  systemdSystemDir: string;
}

export function createHostPaths(root: string): HostPaths {
  const abs = path.resolve(root);
  const resolve = (hostPath: string): string => {
    if (!hostPath.startsWith('/')) throw new Error(`host path must be absolute: ${hostPath}`);
    return abs === '/' ? hostPath : path.join(abs, hostPath);
  };
  const agentConfigDir = resolve('/etc/unbounded/agent');
  return Object.freeze({
    root: abs,
    resolve,
    machinesDir: resolve('/var/lib/machines'),
    machineDir: (m: MachineName) => resolve(`/var/lib/machines/${m}`),
    nspawnFile: (m: MachineName) => resolve(`/etc/systemd/nspawn/${m}.nspawn`),
    nspawnDropInDir: (m: MachineName) => resolve(`/etc/systemd/system/systemd-nspawn@${m}.service.d`),
    nspawnDropIn: (m: MachineName) =>
      resolve(`/etc/systemd/system/systemd-nspawn@${m}.service.d/override.conf`),
    agentConfigDir,
    appliedConfig: (m: MachineName) => path.join(agentConfigDir, `${m}-applied-config.json`),
    appliedConfigSidecar: (m: MachineName) => path.join(agentConfigDir, `${m}-applied-config.json.sha256`),
    kubeConfigDir: resolve('/etc/unbounded/kube'),
    systemdSystemDir: resolve('/etc/systemd/system'),
  });
}
