import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ask, confirmOrRefuse } from '../../../src/cli/confirm.js';
import { createCliContext } from '../../../src/cli/context.js';
import { createOutput } from '../../../src/cli/output.js';
import { createFakeClock } from '../host/fake-clock.js';

function ctx(stdin: PassThrough & { isTTY?: boolean }) {
  const sink = new PassThrough() as unknown as NodeJS.WriteStream;
  const out = createOutput({ json: false, colorFlag: false, env: {}, stdout: sink, stderr: sink });
  return createCliContext({ socket: '/x', json: false, timeoutMs: undefined, color: false }, out, {}, '/', {
    stdin,
    clock: createFakeClock(),
    onInterrupt: () => () => undefined,
  });
}

describe('ask', () => {
  it.each([
    ['y\n', true],
    ['YES\n', true],
    ['n\n', false],
    ['\n', false],
    ['maybe\n', false],
  ])('%j → %s', async (answer, expected) => {
    const stdin = new PassThrough();
    const stderr = new PassThrough();
    let prompt = '';
    stderr.on('data', (c: Buffer) => (prompt += c.toString()));
    const result = ask(stdin, stderr, 'Remove it?');
    stdin.end(answer);
    expect(await result).toBe(expected);
    expect(prompt).toContain('Remove it? [y/N] ');
  });

  it('end of input is no', async () => {
    const stdin = new PassThrough();
    const result = ask(stdin, new PassThrough(), 'Remove it?');
    stdin.end();
    expect(await result).toBe(false);
  });
});

describe('confirmOrRefuse', () => {
  const o = { command: 'reset', question: 'Sure?', stderr: new PassThrough() };

  it('--yes goes ahead without asking', async () => {
    await expect(confirmOrRefuse(ctx(new PassThrough()), { ...o, yes: true })).resolves.toBeUndefined();
  });

  it('no terminal and no --yes: exit 2 naming --yes', async () => {
    await expect(confirmOrRefuse(ctx(new PassThrough()), { ...o, yes: false })).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringContaining('pass --yes'),
      details: { code: 'CONFIRMATION_REQUIRED' },
    });
  });

  it('on a terminal: asks; "no" is exit 1 with nothing changed', async () => {
    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    const refused = confirmOrRefuse(ctx(stdin), { ...o, yes: false });
    stdin.end('n\n');
    await expect(refused).rejects.toMatchObject({ exitCode: 1, details: { code: 'NOT_CONFIRMED' } });

    const stdin2 = Object.assign(new PassThrough(), { isTTY: true });
    const accepted = confirmOrRefuse(ctx(stdin2), { ...o, yes: false });
    stdin2.end('y\n');
    await expect(accepted).resolves.toBeUndefined();
  });
});
