/** Whether the system tools a test needs are here (no vitest import: benches use it too). */
import { spawnSync } from 'node:child_process';

/** With AGENTD_REQUIRE_SYSTEM_TESTS=1 a missing tool fails the system tests instead of skipping them. */
export const SYSTEM_TESTS_REQUIRED = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

/** Whether `cmd` (a name on PATH or an absolute path) can be run. */
export function hasTool(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd]).status === 0;
}
