import { requestOverSocket } from '../../rpc/http-transport.js';
import { CliError, EXIT } from '../exit-codes.js';
import type { CliContext } from '../context.js';

/** `agentctl metrics`: print /metrics (with --json: `{ "text": ... }`). */
export async function runMetrics(ctx: CliContext): Promise<void> {
  const res = await requestOverSocket({
    socketPath: ctx.options.socket,
    method: 'GET',
    path: '/metrics',
    timeoutMs: ctx.options.timeoutMs,
  });
  if (res.status !== 200) throw new CliError(EXIT.FAILED, `GET /metrics answered HTTP ${res.status}`);
  ctx.out.result({ text: res.body }, () => res.body.trimEnd());
}
