/**
 * The one table of JSON-RPC methods. Adding a method: write `methods/<name>.ts`, add it here,
 * run `npm run generate`, document it in docs/api.md.
 */
import type * as z from 'zod';
import type { MethodDescriptor } from '../method.js';
import { configGet } from './config-get.js';
import { drain } from './drain.js';
import { fleetPause, fleetResume, fleetStatus } from './fleet.js';
import { operationsCancel, operationsGet, operationsList, operationsWait } from './operations.js';
import { preflight } from './preflight.js';
import { reset } from './reset.js';
import { rpcDiscover } from './rpc-discover.js';
import { status } from './status.js';
import { uncordon } from './uncordon.js';
import { update } from './update.js';

export const METHODS = {
  status,
  update,
  reset,
  preflight,
  drain,
  uncordon,
  'operations.get': operationsGet,
  'operations.list': operationsList,
  'operations.wait': operationsWait,
  'operations.cancel': operationsCancel,
  'config.get': configGet,
  'fleet.status': fleetStatus,
  'fleet.pause': fleetPause,
  'fleet.resume': fleetResume,
  'rpc.discover': rpcDiscover,
} as const;

export type MethodName = keyof typeof METHODS;

/** Params and result types of every method, for the typed client (types only: no runtime import). */
export type MethodTypes = {
  [K in MethodName]: {
    params: z.input<(typeof METHODS)[K]['params']>;
    result: z.output<(typeof METHODS)[K]['result']>;
  };
};

export const METHOD_LIST: readonly MethodDescriptor[] = Object.values(METHODS) as readonly MethodDescriptor[];
