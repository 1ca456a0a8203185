/** agentctl exit codes (docs/cli.md): scripts rely on them. */
export const EXIT = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  UNREACHABLE: 3,
  BUSY: 4,
  TIMEOUT: 5,
  /** The daemon is not ready yet (recovering) or is shutting down: try again shortly. */
  RETRY: 6,
  /** Ctrl-C while following an operation: agentctl detached, the operation keeps running (128 + SIGINT). */
  DETACHED: 130,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure agentctl reports with its own exit code and message. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/**
 * The command has already printed its result (and any diagnostics); agentctl only has to exit
 * with this code. Used when the outcome is not success but is not an error of agentctl either:
 * an operation that failed, a preflight check that did not pass, an uninstall step that failed.
 */
export class CliExit extends Error {
  constructor(readonly exitCode: ExitCode) {
    super(`exit ${exitCode}`);
    this.name = 'CliExit';
  }
}
