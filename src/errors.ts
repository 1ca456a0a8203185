/**
 * Every failure agentd reports has a stable string `code` (what scripts and tests match on)
 * and a numeric JSON-RPC code outside the reserved −32768…−32000 range. This file is the one
 * list of them; `src/rpc/error-map.ts` turns them into wire errors and `docs/errors.md`
 * documents each one (a test keeps the three in step).
 */
import { redactDeep, redactText } from './config/redact.js';

/** Catalogue of application error codes: string code → JSON-RPC numeric code and a summary. */
export const ERROR_CODES = {
  PARSE_ERROR: { rpc: -32700, summary: 'The request body is not valid JSON.' },
  INVALID_REQUEST: {
    rpc: -32600,
    summary:
      'The body is not a JSON-RPC 2.0 request (or batch), its content type is not JSON, the HTTP method is not POST, or a /v1/events query is invalid.',
  },
  METHOD_NOT_FOUND: { rpc: -32601, summary: 'There is no method of that name (see rpc.discover).' },
  INVALID_PARAMS: { rpc: -32602, summary: 'The request parameters do not match the method schema.' },
  INTERNAL: { rpc: -32603, summary: 'An unexpected internal error; the log has the details.' },
  BUSY: { rpc: 1001, summary: 'Another mutating operation holds the node; data.operation names it.' },
  DRAINING: { rpc: 1002, summary: 'The daemon is shutting down and accepts no new mutating calls.' },
  NOT_FOUND: { rpc: 1003, summary: 'The named object (operation, machine, file) does not exist.' },
  PRECONDITION_FAILED: { rpc: 1004, summary: 'The node is not in a state that allows the request.' },
  INVALID_CONFIG: { rpc: 1005, summary: 'A configuration (agent config, daemon config) failed validation.' },
  COMMAND_FAILED: { rpc: 1006, summary: 'A host command exited non-zero or could not be run.' },
  CHECKSUM_MISMATCH: { rpc: 1007, summary: 'A file or download does not match its expected SHA-256.' },
  DOWNLOAD_FAILED: {
    rpc: 1008,
    summary: 'An artifact could not be downloaded (HTTP error, truncated body, network).',
  },
  IMAGE_PULL_FAILED: { rpc: 1009, summary: 'The OCI rootfs image could not be resolved or pulled.' },
  UNSAFE_ARCHIVE: { rpc: 1010, summary: 'An archive entry would escape the target or is not allowed.' },
  UNSUPPORTED: { rpc: 1011, summary: 'The request needs something this host or build does not support.' },
  NO_SPACE: { rpc: 1012, summary: 'The disk ran out of space while writing.' },
  TIMEOUT: { rpc: 1013, summary: 'A step did not finish within its timeout.' },
  CANCELLED: { rpc: 1014, summary: 'The operation or step was cancelled.' },
  VERIFY_FAILED: { rpc: 1015, summary: 'The machine did not become healthy (kubelet not active).' },
  KUBE_UNAVAILABLE: {
    rpc: 1016,
    summary: 'The Kubernetes API server could not be reached or refused the call.',
  },
  KUBE_CONFLICT: { rpc: 1017, summary: 'A Kubernetes write kept conflicting with other writers.' },
  DRAIN_FAILED: { rpc: 1018, summary: 'Pods could not be evicted from the node before the timeout.' },
  RECOVERY_FAILED: {
    rpc: 1019,
    summary: 'Startup recovery could not bring the node to one verified machine.',
  },
  UNAVAILABLE: { rpc: 1020, summary: 'The daemon is not ready (startup recovery has not finished).' },
  PAYLOAD_TOO_LARGE: { rpc: 1021, summary: 'The request body exceeds the size limit.' },
  BATCH_TOO_LARGE: {
    rpc: 1022,
    summary: 'A JSON-RPC batch holds more calls than allowed (data.limit); none of them ran.',
  },
  RESPONSE_TOO_LARGE: {
    rpc: 1023,
    summary: 'The answer to a read would exceed the answer size limit (data.limit, bytes).',
  },
  MACHINE_START_FAILED: {
    rpc: 1030,
    summary: 'A machine or the services in it did not start; data has the failed step and its cause.',
  },
  ROLLBACK_FAILED: {
    rpc: 1031,
    summary: 'A failed switch-over could not bring the old machine back: the node does not serve.',
  },
  STATE_CONFLICT: {
    rpc: 1050,
    summary:
      'The state files (node.json, the journal, the applied configs) disagree with the host or with each other; data.file names the file.',
  },
  INSUFFICIENT_MEMORY: {
    rpc: 1032,
    summary:
      'The host has too little available memory for a second machine in standby; the update switched in the cold order instead (a warning, not a failure).',
  },
  HEALTH_GATE_FAILED: {
    rpc: 1040,
    summary:
      'The health gate after verify failed (Node not Ready, wrong kubelet version or a check); data.failed names each check.',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface AgentErrorOptions {
  data?: Record<string, unknown>;
  cause?: unknown;
}

/** Base of every error agentd raises on purpose. Handlers throw these; the rpc layer maps them. */
export class AgentError extends Error {
  readonly code: ErrorCode;
  readonly data: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: AgentErrorOptions = {}) {
    // Through the one redactor: an error's words and data reach the wire, the operation
    // records and the logs, and may quote a URL with credentials or a server's echoed header.
    super(redactText(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AgentError';
    this.code = code;
    this.data = options.data ? redactDeep(options.data) : {};
  }
}

/** Parameter validation failed; `issues` are zod issues (path, message). */
export class InvalidParamsError extends AgentError {
  constructor(message: string, issues: unknown[], options: AgentErrorOptions = {}) {
    super('INVALID_PARAMS', message, { ...options, data: { ...options.data, issues } });
    this.name = 'InvalidParamsError';
  }
}

export class BusyError extends AgentError {
  constructor(operationId: string, kind: string) {
    super('BUSY', `operation ${operationId} (${kind}) is running; wait for it or cancel it`, {
      data: { operation: operationId, kind },
    });
    this.name = 'BusyError';
  }
}

export class DrainingError extends AgentError {
  constructor() {
    super('DRAINING', 'agentd is shutting down and accepts no new mutating calls');
    this.name = 'DrainingError';
  }
}

export class NotFoundError extends AgentError {
  constructor(what: string, options: AgentErrorOptions = {}) {
    super('NOT_FOUND', `${what} not found`, options);
    this.name = 'NotFoundError';
  }
}

/** A state file disagrees with the host or with another state file (docs/architecture.md, "Trust the host"). */
export class StateConflictError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('STATE_CONFLICT', message, options);
    this.name = 'StateConflictError';
  }
}

export class PreconditionFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('PRECONDITION_FAILED', message, options);
    this.name = 'PreconditionFailedError';
  }
}

export class InvalidConfigError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('INVALID_CONFIG', message, options);
    this.name = 'InvalidConfigError';
  }
}

/** A host command failed; data carries the command line, exit code and the tail of stderr. */
export class CommandFailedError extends AgentError {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderrTail: string,
    options: AgentErrorOptions & { reason?: string } = {},
  ) {
    const why =
      options.reason ?? (exitCode === null ? 'did not exit normally' : `exited with code ${exitCode}`);
    super('COMMAND_FAILED', `${command}: ${why}${stderrTail ? `: ${stderrTail}` : ''}`, {
      ...options,
      data: { ...options.data, command, exitCode, stderr: stderrTail },
    });
    this.name = 'CommandFailedError';
  }
}

export class ChecksumMismatchError extends AgentError {
  constructor(what: string, expected: string, actual: string, options: AgentErrorOptions = {}) {
    super('CHECKSUM_MISMATCH', `${what}: checksum mismatch (want ${expected}, got ${actual})`, {
      ...options,
      data: { ...options.data, expected, actual },
    });
    this.name = 'ChecksumMismatchError';
  }
}

export class DownloadFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('DOWNLOAD_FAILED', message, options);
    this.name = 'DownloadFailedError';
  }
}

export class ImagePullFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('IMAGE_PULL_FAILED', message, options);
    this.name = 'ImagePullFailedError';
  }
}

export class UnsafeArchiveError extends AgentError {
  constructor(entry: string, reason: string, options: AgentErrorOptions = {}) {
    super('UNSAFE_ARCHIVE', `archive entry ${JSON.stringify(entry)}: ${reason}`, {
      ...options,
      data: { ...options.data, entry, reason },
    });
    this.name = 'UnsafeArchiveError';
  }
}

export class UnsupportedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('UNSUPPORTED', message, options);
    this.name = 'UnsupportedError';
  }
}

export class NoSpaceError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('NO_SPACE', message, options);
    this.name = 'NoSpaceError';
  }
}

export class TimeoutError extends AgentError {
  constructor(what: string, timeoutMs: number, options: AgentErrorOptions = {}) {
    super('TIMEOUT', `${what}: timed out after ${timeoutMs} ms`, {
      ...options,
      data: { ...options.data, timeoutMs },
    });
    this.name = 'TimeoutError';
  }
}

export class CancelledError extends AgentError {
  constructor(what: string, options: AgentErrorOptions = {}) {
    super('CANCELLED', `${what}: cancelled`, options);
    this.name = 'CancelledError';
  }
}

/** Starting a machine (or its containerd and kubelet) failed; the cause is the failed step. */
export class MachineStartFailedError extends AgentError {
  constructor(machine: string, cause: unknown) {
    const inner = isAgentError(cause) ? cause : null;
    super('MACHINE_START_FAILED', `start machine ${machine}: ${describeError(cause)}`, {
      cause,
      data: { ...inner?.data, machine, causeCode: inner?.code ?? 'INTERNAL' },
    });
    this.name = 'MachineStartFailedError';
  }
}

/** The rollback of a failed switch-over did not bring the source back. */
export class RollbackFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('ROLLBACK_FAILED', message, options);
    this.name = 'RollbackFailedError';
  }
}

export class VerifyFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('VERIFY_FAILED', message, options);
    this.name = 'VerifyFailedError';
  }
}

/** The health gate after `verify` did not pass: `data.failed` lists each failed check and what it saw. */
export class HealthGateFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('HEALTH_GATE_FAILED', message, options);
    this.name = 'HealthGateFailedError';
  }
}

export class KubeUnavailableError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('KUBE_UNAVAILABLE', message, options);
    this.name = 'KubeUnavailableError';
  }
}

export class KubeConflictError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('KUBE_CONFLICT', message, options);
    this.name = 'KubeConflictError';
  }
}

export class DrainFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('DRAIN_FAILED', message, options);
    this.name = 'DrainFailedError';
  }
}

export class RecoveryFailedError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('RECOVERY_FAILED', message, options);
    this.name = 'RecoveryFailedError';
  }
}

export class UnavailableError extends AgentError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super('UNAVAILABLE', message, options);
    this.name = 'UnavailableError';
  }
}

/** True for errors that carry a stable agentd code. */
export function isAgentError(err: unknown): err is AgentError {
  return err instanceof AgentError;
}

/** Render any thrown value as a message, following `cause` chains one level for context. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** The first string `code` of `err` or of its causes (a few levels deep), e.g. `ENOSPC`. */
export function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && !(e instanceof AgentError)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export interface ForeignErrorOptions {
  /** The signal of the step: once it fired, any failure is CANCELLED. */
  signal?: AbortSignal | undefined;
  /**
   * The error for a failure of no common kind, given the message (`<what>: <the error's
   * message>`) and the foreign error's code; default INTERNAL.
   */
  otherwise?: (message: string, err: unknown, code: string | undefined) => AgentError;
}

/**
 * The one place foreign errors (Node.js, undici, zlib, client libraries) become AgentErrors,
 * saying what was being done: AgentErrors pass through; a fired signal or an AbortError is
 * CANCELLED; ENOSPC or EDQUOT anywhere in the cause chain is NO_SPACE; anything else is what
 * `otherwise` makes of it (INTERNAL by default). The foreign error is kept as `cause`.
 */
export function toAgentError(err: unknown, what: string, options: ForeignErrorOptions = {}): AgentError {
  if (err instanceof CancelledError) return err;
  if (options.signal?.aborted || (err as { name?: unknown } | null)?.name === 'AbortError') {
    return new CancelledError(what, { cause: err });
  }
  if (err instanceof AgentError) return err;
  const code = errorCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new NoSpaceError(`${what}: no space left on device`, { cause: err, data: { errno: code } });
  }
  const message = `${what}: ${describeError(err)}`;
  return options.otherwise
    ? options.otherwise(message, err, code)
    : new AgentError('INTERNAL', message, { cause: err, ...(code ? { data: { errno: code } } : {}) });
}

/**
 * For a step inside a larger one whose caller classifies the rest (a download's network
 * errors, say): ENOSPC/EDQUOT becomes NO_SPACE naming `what` (as `toAgentError` does), anything
 * else is returned unchanged for the caller's `toAgentError`.
 */
export function noSpaceOr(err: unknown, what: string): unknown {
  if (err instanceof AgentError) return err;
  const code = errorCode(err);
  return code === 'ENOSPC' || code === 'EDQUOT' ? toAgentError(err, what) : err;
}
