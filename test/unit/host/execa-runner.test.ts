import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AgentError, CommandFailedError } from '../../../src/errors.js';
import { createExecaRunner, tail } from '../../../src/host/execa-runner.js';

async function rejection(p: Promise<unknown>): Promise<AgentError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    return err as AgentError;
  }
  throw new Error('expected the promise to reject');
}

describe('createExecaRunner', () => {
  const runner = createExecaRunner();

  it('returns stdout, stderr, exit code and the command line of a successful command', async () => {
    const res = await runner.run('sh', ['-c', 'echo out; echo err >&2']);
    expect(res.exitCode).toBe(0);
    expect(res.stdout).toBe('out');
    expect(res.stderr).toBe('err');
    expect(res.command).toBe("sh -c 'echo out; echo err >&2'");
    expect(res.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('writes input to stdin', async () => {
    const res = await runner.run('cat', [], { input: 'hello' });
    expect(res.stdout).toBe('hello');
  });

  it('turns a non-zero exit into COMMAND_FAILED with the command, exit code and stderr', async () => {
    const err = await rejection(runner.run('sh', ['-c', 'echo boom >&2; exit 3']));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err).toBeInstanceOf(CommandFailedError);
    expect(err.data).toMatchObject({ command: "sh -c 'echo boom >&2; exit 3'", exitCode: 3, stderr: 'boom' });
  });

  it('keeps only the last ~2 KB of a long stderr', async () => {
    const err = await rejection(
      runner.run('sh', ['-c', 'head -c 10000 /dev/zero | tr "\\0" a >&2; echo END >&2; exit 1']),
    );
    const stderr = err.data.stderr as string;
    expect(stderr.length).toBeLessThanOrEqual(2049);
    expect(stderr.endsWith('END')).toBe(true);
  });

  it('resolves a non-zero exit with reject:false', async () => {
    const res = await runner.run('sh', ['-c', 'echo inactive; exit 3'], { reject: false });
    expect(res).toMatchObject({ exitCode: 3, stdout: 'inactive' });
  });

  it('fails with TIMEOUT when the command outlives its timeout', async () => {
    const err = await rejection(runner.run('sh', ['-c', 'exec sleep 30'], { timeoutMs: 100 }));
    expect(err.code).toBe('TIMEOUT');
    expect(err.data.timeoutMs).toBe(100);
  });

  it('applies the default timeout when the call names none', async () => {
    const quick = createExecaRunner({ defaultTimeoutMs: 100 });
    const err = await rejection(quick.run('sh', ['-c', 'exec sleep 30']));
    expect(err.code).toBe('TIMEOUT');
  });

  it('fails with CANCELLED when the signal aborts a running command', async () => {
    const controller = new AbortController();
    const pending = runner.run('sh', ['-c', 'exec sleep 30'], { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const err = await rejection(pending);
    expect(err.code).toBe('CANCELLED');
  });

  it('fails with CANCELLED when the signal is already aborted', async () => {
    const err = await rejection(runner.run('sh', ['-c', 'exec sleep 30'], { signal: AbortSignal.abort() }));
    expect(err.code).toBe('CANCELLED');
  });

  it('reports a missing binary as COMMAND_FAILED saying it was not found, even with reject:false', async () => {
    const err = await rejection(runner.run('agentd-no-such-binary', ['x'], { reject: false }));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.message).toMatch(/command not found/);
    expect(err.message).toContain('agentd-no-such-binary');
    expect(err.data.exitCode).toBeNull();
  });

  it('reports a command killed by a signal as COMMAND_FAILED', async () => {
    const err = await rejection(runner.run('sh', ['-c', 'kill -9 $$'], { reject: false }));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.message).toMatch(/SIGKILL/);
  });

  it('passes extra environment variables over the process environment', async () => {
    const withEnv = createExecaRunner({ env: { AGENTD_TEST_VALUE: 'v1' } });
    const res = await withEnv.run('sh', ['-c', 'echo "$AGENTD_TEST_VALUE:${PATH:+has-path}"']);
    expect(res.stdout).toBe('v1:has-path');
  });

  it('logs one debug line per command with command, exit code and duration', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const logged = createExecaRunner({ logger: pino({ level: 'debug' }, sink) });
    await logged.run('sh', ['-c', 'echo hi; exit 2'], { reject: false });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 20,
      command: "sh -c 'echo hi; exit 2'",
      exitCode: 2,
      stdout: 'hi',
    });
    expect(typeof lines[0]!.durationMs).toBe('number');
  });
});

describe('tail', () => {
  it('keeps short text and cuts long text from the front', () => {
    expect(tail('abc\n')).toBe('abc');
    expect(tail('abcdef', 3)).toBe('…def');
  });
});
