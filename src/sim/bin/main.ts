/**
 * The body of the sim executables (`machinectl`, `systemctl`, `systemd-run`): run one command
 * against the simulated host on `AGENTD_SIM_ROOT`, print what it printed, exit with its code.
 */
import { CommandFailedError, describeError, isAgentError } from '../../errors.js';
import { parseSimFaults } from '../faults.js';
import { createSimHost } from '../host/sim-host.js';
import { CROSS_PROCESS_LOCK } from '../host/state-lock.js';

/** The tools the sim stands in for. */
export type SimToolName = 'machinectl' | 'systemctl' | 'systemd-run';

/** Exit code for a misconfigured sim executable (root unset, bad faults). */
export const SIM_USAGE_EXIT = 2;

export interface SimToolIo {
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processIo: SimToolIo = {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

const withNewline = (text: string): string => (text === '' || text.endsWith('\n') ? text : `${text}\n`);

/** Run `tool args` against the sim and return the exit code (printing through `io`). */
export async function runSimTool(
  tool: SimToolName,
  args: readonly string[],
  io: SimToolIo = processIo,
): Promise<number> {
  // Each executable is a process of its own: without the cross-process state lock, two of them
  // could interleave their writes and lose one, so refuse rather than simulate wrongly.
  if (!CROSS_PROCESS_LOCK) {
    io.stderr(
      `${tool} (agentd sim): the sim executables need Linux (their state lock is an abstract unix socket)\n`,
    );
    return SIM_USAGE_EXIT;
  }
  const root = io.env.AGENTD_SIM_ROOT;
  if (!root) {
    io.stderr(
      `${tool} (agentd sim): AGENTD_SIM_ROOT is not set; set it to the --root directory of the simulated host\n`,
    );
    return SIM_USAGE_EXIT;
  }
  try {
    const host = createSimHost({ root, faults: parseSimFaults(io.env.AGENTD_SIM_FAULTS ?? '') });
    const result = await host.run(tool, args, { reject: false });
    io.stdout(withNewline(result.stdout));
    io.stderr(withNewline(result.stderr));
    return result.exitCode;
  } catch (err) {
    // An unsupported command line: print exactly what the sim said, like the tool would.
    if (err instanceof CommandFailedError) {
      io.stderr(withNewline(err.stderrTail));
      return err.exitCode ?? 1;
    }
    io.stderr(withNewline(`${tool} (agentd sim): ${describeError(err)}`));
    return isAgentError(err) && err.code === 'INVALID_CONFIG' ? SIM_USAGE_EXIT : 1;
  }
}

/** Entry point of a sim executable: run the command line of this process and exit with its code. */
export async function simToolMain(tool: SimToolName): Promise<void> {
  process.exitCode = await runSimTool(tool, process.argv.slice(2));
}
