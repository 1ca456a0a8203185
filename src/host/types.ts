/**
 * The seam between agentd and the host: every host command goes through a `CommandRunner`
 * (execa in production, the simulated host with `--host sim` and in tests).
 */

/** The two machine slots of the blue/green scheme. */
export const MACHINE_NAMES = ['kube1', 'kube2'] as const;
export type MachineName = (typeof MACHINE_NAMES)[number];

/** The other slot: the target of an update whose source is `m`. */
export function alternateMachine(m: MachineName): MachineName {
  return m === 'kube1' ? 'kube2' : 'kube1';
}

export interface RunOptions {
  /** Kill the command after this long (ms); it then fails with TIMEOUT. */
  timeoutMs?: number;
  /** Abort kills the command; it then fails with CANCELLED. */
  signal?: AbortSignal;
  /** Written to the command's stdin. */
  input?: string;
  /** When false, a non-zero exit resolves (with its exitCode) instead of throwing COMMAND_FAILED. */
  reject?: boolean;
}

/** What a finished command left behind (the same field names as execa's result). */
export interface CommandResult {
  /** The command line as one string, for logs and errors. */
  command: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export interface CommandRunner {
  /**
   * Run `file` with `args`. Resolves with the result; a non-zero exit throws
   * `CommandFailedError` (COMMAND_FAILED) unless `reject: false`.
   */
  run(file: string, args: readonly string[], options?: RunOptions): Promise<CommandResult>;
}

/** Injectable time, so polls, timeouts and backoffs never sleep for real in tests. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Progress of a long step, published as operation events (bytes while downloading). */
export interface ProgressEvent {
  task: string;
  message?: string;
  bytes?: number;
  totalBytes?: number;
}
export type ProgressSink = (event: ProgressEvent) => void;
