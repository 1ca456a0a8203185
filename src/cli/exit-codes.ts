/** agentctl exit codes (docs/cli.md): scripts rely on them. */
export const EXIT = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  UNREACHABLE: 3,
  BUSY: 4,
  TIMEOUT: 5,
  /** The daemon is not ready yet (starting, or recovering) or is shutting down: try again shortly. */
  RETRY: 6,
  /** Ctrl-C while following an operation: agentctl detached, the operation keeps running (128 + SIGINT). */
  DETACHED: 130,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * The `error.code` values agentctl gives a failure itself, each with its exit code; a code the
 * daemon answered is passed on as it is (docs/errors.md). docs/errors.md ("agentctl errors") lists
 * these, and the exit-code table of docs/cli.md and the man page is generated from them; tests
 * keep the three and the codes used under src/cli/ in step.
 */
export const CLI_ERROR_CODES = {
  USAGE: EXIT.USAGE,
  PAYLOAD_TOO_LARGE: EXIT.USAGE,
  INVALID_CONFIG: EXIT.USAGE,
  METHOD_NOT_FOUND: EXIT.USAGE,
  CONFIRMATION_REQUIRED: EXIT.USAGE,
  HOST_REQUIRED: EXIT.USAGE,
  HOST_MISMATCH: EXIT.USAGE,
  ROOT_MISMATCH: EXIT.USAGE,
  ROOT_REQUIRED: EXIT.USAGE,
  STATE_DIR_REQUIRED: EXIT.USAGE,
  UNREACHABLE: EXIT.UNREACHABLE,
  TIMEOUT: EXIT.TIMEOUT,
  DRAINING: EXIT.RETRY,
  NOT_CONFIRMED: EXIT.FAILED,
  STREAM_CLOSED: EXIT.FAILED,
  BAD_ANSWER: EXIT.FAILED,
  PID_FILE_UNREADABLE: EXIT.FAILED,
  PID_FILE_MISMATCH: EXIT.FAILED,
  PERMISSION_DENIED: EXIT.FAILED,
  KUBE_UNAVAILABLE: EXIT.FAILED,
  KUBE_CONFLICT: EXIT.FAILED,
  INTERNAL: EXIT.FAILED,
  INTERRUPTED: EXIT.DETACHED,
} as const satisfies Record<string, ExitCode>;
export type CliErrorCode = keyof typeof CLI_ERROR_CODES;

/**
 * What a failure says besides its message: always its stable `code` (one of CLI_ERROR_CODES, or
 * the daemon's own), which `--json` prints as `error.code`.
 */
export type CliErrorDetails = { code: string } & Record<string, unknown>;

/** A failure agentctl reports with its own exit code and message. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    readonly details: CliErrorDetails,
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
