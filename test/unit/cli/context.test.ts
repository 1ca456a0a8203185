import { describe, expect, it } from 'vitest';
import { toCliError, unsupportedMethodError } from '../../../src/cli/context.js';
import { CliError, EXIT } from '../../../src/cli/exit-codes.js';
import { RpcError, type RpcClient } from '../../../src/rpc/client.js';
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
    ['DRAINING', EXIT.RETRY],
    ['UNAVAILABLE', EXIT.RETRY],
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

  it('a daemon that does not answer within --timeout exits 5 (timed out), as docs/cli.md says', () => {
    const err = toCliError(
      new DaemonUnreachableError('/dialled.sock', 'timeout', 'no answer within 10 ms'),
      '/g',
    );
    expect(err.exitCode).toBe(EXIT.TIMEOUT);
    expect(err.message).toMatch(/did not answer in time.*raise --timeout/);
    expect(err.details).toMatchObject({ code: 'TIMEOUT', socket: '/dialled.sock' });
  });

  it('UNAVAILABLE (recovering) says to try again', () => {
    expect(toCliError(rpcError('UNAVAILABLE'), '/s.sock').message).toMatch(/try again/);
  });

  it('passes a CliError through and makes anything else an INTERNAL failure', () => {
    const mine = new CliError(EXIT.USAGE, 'bad', { code: 'USAGE' });
    expect(toCliError(mine, '/s')).toBe(mine);
    const other = toCliError(new Error('boom'), '/s');
    expect(other.exitCode).toBe(EXIT.FAILED);
    expect(other.message).toBe('boom');
    expect(other.details).toEqual({ code: 'INTERNAL' });
    expect(toCliError('text', '/s')).toMatchObject({ message: 'text', details: { code: 'INTERNAL' } });
  });
});

describe('invalid params', () => {
  it('lists every issue, not only the first', () => {
    const err = toCliError(
      new RpcError({
        code: -32602,
        message: 'update: invalid params: set.image: too short',
        data: {
          code: 'INVALID_PARAMS',
          issues: [
            { path: 'set.image', message: 'too short' },
            { path: 'set.kubernetesVersion', message: 'not a version' },
            { path: '', message: 'unknown key' },
          ],
        },
      }),
      '/s',
    );
    expect(err.exitCode).toBe(EXIT.USAGE);
    expect(err.message).toBe(
      'update: invalid params: set.image: too short; also set.kubernetesVersion: not a version; (params): unknown key',
    );
  });
});

describe('unsupportedMethodError', () => {
  const client = (status: unknown): RpcClient => ({
    call: async () => {
      throw new Error('unused');
    },
    callRaw: async () => {
      if (status instanceof Error) throw status;
      return status;
    },
  });

  it('names the method and both versions (exit 2)', async () => {
    const err = await unsupportedMethodError(client({ daemon: { version: '0.0.1' } }), 'drain');
    expect(err.exitCode).toBe(EXIT.USAGE);
    expect(err.message).toMatch(
      /^agentd 0\.0\.1 does not support the method "drain" that this command needs \(agentctl \d/,
    );
    expect(err.message).toContain('upgrade agentd');
    expect(err.details).toMatchObject({ code: 'METHOD_NOT_FOUND', method: 'drain', daemonVersion: '0.0.1' });
  });

  it('still clear when even status fails', async () => {
    const err = await unsupportedMethodError(client(new Error('gone')), 'drain');
    expect(err.message).toMatch(/^this agentd does not support the method "drain"/);
    expect(err.details.daemonVersion).toBeNull();
  });
});
