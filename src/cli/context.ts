/**
 * What every agentctl command gets: the resolved global options, the output, and a lazily
 * created RPC client. Turns transport and RPC failures into exit codes and helpful messages.
 */
import { createRpcClient, RpcError, type RpcClient } from '../rpc/client.js';
import { createHttpTransport, DaemonUnreachableError } from '../rpc/http-transport.js';
import { CliError, EXIT } from './exit-codes.js';
import type { Output } from './output.js';

export interface GlobalOptions {
  socket: string;
  json: boolean;
  timeoutMs: number | undefined;
  color: boolean;
}

export interface CliContext {
  options: GlobalOptions;
  out: Output;
  env: NodeJS.ProcessEnv;
  cwd: string;
  client(): RpcClient;
}

/** Translate a failure of an RPC call into a CliError with the right exit code. */
export function toCliError(err: unknown, socket: string): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof DaemonUnreachableError) {
    const hint =
      err.reason === 'permission'
        ? `permission denied: add your user to the socket's group (agentd --socket-group) or run as root`
        : err.reason === 'timeout'
          ? `the daemon did not answer in time (raise --timeout)`
          : `is agentd running? start it (systemctl start agentd, or npm start for --sim) or pass --socket`;
    // The transport knows the socket it dialled; the caller's guess may miss `--socket=PATH`.
    const dialled = err.socketPath || socket;
    return new CliError(EXIT.UNREACHABLE, `cannot reach agentd on ${dialled}: ${err.message}; ${hint}`, {
      code: 'UNREACHABLE',
      socket: dialled,
      reason: err.reason,
    });
  }
  if (err instanceof RpcError) {
    const data = { code: err.appCode, ...err.data };
    switch (err.appCode) {
      case 'BUSY':
        return new CliError(EXIT.BUSY, err.message, data);
      case 'TIMEOUT':
        return new CliError(EXIT.TIMEOUT, err.message, data);
      case 'METHOD_NOT_FOUND':
        return new CliError(
          EXIT.USAGE,
          `${err.message}; the daemon may be older than this agentctl (compare: agentctl version)`,
          data,
        );
      case 'INVALID_PARAMS':
      case 'INVALID_REQUEST':
      case 'PARSE_ERROR':
      case 'INVALID_CONFIG':
        return new CliError(EXIT.USAGE, err.message, data);
      default:
        return new CliError(EXIT.FAILED, err.message, data);
    }
  }
  return new CliError(EXIT.FAILED, err instanceof Error ? err.message : String(err));
}

export function createCliContext(
  options: GlobalOptions,
  out: Output,
  env: NodeJS.ProcessEnv,
  cwd: string,
): CliContext {
  let client: RpcClient | null = null;
  return {
    options,
    out,
    env,
    cwd,
    client() {
      client ??= createRpcClient(
        createHttpTransport({ socketPath: options.socket, timeoutMs: options.timeoutMs }),
      );
      return client;
    },
  };
}
