/**
 * The answer of a call that changes something on agentd, lost: the change may have been made all
 * the same, and agentctl says so, with how to see whether it was (docs/operations.md, "When the
 * answer is lost"). The answer is lost when
 *
 * - --timeout passes before it comes: exit 5, `TIMEOUT`;
 * - agentd closes the connection after the request went out, before answering (it stopped or
 *   died as the request came in): exit 3, `UNREACHABLE` with `reason: closed`;
 * - it cannot be read (cut short, not HTTP, not JSON, not a JSON-RPC response): exit 1,
 *   `BAD_ANSWER`; something answered, so the request had arrived.
 *
 * Each carries `mayHaveStarted: true`. A connection that failed before the request was sent (no
 * socket, refused) changed nothing: that is the usual error, without it.
 */
import { formatDuration } from '../config/duration.js';
import { BadAnswerError } from '../rpc/client.js';
import { CLOSED_WITHOUT_ANSWER, DaemonUnreachableError } from '../rpc/http-transport.js';
import { MUTATING } from '../rpc/mutating-methods.js';
import type { CliContext } from './context.js';
import { CliError, EXIT } from './exit-codes.js';

/** A call that changes something, as the messages name it when its answer is lost. */
export interface Change {
  /** The request: `the update request`, `the fleet pause request`. */
  request: string;
  /** What may have happened: `the update may have started on the daemon`. */
  effect: string;
  /** How to see whether it did: `see it with: agentctl ops list, …`. */
  check: string;
}

/**
 * Whether a call of `method` with `params` may change something: the method is declared
 * mutating (or this agentctl does not know it: a newer agentd's), and it is not a dry run.
 */
export function mayChange(method: string, params: Record<string, unknown>): boolean {
  const known = Object.hasOwn(MUTATING, method);
  return (!known || MUTATING[method as keyof typeof MUTATING]) && params.dryRun !== true;
}

/** The error for `err` when it is the lost answer of `change`; null when it is another failure. */
export function lostAnswerError(ctx: CliContext, change: Change, err: unknown): CliError | null {
  const { request, effect, check } = change;
  if (err instanceof BadAnswerError) {
    const socket = ctx.options.socket;
    return new CliError(
      EXIT.FAILED,
      `cannot read the answer to ${request} on ${socket}: ${err.message}; ${effect} all the same: ${check}; agentd's log may say more (journalctl -u agentd)`,
      { code: 'BAD_ANSWER', socket, mayHaveStarted: true },
    );
  }
  // A connection that failed before the request went out (or a timeout before it did): nothing
  // was sent.
  if (!(err instanceof DaemonUnreachableError) || !err.requestSent) return null;
  const dialled = err.socketPath || ctx.options.socket;
  if (err.reason === 'timeout') {
    // The limit that passed: --timeout, its default, or a longer one for a call that waits.
    const ms = err.timeoutMs ?? ctx.options.timeoutMs;
    const limit = ms === undefined ? '' : ` (${formatDuration(ms)})`;
    return new CliError(
      EXIT.TIMEOUT,
      `agentd on ${dialled} did not answer ${request} within --timeout${limit}; ${effect} all the same: ${check}`,
      { code: 'TIMEOUT', socket: dialled, reason: err.reason, mayHaveStarted: true },
    );
  }
  // A reset connection names its error; a plain close says no more than the message does.
  const detail = err.message === CLOSED_WITHOUT_ANSWER ? '' : ` (${err.message})`;
  return new CliError(
    EXIT.UNREACHABLE,
    `agentd on ${dialled} closed the connection without answering ${request}${detail}; ${effect} all the same: once agentd answers again, ${check}`,
    { code: 'UNREACHABLE', socket: dialled, reason: err.reason, mayHaveStarted: true },
  );
}

/** Wait for the answer of `change`; a lost one fails with lostAnswerError. */
export async function answerOf<T>(ctx: CliContext, change: Change, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    throw lostAnswerError(ctx, change, err) ?? err;
  }
}
