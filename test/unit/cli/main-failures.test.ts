/**
 * agentctl telling the truth when something is wrong (run in-process, against fake daemons on
 * temporary unix sockets): every `--json` failure carries `error.code`; durations a timer cannot
 * wait, bad socket paths, a request larger than the daemon takes and help with `--json` are
 * refused up front; an answer that is not JSON-RPC, or not the metrics, is named as such.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../../src/cli/main.js';
import { systemClock } from '../../../src/host/clock.js';
import { RPC_BODY_LIMIT } from '../../../src/rpc/limits.js';
import { VERSION } from '../../../src/version.js';
import { recordingStream } from '../../support/cli.js';

let dir: string;
const closers: (() => Promise<void>)[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-fail-'));
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  await rm(dir, { recursive: true, force: true });
});

async function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const stdout = recordingStream();
  const stderr = recordingStream();
  const proc = { stdin: new PassThrough(), clock: systemClock, onInterrupt: () => () => undefined };
  const code = await runCli(['node', 'agentctl', ...args], { env, cwd: dir, stdout, stderr, proc });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

type JsonError = { error: Record<string, unknown> & { code: string; message: string; exitCode: number } };
const jsonError = (stdout: string): JsonError['error'] => (JSON.parse(stdout) as JsonError).error;

/** A fake daemon answering every request with `answer`; records the requests it saw. */
async function fakeDaemon(
  answer: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void,
): Promise<{ socket: string; seen: { url: string; body: string }[] }> {
  const socket = path.join(dir, 'fake.sock');
  const seen: { url: string; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', body });
      answer(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { socket, seen };
}

describe('durations longer than a timer can wait are refused, naming the flag and the maximum', () => {
  it.each([
    [['--timeout', '700h', 'status'], '--timeout'],
    [['status', '--timeout', '597h'], '--timeout'],
    [['stop', '--grace', '1000h', '--pid-file', '<dir>/agentd.pid'], '--grace'],
    [['ops', 'wait', 'op-1', '--timeout', '2147484s'], '--timeout'],
    [['drain', '--timeout', '99999h'], '--timeout'],
    [
      [
        'uninstall',
        '--grace',
        '800h',
        '--yes',
        '--host',
        'sim',
        '--root',
        '<dir>/root',
        '--pid-file',
        '<dir>/agentd.pid',
      ],
      '--grace',
    ],
  ])('%j', async (args, flag) => {
    // Paths in the test's own directory: were the flag taken, nothing of the host is touched.
    const own = args.map((a) => a.replace('<dir>', dir));
    const r = await cli(['--socket', path.join(dir, 'none.sock'), '--json', ...own]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${flag}: `);
    expect(r.stderr).toContain('is too long: at most 596h (2147483647 ms)');
    expect(jsonError(r.stdout)).toMatchObject({ code: 'USAGE', exitCode: 2, option: flag });
  });

  it('the longest one is taken (the daemon is then looked for: exit 3)', async () => {
    const r = await cli(['--socket', path.join(dir, 'none.sock'), '--timeout', '596h', 'status']);
    expect(r.code).toBe(3);
  });
});

describe('every --json failure has error.code', () => {
  it.each([
    [['--timeout', 'soon', 'status'], 'USAGE'],
    [['ops', 'list', '--limit', '0'], 'USAGE'],
    [['rpc', 'status', '{not json'], 'USAGE'],
    [['rpc', 'status', '[1]'], 'USAGE'],
    [['update', '--config', 'x.yaml', '--image', 'r/i:1'], 'USAGE'],
    [['status'], 'UNREACHABLE'],
  ])('%j: %s', async (args, code) => {
    const r = await cli(['--socket', path.join(dir, 'none.sock'), '--json', ...args]);
    expect(jsonError(r.stdout).code).toBe(code);
  });

  it.each([
    ['a body that is not JSON', 'hello', /not JSON/],
    ['JSON that is no JSON-RPC response', '{"jsonrpc":"2.0","id":1}', /neither a result nor an error/],
    ['a malformed error', '{"jsonrpc":"2.0","id":1,"error":"boom"}', /malformed JSON-RPC error/],
    ['an array', '[]', /no JSON-RPC response/],
  ])('an answer that is not JSON-RPC (%s): BAD_ANSWER, exit 1', async (_name, body, message) => {
    const d = await fakeDaemon((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const r = await cli(['--socket', d.socket, '--json', 'status']);
    expect(r.code).toBe(1);
    expect(jsonError(r.stdout)).toMatchObject({ code: 'BAD_ANSWER', exitCode: 1, socket: d.socket });
    expect(jsonError(r.stdout).message).toMatch(message);
  });

  it.each([
    [404, 'text/plain', 'not found', 1, 'BAD_ANSWER'],
    [503, 'application/json', '{"error":"Service Unavailable","statusCode":503}', 6, 'DRAINING'],
    [
      500,
      'application/json',
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error","data":{"code":"INTERNAL"}}}',
      1,
      'INTERNAL',
    ],
  ])('metrics answered HTTP %d: a code (%s)', async (status, type, body, exitCode, code) => {
    const d = await fakeDaemon((_req, _body, res) => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    });
    const r = await cli(['--socket', d.socket, '--json', 'metrics']);
    expect(r.code).toBe(exitCode);
    expect(jsonError(r.stdout)).toMatchObject({ code, exitCode, status });
    expect(r.stderr).toContain(`GET /metrics on ${d.socket} answered HTTP ${status}`);
  });
});

describe('a daemon that accepts calls but never answers', () => {
  it('stop and version go on after the status check gives up (5 s)', { timeout: 30_000 }, async () => {
    const d = await fakeDaemon(() => undefined);
    const [stop, version] = await Promise.all([
      cli(['--socket', d.socket, '--json', 'stop', '--pid-file', path.join(dir, 'none.pid')]),
      cli(['--socket', d.socket, '--json', 'version']),
    ]);
    expect(stop.code).toBe(0);
    expect(JSON.parse(stop.stdout)).toMatchObject({ pidFilePresent: false, signalled: false });
    expect(version.code).toBe(5);
    expect(JSON.parse(version.stdout)).toMatchObject({
      client: { version: expect.any(String) },
      error: { code: 'TIMEOUT', exitCode: 5 },
      daemon: null,
      daemonError: expect.stringContaining('did not answer in time: no answer within 5000 ms'),
    });
    expect(d.seen.map((s) => s.url)).toEqual(['/rpc', '/rpc']);
  });
});

describe('a request larger than the daemon accepts', () => {
  it('is refused before it is sent: PAYLOAD_TOO_LARGE, exit 2', async () => {
    const d = await fakeDaemon((_req, _body, res) => res.end());
    const params = JSON.stringify({ id: 'x'.repeat(RPC_BODY_LIMIT) });
    const r = await cli(['--socket', d.socket, '--json', 'rpc', 'operations.get', params]);
    expect(r.code).toBe(2);
    expect(jsonError(r.stdout)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limit: RPC_BODY_LIMIT });
    expect(r.stderr).toContain(`more than the ${RPC_BODY_LIMIT} bytes agentd accepts`);
    expect(d.seen).toEqual([]);
  });

  it('counts bytes, not characters; a request within the limit is sent', async () => {
    const d = await fakeDaemon((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    });
    // 400 Ki three-byte characters: fewer characters than the limit, more bytes.
    const big = await cli([
      '--socket',
      d.socket,
      'rpc',
      'x.y',
      JSON.stringify({ s: '€'.repeat(400 * 1024) }),
    ]);
    expect(big.code).toBe(2);
    expect(d.seen).toEqual([]);
    const small = await cli(['--socket', d.socket, 'rpc', 'x.y', JSON.stringify({ s: 'x'.repeat(1000) })]);
    expect(small.code).toBe(0);
    expect(d.seen).toHaveLength(1);
  });
});

describe('socket paths', () => {
  it('--socket "" is a usage error', async () => {
    const r = await cli(['--socket', '', '--json', 'status']);
    expect(r.code).toBe(2);
    expect(jsonError(r.stdout)).toMatchObject({ code: 'USAGE', option: '--socket' });
    expect(r.stderr).toContain('--socket "" is empty');
  });

  it('a path longer than 107 bytes is refused naming the limit, from --socket or AGENTD_SOCKET', async () => {
    const long = path.join(dir, 'x'.repeat(120));
    const r = await cli(['--socket', long, 'status']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is \d+ bytes long, and a unix socket path has at most 107/);
    const e = await cli(['--json', 'status'], { AGENTD_SOCKET: long });
    expect(e.code).toBe(2);
    expect(jsonError(e.stdout)).toMatchObject({ code: 'USAGE', env: 'AGENTD_SOCKET' });
    expect(e.stderr).toContain(`AGENTD_SOCKET (${long}) is`);
  });

  it.each([
    ['a regular file', async (p: string) => writeFile(p, 'x')],
    ['a directory', async (p: string) => void (await mkdir(p))],
  ])('a path that is %s says "not a socket" (exit 3)', async (what, make) => {
    const p = path.join(dir, 'agentd.sock');
    await make(p);
    const r = await cli(['--socket', p, '--json', 'status']);
    expect(r.code).toBe(3);
    expect(jsonError(r.stdout)).toMatchObject({ code: 'UNREACHABLE', reason: 'not-socket', socket: p });
    expect(r.stderr).toContain(`cannot reach agentd on ${p}: it is ${what}, not a socket`);
    expect(r.stderr).not.toMatch(/ECONNREFUSED|ENOTSOCK/);
  });
});

describe('--version and help with --json', () => {
  it('--version --json prints {"version": ...}', async () => {
    for (const args of [
      ['--version', '--json'],
      ['--json', '-V'],
    ]) {
      const r = await cli(args);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ version: VERSION });
    }
  });

  it.each([
    [['help', '--json']],
    [['--json', 'help']],
    [['help', 'status', '--json']],
    [['status', '--help', '--json']],
    [['--json', '-h']],
  ])('%j is refused: one JSON error on stdout, exit 2', async (args) => {
    const r = await cli(args);
    expect(r.code).toBe(2);
    expect(jsonError(r.stdout)).toMatchObject({ code: 'USAGE', exitCode: 2 });
    expect(r.stderr).toBe(
      'agentctl: --json: help is text only: run it without --json (the reference is docs/cli.md)\n',
    );
  });

  it('without --json, help and --version stay text', async () => {
    expect((await cli(['--version'])).stdout).toBe(`${VERSION}\n`);
    expect((await cli(['help'])).stdout).toContain('Usage: agentctl');
  });
});
