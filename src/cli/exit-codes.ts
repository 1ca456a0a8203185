/** agentctl exit codes (DESIGN §2, docs/cli.md): scripts rely on them. */
export const EXIT = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  UNREACHABLE: 3,
  BUSY: 4,
  TIMEOUT: 5,
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
