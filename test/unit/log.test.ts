/** Log lines bind each key once: childLogger, nested tasks, the machine manager under the host. */
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { runTask, serial, task } from '../../src/tasks/tasks.js';
import { createMachineManager } from '../../src/host/machines.js';
import { createHostPaths } from '../../src/host/paths.js';
import { childLogger, createLogger, prettyColors } from '../../src/log.js';
import { linesWithDuplicateKeys, topLevelKeys } from '../support/log-lines.js';

async function capture(): Promise<{ logger: Logger; text: () => string }> {
  let text = '';
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  return { logger: await createLogger({ level: 'debug', format: 'json', destination }), text: () => text };
}

describe('topLevelKeys (the checker the tests below rely on)', () => {
  it('finds a repeated key, and only top-level ones', () => {
    expect(topLevelKeys('{"a":1,"b":{"a":2,"c":[{"a":3}]},"a":"x,\\"a\\":"}')).toEqual(['a', 'b', 'a']);
    expect(linesWithDuplicateKeys('{"a":1,"a":2}\n{"a":1}\nnot json')).toEqual([
      { line: '{"a":1,"a":2}', keys: ['a'] },
    ]);
  });
});

describe('childLogger', () => {
  it('does not bind a key the parent binds', async () => {
    const { logger, text } = await capture();
    childLogger(childLogger(logger, { component: 'kube' }), { component: 'watcher', machine: 'm' }).info('x');
    expect(linesWithDuplicateKeys(text())).toEqual([]);
    expect(JSON.parse(text())).toMatchObject({ component: 'kube', machine: 'm' });
  });
});

describe('log lines bind each key once', () => {
  it('nested tasks log their path under one task key', async () => {
    const { logger, text } = await capture();
    await runTask(
      serial('provision', [serial('install', [task('install artifacts', async () => undefined)])]),
      { signal: new AbortController().signal, logger, progress: () => undefined },
    );
    expect(linesWithDuplicateKeys(text())).toEqual([]);
    const tasks = text()
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { task: string }).task);
    expect(tasks).toContain('provision/install/install artifacts');
  });

  it('the machine manager under the host logger: component once, the part as subsystem', async () => {
    const { logger, text } = await capture();
    const machines = createMachineManager({
      runner: { run: () => Promise.reject(new Error('no host here')) },
      paths: createHostPaths('/nonexistent-root'),
      logger: logger.child({ component: 'host' }),
    });
    await machines.inspect('kube1');
    expect(text()).not.toBe('');
    expect(linesWithDuplicateKeys(text())).toEqual([]);
    expect(JSON.parse(text().split('\n')[0]!)).toMatchObject({ component: 'host', subsystem: 'machines' });
  });
});

describe('pretty log colors', () => {
  it('on a terminal only, and never with NO_COLOR set to a non-empty value', () => {
    expect(prettyColors({}, true)).toBe(true);
    expect(prettyColors({}, false)).toBe(false);
    expect(prettyColors({ NO_COLOR: '1' }, true)).toBe(false);
    expect(prettyColors({ NO_COLOR: '' }, true)).toBe(true);
  });
});

describe('every line passes the one redactor', () => {
  it('secret fields at any depth, URL userinfo and echoed credentials in strings and in the message', async () => {
    const { logger, text } = await capture();
    logger.info(
      {
        params: { config: { Kubelet: { Auth: { BootstrapToken: 'abcdef.S3cret0123456789' } } } },
        deep: { a: { b: { c: { caKey: 'S3cretKey' } } } },
        req: { headers: { authorization: 'Bearer S3cretHeader' } },
        exec: {
          command: '/bin/cred',
          args: ['--key', 'S3cretArg'],
          env: [{ name: 'K', value: 'S3cretEnv' }],
        },
        url: 'http://user:S3cretPass@mirror.corp/kubelet',
        err: new Error('GET http://u:S3cretErr@h/ failed'),
      },
      'registry said: Authorization: Bearer S3cretMessageToken',
    );
    const line = text();
    expect(line).not.toContain('S3cret');
    const parsed = JSON.parse(line) as { url: string; exec: { command: string }; msg: string };
    expect(parsed.url).toBe('http://***@mirror.corp/kubelet');
    expect(parsed.exec.command).toBe('/bin/cred');
    expect(parsed.msg).toBe('registry said: Authorization: Bearer [REDACTED]');
  });
});
