import { RpcError, type RpcErrorBody } from '../../rpc/client.js';
import { requestOverSocket } from '../../rpc/http-transport.js';
import { CliError, EXIT } from '../exit-codes.js';
import { toCliError, type CliContext } from '../context.js';

/** `agentctl metrics`: print /metrics (with --json: `{ "text": ... }`). */
export async function runMetrics(ctx: CliContext): Promise<void> {
  const res = await requestOverSocket({
    socketPath: ctx.options.socket,
    method: 'GET',
    path: '/metrics',
    timeoutMs: ctx.callTimeoutMs,
  });
  if (res.status !== 200) throw metricsFailure(res.status, res.body, ctx.options.socket);
  ctx.out.result({ text: res.body }, () => res.body.trimEnd());
}

/**
 * A /metrics answer other than 200, with a code: the daemon's own error when its body carries
 * one (docs/errors.md), DRAINING for the 503 of a daemon that is shutting down, BAD_ANSWER else.
 */
export function metricsFailure(status: number, body: string, socket: string): CliError {
  const answered = `GET /metrics on ${socket} answered HTTP ${status}`;
  let wire: Partial<RpcErrorBody> | undefined;
  try {
    wire = (JSON.parse(body) as { error?: Partial<RpcErrorBody> } | null)?.error;
  } catch {
    wire = undefined;
  }
  if (typeof wire?.data?.code === 'string' && typeof wire.message === 'string') {
    const e = toCliError(
      new RpcError({ code: Number(wire.code), message: wire.message, data: wire.data }),
      socket,
    );
    return new CliError(e.exitCode, `${answered}: ${e.message}`, { ...e.details, status });
  }
  if (status === 503) {
    return new CliError(EXIT.RETRY, `${answered}: agentd is shutting down; try again shortly`, {
      code: 'DRAINING',
      status,
    });
  }
  return new CliError(EXIT.FAILED, `${answered}, not the metrics`, { code: 'BAD_ANSWER', status });
}
