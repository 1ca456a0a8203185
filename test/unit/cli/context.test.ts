import { describe, expect, it } from 'vitest';
import { toCliError } from '../../../src/cli/context.js';
import { CliError, EXIT } from '../../../src/cli/exit-codes.js';
import { RpcError } from '../../../src/rpc/client.js';
import { DaemonUnreachableError } from '../../../src/rpc/http-transport.js';

function rpcError(code: string, rpc = 1000): RpcError {
  return new RpcError({ code: rpc, message: `failed with ${code}`, data: { code, extra: 1 } });
}

describe('toCliError', () => {
  it.each([
    ['BUSY', EXIT.BUSY],
    ['TIMEOUT', EXIT.TIMEOUT],
    ['METHOD_NOT_FOUND', EXIT.USAGE],
    ['INVALID_PARAMS', EXIT.USAGE],
    ['INVALID_REQUEST', EXIT.USAGE],
    ['PARSE_ERROR', EXIT.USAGE],
    ['INVALID_CONFIG', EXIT.USAGE],
    ['NOT_FOUND', EXIT.FAILED],
    ['DRAINING', EXIT.FAILED],
    ['INTERNAL', EXIT.FAILED],
    ['COMMAND_FAILED', EXIT.FAILED],
  ])('RPC error %s exits %d and keeps the code and data', (code, exit) => {
    const err = toCliError(rpcError(code), '/s.sock');
    expect(err.exitCode).toBe(exit);
    expect(err.details).toMatchObject({ code, extra: 1 });
    expect(err.message).toContain(`failed with ${code}`);
  });

  it('an RPC error without data.code uses the numeric code', () => {
    const err = toCliError(new RpcError({ code: -32000, message: 'x' }), '/s.sock');
    expect(err.exitCode).toBe(EXIT.FAILED);
    expect(err.details.code).toBe('-32000');
  });

  it.each([
    ['missing', /is agentd running/],
    ['refused', /is agentd running/],
    ['permission', /permission denied.*--socket-group/],
    ['timeout', /raise --timeout/],
  ] as const)('an unreachable daemon (%s) exits 3 naming the socket, with a hint', (reason, hint) => {
    const err = toCliError(
      new DaemonUnreachableError('/dialled.sock', reason, 'connect ENOENT'),
      '/guess.sock',
    );
    expect(err.exitCode).toBe(EXIT.UNREACHABLE);
    expect(err.message).toContain('cannot reach agentd on /dialled.sock');
    expect(err.message).toMatch(hint);
    expect(err.details).toMatchObject({ code: 'UNREACHABLE', socket: '/dialled.sock', reason });
  });

  it('passes a CliError through and makes anything else a failure', () => {
    const mine = new CliError(EXIT.USAGE, 'bad');
    expect(toCliError(mine, '/s')).toBe(mine);
    const other = toCliError(new Error('boom'), '/s');
    expect(other.exitCode).toBe(EXIT.FAILED);
    expect(other.message).toBe('boom');
    expect(toCliError('text', '/s').message).toBe('text');
  });
});
