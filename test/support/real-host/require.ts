/**
 * Whether the real-host suite can run here: root, cgroups we can create, and the tools
 * (packages mmdebstrap, zstd, systemd-container, iproute2, util-linux, skopeo, docker-registry,
 * curl). Without them the suite is skipped — unless AGENTD_REQUIRE_SYSTEM_TESTS=1 (CI), where
 * it runs and fails, naming what is missing.
 */
import { SYSTEM_TESTS_REQUIRED, hasTool } from '../system-tools.js';

const TOOLS = [
  'mmdebstrap',
  'zstd',
  'tar',
  'systemd-nspawn',
  'ip',
  'nsenter',
  'skopeo',
  '/usr/bin/docker-registry',
  'curl',
];

/** What keeps the real-host suite from running here (empty: nothing). */
export function realHostMissing(): string[] {
  const missing = TOOLS.filter((t) => !hasTool(t));
  if (process.getuid?.() !== 0) missing.push('root (systemd-nspawn and cgroups need it)');
  return missing;
}

/** For `describe.skipIf(!requireRealHost())`: run when possible, and always under CI. */
export function requireRealHost(): boolean {
  return realHostMissing().length === 0 || SYSTEM_TESTS_REQUIRED;
}

/** Throw, naming what is missing, when the suite cannot run (called before booting a host). */
export function assertRealHostTools(): void {
  const missing = realHostMissing();
  if (missing.length > 0) {
    throw new Error(
      `the real-host suite cannot run: missing ${missing.join(', ')} (apt-get install mmdebstrap zstd systemd-container iproute2 skopeo docker-registry curl)`,
    );
  }
}
