/**
 * agentctl: the operator CLI. Bundled as dist/agentctl.cjs (scripts/build.ts), run by the npm
 * bin and the release executable.
 */
import { runCli } from '../cli/main.js';
import { exitQuietlyOnBrokenPipe, runProgram } from './run.js';

/** Run one agentctl command; resolves to the process exit code. */
export function runAgentctl(argv: string[]): Promise<number> {
  exitQuietlyOnBrokenPipe();
  return runCli(argv, {
    env: process.env,
    cwd: process.cwd(),
    stdout: process.stdout,
    stderr: process.stderr,
  });
}

/** The bundle's entry (dist/agentctl.cjs): run agentctl with this process's arguments. */
export function run(): void {
  // A command's main awaits all of its work: once it has settled, exit without waiting for
  // Node's teardown (run.ts).
  runProgram('agentctl', () => runAgentctl(process.argv), { exitWhenSettled: true });
}
