/**
 * The production `CommandRunner`: runs host commands (`machinectl`, `systemctl`, `systemd-run`)
 * with execa, with a per-command timeout, cancellation and errors that carry the command line.
 */
import { commandFailpoint } from './failpoints.js';
import { execa } from 'execa';
import { ensureSpawnHeadroom } from './spawn-headroom.js';
import pino from 'pino';
import type { Logger } from 'pino';
import { CancelledError, CommandFailedError, TimeoutError } from '../errors.js';
import type { CommandResult, CommandRunner, RunOptions } from './types.js';

/** How much of stderr a `CommandFailedError` keeps (the end is where the reason usually is). */
export const STDERR_TAIL_BYTES = 2048;
/** How much of stdout/stderr the debug log line keeps. */
const LOG_OUTPUT_CHARS = 2048;
/** Used when neither the call nor the runner names a timeout, so a hung command cannot hang agentd. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 300_000;

export interface ExecaRunnerOptions {
  /** Receives one debug line per command (command, exitCode, durationMs, output tails). */
  logger?: Logger;
  /** Environment variables merged over `process.env` for every command. */
  env?: NodeJS.ProcessEnv;
  /** Timeout of a command whose call does not give `timeoutMs` (default 300 s). */
  defaultTimeoutMs?: number;
}

/** The last `max` characters of `text`, marked as cut when it was longer. */
export function tail(text: string, max: number = STDERR_TAIL_BYTES): string {
  const trimmed = text.trimEnd();
  return trimmed.length <= max ? trimmed : `…${trimmed.slice(trimmed.length - max)}`;
}

/** Create a `CommandRunner` that runs commands for real with execa. */
export function createExecaRunner(options: ExecaRunnerOptions = {}): CommandRunner {
  const logger = options.logger ?? pino({ enabled: false });
  const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;

  return {
    async run(file: string, args: readonly string[], runOptions: RunOptions = {}): Promise<CommandResult> {
      const timeoutMs = runOptions.timeoutMs ?? defaultTimeoutMs;
      const line = [file, ...args].join(' ');
      commandFailpoint(line);
      // A spawn without descriptors would end agentd (spawn-headroom.ts): fail the command instead.
      try {
        ensureSpawnHeadroom(line);
      } catch (err) {
        throw new CommandFailedError(line, null, '', {
          reason: `could not be run (${(err as NodeJS.ErrnoException).code ?? 'EMFILE'}: too many open files)`,
          cause: err,
        });
      }
      // reject:false so every outcome arrives as a result we translate into agentd errors here.
      const result = await execa(file, args, {
        reject: false,
        timeout: timeoutMs > 0 ? timeoutMs : undefined,
        cancelSignal: runOptions.signal,
        input: runOptions.input,
        env: options.env,
        stdin: runOptions.input === undefined ? 'ignore' : undefined,
        encoding: 'utf8',
      });
      const command = result.escapedCommand;
      const durationMs = Math.round(result.durationMs);
      logger.debug(
        {
          command,
          exitCode: result.exitCode ?? null,
          signal: result.signal ?? null,
          durationMs,
          stdout: tail(result.stdout, LOG_OUTPUT_CHARS),
          stderr: tail(result.stderr, LOG_OUTPUT_CHARS),
        },
        'host command finished',
      );
      return toCommandResult(file, result, command, durationMs, timeoutMs, runOptions.reject !== false);
    },
  };
}

/** The fields of execa's result this runner reads. */
interface ExecaOutcome {
  exitCode?: number;
  signal?: string;
  timedOut: boolean;
  isCanceled: boolean;
  code?: string;
  cause?: unknown;
  stdout: string;
  stderr: string;
}

// Turns execa's result into ours, or into the agentd error that describes why it has none.
function toCommandResult(
  file: string,
  result: ExecaOutcome,
  command: string,
  durationMs: number,
  timeoutMs: number,
  reject: boolean,
): CommandResult {
  const stderrTail = tail(result.stderr);
  if (result.timedOut) {
    throw new TimeoutError(command, timeoutMs, { data: { command, stderr: stderrTail } });
  }
  if (result.isCanceled) {
    throw new CancelledError(command, { cause: result.cause, data: { command } });
  }
  if (result.code === 'ENOENT' && result.exitCode === undefined) {
    throw new CommandFailedError(command, null, '', {
      reason: `command not found: ${JSON.stringify(file)} is not on PATH or not executable`,
      cause: result.cause,
    });
  }
  if (result.exitCode === undefined) {
    // Killed by a signal or could not be spawned: there is no exit code to hand back, even with reject:false.
    const reason = result.signal
      ? `killed by ${result.signal}`
      : `could not be run (${result.code ?? 'unknown error'})`;
    throw new CommandFailedError(command, null, stderrTail, { reason, cause: result.cause });
  }
  if (result.exitCode !== 0 && reject) {
    throw new CommandFailedError(command, result.exitCode, stderrTail);
  }
  return { command, exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr, durationMs };
}
