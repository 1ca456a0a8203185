import * as z from 'zod';
import { defineMethod } from '../method.js';

export const rpcDiscover = defineMethod({
  name: 'rpc.discover',
  summary: 'The OpenRPC document describing every method.',
  description:
    'Generated from the same schemas the daemon validates with; also checked in as openapi/agentd.openrpc.json.',
  mutating: false,
  errors: [],
  params: z.strictObject({}),
  result: z.record(z.string(), z.unknown()).meta({ id: 'OpenRPCDocument' }),
  handler: async (_params, { services }) => services.openrpc(),
});
