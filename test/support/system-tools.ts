/** Whether the system tools a test needs are here (no vitest import: benches use it too). */
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

/** With AGENTD_REQUIRE_SYSTEM_TESTS=1 a missing tool fails the system tests instead of skipping them. */
export const SYSTEM_TESTS_REQUIRED = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

/** Whether `cmd` (a name on PATH or an absolute path) can be run. */
export function hasTool(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd]).status === 0;
}

/**
 * A config for Debian's docker-registry serving `addr` with its storage under `dir`; returns its
 * path. With `htpasswd` (a file of bcrypt entries) every request needs Basic auth.
 */
export async function writeRegistryConfig(dir: string, addr: string, htpasswd?: string): Promise<string> {
  const config = path.join(dir, 'registry.yml');
  const storage = path.join(dir, 'registry-storage');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${storage}`,
      'http:',
      `  addr: ${addr}`,
      ...(htpasswd ? ['auth:', '  htpasswd:', '    realm: agentd-test', `    path: ${htpasswd}`] : []),
      '',
    ].join('\n'),
  );
  return config;
}
