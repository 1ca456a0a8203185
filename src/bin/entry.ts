/**
 * The one entry of the bundle (dist/agentd.cjs) behind both programs: the npm bins
 * (dist/bin/agentd.js, dist/bin/agentctl.js) call `run` with their name, and the release
 * executable, a Node single executable application whose main script is this bundle, picks the
 * program by the name it was started as, so `agentctl` can be a symlink to `agentd`.
 */
import path from 'node:path';
import { isSea } from 'node:sea';

export type ProgramName = 'agentd' | 'agentctl';

/** The program a command name stands for: `agentctl` (any path, any suffix), else `agentd`. */
export function programFromName(argv0: string): ProgramName {
  return path.basename(argv0).startsWith('agentctl') ? 'agentctl' : 'agentd';
}

/** Run one program to its end and set the exit code; programs load only when chosen. */
export function run(program: ProgramName): void {
  const started =
    program === 'agentctl'
      ? import('./agentctl.js').then(({ runAgentctl }) => runAgentctl(process.argv))
      : import('./agentd.js').then(({ runAgentd }) => runAgentd(process.argv));
  started.then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(
        `${program}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exitCode = 1;
    },
  );
}

// In the release executable `process.argv0` is the name it was started as (`agentctl` through
// the symlink), while `process.execPath` is the resolved file, always `agentd`.
if (isSea()) run(programFromName(process.argv0));
