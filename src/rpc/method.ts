/**
 * A JSON-RPC method is declared once, in its own file under `methods/`: name, docs, params and
 * result schemas, the errors it may raise, and its handler. The dispatcher, the OpenRPC
 * document, the typed client and the CLI all read the same descriptor.
 */
import type { z } from 'zod';
import type { ErrorCode } from '../errors.js';
import type { RpcServices } from './services.js';

export interface CallContext {
  /** Who called: `agentctl`, `watcher`, `http` (curl and other clients). */
  caller: string;
  services: RpcServices;
}

export interface MethodDescriptor<P extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  name: string;
  summary: string;
  description: string;
  /** Mutating methods are refused while the daemon drains or is not ready yet. */
  mutating: boolean;
  /** Application errors this method may return (for the OpenRPC document). */
  errors: readonly ErrorCode[];
  params: P;
  result: R;
  handler: (params: z.output<P>, ctx: CallContext) => Promise<z.input<R>>;
  /**
   * For read methods polled often: a key that changes whenever the result would. While it is
   * unchanged (and the call has no params), the serialized result is reused.
   */
  cacheKey?: (services: RpcServices) => string;
}

/** Identity helper that keeps the descriptor's schema types. */
export function defineMethod<P extends z.ZodType, R extends z.ZodType>(
  descriptor: MethodDescriptor<P, R>,
): MethodDescriptor<P, R> {
  return descriptor;
}

/**
 * `a|b|c` for a cache key, rebuilt only when a part changed. The parts of a polled key are
 * mostly the very same strings call after call, so the common case is three identity checks
 * and the same key object back (which the dispatcher's comparison then settles by identity).
 */
export function keyJoiner(): (a: string, b: string, c: string) => string {
  let last: [string, string, string] | null = null;
  let key = '';
  return (a, b, c) => {
    if (last === null || a !== last[0] || b !== last[1] || c !== last[2]) {
      last = [a, b, c];
      key = `${a}|${b}|${c}`;
    }
    return key;
  };
}
