/**
 * What every agentctl command gets: the resolved global options, the output, and a lazily
 * created RPC client. Turns transport and RPC failures into exit codes and helpful messages.
 */
import { statSync } from 'node:fs';
import { systemClock } from '../host/clock.js';
import type { Clock } from '../host/types.js';
import type { MethodName, MethodTypes } from '../rpc/methods/index.js';
import { BadAnswerError, createRpcClient, RpcError, type RpcClient } from '../rpc/client.js';
import { createHttpTransport, DaemonUnreachableError, RequestTooLargeError } from '../rpc/http-transport.js';
import { VERSION } from '../version.js';
import { CliError, EXIT } from './exit-codes.js';
import type { Output } from './output.js';

/**
 * How long one call to the daemon may take when --timeout is not given (docs/cli.md): far more
 * than any call needs (preflight, the slowest, gives up after 60 s), and agentctl still never
 * waits forever on a daemon that accepts connections but does not answer.
 */
export const DEFAULT_CALL_TIMEOUT_MS = 90_000;

/**
 * How long `stop`, `uninstall` and `version` wait for the daemon's status when --timeout is not
 * given: they go on without it, and a wedged daemon is what `stop` is for.
 */
export const STATUS_CHECK_TIMEOUT_MS = 5_000;

export interface GlobalOptions {
  socket: string;
  json: boolean;
  /** --timeout, when given. */
  timeoutMs: number | undefined;
  color: boolean;
}

/** What a command needs of the process besides stdout/stderr (injectable for tests). */
export interface CliProcess {
  /** Where confirmation prompts read the answer. */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  clock: Clock;
  /** Run `handler` on Ctrl-C (SIGINT) instead of exiting; returns the function that removes it. */
  onInterrupt(handler: () => void): () => void;
}

export interface CliContext {
  options: GlobalOptions;
  out: Output;
  env: NodeJS.ProcessEnv;
  cwd: string;
  proc: CliProcess;
  /** How long one call may take: --timeout, or DEFAULT_CALL_TIMEOUT_MS. */
  callTimeoutMs: number;
  /** The RPC client; with `timeoutMs`, one whose calls give up after that long instead. */
  client(timeoutMs?: number): RpcClient;
  /**
   * The daemon's status, waiting at most --timeout or STATUS_CHECK_TIMEOUT_MS: for the commands
   * that go on without it (stop, uninstall, version).
   */
  statusCheck(): Promise<MethodTypes['status']['result']>;
  /**
   * Call a method this command needs. A daemon that does not have it (an older agentd) is
   * reported by name with both versions, not as a bare "method not found".
   */
  call<M extends MethodName>(method: M, params?: MethodTypes[M]['params']): Promise<MethodTypes[M]['result']>;
  /** The same for a method whose types this build does not declare (params and result as given). */
  callUntyped<T>(method: string, params?: Record<string, unknown>): Promise<T>;
}

/** The real process: stdin, the system clock and SIGINT. */
export const defaultCliProcess: CliProcess = {
  // A getter: touching process.stdin sets up a stream, which only a confirmation prompt needs.
  get stdin() {
    return process.stdin;
  },
  clock: systemClock,
  onInterrupt(handler) {
    process.on('SIGINT', handler);
    return () => void process.off('SIGINT', handler);
  },
};

function describeIssues(data: Record<string, unknown>): string {
  const issues = Array.isArray(data.issues) ? (data.issues as { path?: unknown; message?: unknown }[]) : [];
  // The first issue is already in the message; list the rest so one run shows every problem.
  const rest = issues
    .slice(1)
    .map((i) => `${String(i.path ?? '') || '(params)'}: ${String(i.message ?? '')}`);
  return rest.length > 0 ? `; also ${rest.join('; ')}` : '';
}

/** "No such method", also from a daemon that answers only the JSON-RPC code (no `data.code`). */
export function isMethodNotFound(err: unknown): boolean {
  return err instanceof RpcError && (err.appCode === 'METHOD_NOT_FOUND' || err.rpcCode === -32601);
}

/** What is at `file` when it is not a socket ("a regular file"), or null (a socket, or nothing). */
function notASocket(file: string): string | null {
  try {
    // stat, not lstat: a symbolic link to the socket is as good as the socket.
    const st = statSync(file);
    if (st.isSocket()) return null;
    return st.isDirectory() ? 'a directory' : st.isFile() ? 'a regular file' : 'a special file';
  } catch {
    return null;
  }
}

/** Translate a failure of an RPC call into a CliError with the right exit code. */
export function toCliError(err: unknown, socket: string): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof RequestTooLargeError) {
    return new CliError(
      EXIT.USAGE,
      `${err.message} (docs/api.md): nothing was sent; send less (an agent config is a few KiB)`,
      { code: 'PAYLOAD_TOO_LARGE', size: err.size, limit: err.limit },
    );
  }
  if (err instanceof DaemonUnreachableError && err.reason === 'timeout') {
    // The daemon is there but did not answer within --timeout: timed out (exit 5), not unreachable.
    const dialled = err.socketPath || socket;
    return new CliError(
      EXIT.TIMEOUT,
      `agentd on ${dialled} did not answer in time: ${err.message}; raise --timeout`,
      { code: 'TIMEOUT', socket: dialled, reason: err.reason },
    );
  }
  if (err instanceof DaemonUnreachableError && err.reason !== 'missing') {
    // A path that is there but is no socket: the connection is refused, which would wrongly
    // suggest a stopped daemon.
    const dialled = err.socketPath || socket;
    const what = notASocket(dialled);
    if (what !== null) {
      return new CliError(
        EXIT.UNREACHABLE,
        `cannot reach agentd on ${dialled}: it is ${what}, not a socket; pass agentd's socket with --socket (default /run/agentd/agentd.sock)`,
        { code: 'UNREACHABLE', socket: dialled, reason: 'not-socket' },
      );
    }
  }
  if (err instanceof DaemonUnreachableError) {
    const hint =
      err.reason === 'permission'
        ? `permission denied: add your user to the socket's group (agentd --socket-group) or run as root`
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
    const data = { ...err.data, code: err.appCode };
    switch (isMethodNotFound(err) ? 'METHOD_NOT_FOUND' : err.appCode) {
      case 'BUSY':
        return new CliError(EXIT.BUSY, err.message, data);
      case 'TIMEOUT':
        return new CliError(EXIT.TIMEOUT, err.message, data);
      case 'UNAVAILABLE':
      case 'DRAINING':
        return new CliError(EXIT.RETRY, `${err.message}; nothing was done: try again shortly`, data);
      case 'METHOD_NOT_FOUND':
        return new CliError(
          EXIT.USAGE,
          `${err.message}; the daemon may be older than this agentctl (compare: agentctl version)`,
          data,
        );
      case 'INVALID_PARAMS':
        return new CliError(EXIT.USAGE, err.message + describeIssues(err.data), data);
      case 'INVALID_REQUEST':
      case 'PARSE_ERROR':
      case 'INVALID_CONFIG':
        return new CliError(EXIT.USAGE, err.message, data);
      default:
        return new CliError(EXIT.FAILED, err.message, data);
    }
  }
  if (err instanceof BadAnswerError) {
    return new CliError(
      EXIT.FAILED,
      `${err.message} (socket ${socket}): is agentd what listens there? its log may say more (journalctl -u agentd)`,
      { code: 'BAD_ANSWER', socket },
    );
  }
  // Nothing agentctl expected: a bug, or a failure of the system it did not plan for.
  return new CliError(EXIT.FAILED, err instanceof Error ? err.message : String(err), { code: 'INTERNAL' });
}

/** The error for a method the daemon does not have, naming both versions. */
export async function unsupportedMethodError(client: RpcClient, method: string): Promise<CliError> {
  let daemonVersion: string | null = null;
  try {
    const s = (await client.callRaw('status')) as { daemon?: { version?: unknown } };
    daemonVersion = typeof s.daemon?.version === 'string' ? s.daemon.version : null;
  } catch {
    // Only for the message: the daemon answered the call before, so this rarely fails.
  }
  const daemon = daemonVersion ? `agentd ${daemonVersion}` : 'this agentd';
  return new CliError(
    EXIT.USAGE,
    `${daemon} does not support the method "${method}" that this command needs (agentctl ${VERSION}); upgrade agentd, or use the agentctl that came with it`,
    { code: 'METHOD_NOT_FOUND', method, clientVersion: VERSION, daemonVersion },
  );
}

export function createCliContext(
  options: GlobalOptions,
  out: Output,
  env: NodeJS.ProcessEnv,
  cwd: string,
  proc: CliProcess = defaultCliProcess,
): CliContext {
  const callTimeoutMs = options.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const newClient = (timeoutMs: number): RpcClient =>
    createRpcClient(createHttpTransport({ socketPath: options.socket, timeoutMs }));
  let client: RpcClient | null = null;
  const getClient = (timeoutMs?: number): RpcClient =>
    timeoutMs === undefined ? (client ??= newClient(callTimeoutMs)) : newClient(timeoutMs);
  const callUntyped = async <T>(method: string, params?: Record<string, unknown>): Promise<T> => {
    try {
      return (await getClient().callRaw(method, params)) as T;
    } catch (err) {
      if (isMethodNotFound(err)) throw await unsupportedMethodError(getClient(), method);
      throw err;
    }
  };
  return {
    options,
    out,
    env,
    cwd,
    proc,
    callTimeoutMs,
    client: getClient,
    statusCheck: () => getClient(options.timeoutMs ?? STATUS_CHECK_TIMEOUT_MS).call('status'),
    call: <M extends MethodName>(method: M, params?: MethodTypes[M]['params']) =>
      callUntyped<MethodTypes[M]['result']>(method, params as Record<string, unknown> | undefined),
    callUntyped,
  };
}
