/**
 * agentctl: the operator CLI. Bundled as dist/agentctl.cjs (scripts/build.ts), run by the npm
 * bin and the release executable.
 */
import { runCli } from '../cli/main.js';
import { runProgram } from './run.js';

/** Run one agentctl command; resolves to the process exit code. */
export function runAgentctl(argv: string[]): Promise<number> {
  // `agentctl … | head`: the reader went away, so there is nobody left to tell anything. Exit
  // quietly instead of dying on an unhandled EPIPE with a stack trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
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
