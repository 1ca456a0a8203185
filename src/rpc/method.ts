/**
 * A JSON-RPC method is declared once, in its own file under `methods/`: name, docs, params and
 * result schemas, the errors it may raise, and its handler. The dispatcher, the OpenRPC
 * document, the typed client and the CLI all read the same descriptor.
 */
import type * as z from 'zod';
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
   * For a read polled often (`status`): a version that changes whenever the result would. The
   * dispatcher serializes the result once per version and answers the same JSON while it holds.
   * Every input of the result must move it: a test changes each one alone.
   */
  version?: (services: RpcServices) => number;
}

/** Identity helper that keeps the descriptor's schema types. */
export function defineMethod<P extends z.ZodType, R extends z.ZodType>(
  descriptor: MethodDescriptor<P, R>,
): MethodDescriptor<P, R> {
  return descriptor;
}
