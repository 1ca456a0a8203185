/**
 * agentctl's HTTP client on node:http (src/rpc/http-transport.ts): against node:http's own server
 * on a unix socket (what agentd's server is built on), and against raw sockets for the answers
 * a well-behaved server never gives.
 */
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  DaemonUnreachableError,
  createHttpTransport,
  requestOverSocket,
  unreachableError,
} from '../../../src/rpc/http-transport.js';
import { makeTempDir } from '../../support/daemon.js';

async function listen(server: net.Server): Promise<string> {
  const socketPath = path.join(await makeTempDir('agentd-http-transport-'), 's.sock');
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) (server as http.Server).closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return socketPath;
}

/** A node:http server answering with `handler`. */
const httpServer = (handler: http.RequestListener): Promise<string> => listen(http.createServer(handler));

/** A raw server that answers every connection with `raw`, then closes it (or not). */
const rawServer = (raw: string, o: { close?: boolean } = {}): Promise<string> =>
  listen(
    net.createServer((socket) => {
      socket.once('data', () => {
        socket.write(raw);
        if (o.close !== false) socket.end();
      });
      socket.on('error', () => undefined);
    }),
  );

describe('requestOverSocket', () => {
  it('sends method, path, headers and body; reads a content-length answer', async () => {
    const seen: Array<{ method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }> =
      [];
    const socketPath = await httpServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(201, { 'content-type': 'application/json', 'x-answer': 'yes' });
        res.end(JSON.stringify({ echo: body, é: 'ü' }));
      });
    });
    const answer = await requestOverSocket({
      socketPath,
      method: 'POST',
      path: '/rpc?x=1',
      body: '{"a":"é"}',
      headers: { 'x-agentd-caller': 'agentctl' },
    });
    expect(answer.status).toBe(201);
    expect(answer.headers['x-answer']).toBe('yes');
    expect(JSON.parse(answer.body)).toEqual({ echo: '{"a":"é"}', é: 'ü' });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/rpc?x=1', body: '{"a":"é"}' });
    expect(seen[0]?.headers).toMatchObject({
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength('{"a":"é"}')),
      'x-agentd-caller': 'agentctl',
      connection: 'close',
    });
  });

  it('reads a chunked answer, and a GET without a body', async () => {
    const socketPath = await httpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(`${req.method} `);
      setTimeout(() => res.end('second chunk'), 10);
    });
    const answer = await requestOverSocket({ socketPath, method: 'GET', path: '/metrics' });
    expect(answer.headers['transfer-encoding']).toBe('chunked');
    expect(answer.body).toBe('GET second chunk');
  });

  it('a 204 has an empty body, and the transport returns null for it', async () => {
    const socketPath = await httpServer((_req, res) => {
      res.writeHead(204);
      res.end();
    });
    expect(await createHttpTransport({ socketPath })({ jsonrpc: '2.0', method: 'x' })).toBeNull();
  });

  it('skips an interim 100 Continue', async () => {
    const socketPath = await rawServer(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
    );
    expect(await requestOverSocket({ socketPath, method: 'GET', path: '/' })).toEqual({
      status: 200,
      headers: { 'content-length': '2' },
      body: 'ok',
    });
  });

  it.each([
    ['a cut body', 'HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc', /was cut: 3 of 10 bytes of body/],
    ['cut headers', 'HTTP/1.1 200 OK\r\ncontent-le', /ends inside its headers/],
    ['not HTTP', 'SSH-2.0-OpenSSH\r\n\r\n', /could not be parsed \(Parse Error: Expected HTTP\//],
    [
      'a cut chunk',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nabc',
      /was cut after 3 bytes of body/,
    ],
    [
      'a bad chunk size',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      /could not be parsed \(Parse Error: Invalid character in chunk size\)/,
    ],
    [
      'a bad content-length',
      'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n',
      /could not be parsed \(Parse Error: Invalid character in Content-Length\)/,
    ],
  ])('fails on %s with an error that says what was wrong', async (_what, raw, message) => {
    const socketPath = await rawServer(raw);
    await expect(requestOverSocket({ socketPath, method: 'GET', path: '/' })).rejects.toThrow(message);
  });

  it('a daemon that closes without answering: unreachable, as a refused connection is, but the request went out', async () => {
    const socketPath = await rawServer('');
    const err = await requestOverSocket({ socketPath, method: 'GET', path: '/' }).catch((e) => e);
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({
      reason: 'closed',
      message: 'the daemon closed the connection without answering',
      // The daemon read it (rawServer closes once the request arrived): it may have acted on it.
      requestSent: true,
    });
  });

  it('a daemon that never answers: a timeout error, when a timeout is given', async () => {
    const socketPath = await rawServer('', { close: false });
    const err = await requestOverSocket({ socketPath, method: 'GET', path: '/', timeoutMs: 100 }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({ reason: 'timeout', message: 'no answer within 100 ms', requestSent: true });
  });

  it('no socket: an unreachable error that says so; nothing was sent', async () => {
    const socketPath = path.join(await makeTempDir('agentd-http-transport-'), 'none.sock');
    const err = await requestOverSocket({ socketPath, method: 'GET', path: '/' }).catch((e) => e);
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({ reason: 'missing', socketPath, requestSent: false });
  });

  it('a connection that breaks after the request went out: closed on the request, naming the error', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(unreachableError('/s.sock', reset, true)).toMatchObject({
      reason: 'closed',
      message: 'read ECONNRESET',
      requestSent: true,
    });
    // The same error before anything was sent: nothing more is known.
    expect(unreachableError('/s.sock', reset)).toMatchObject({ reason: 'other', requestSent: false });
  });

  it('a path that is no socket: the connection fails before anything is sent', async () => {
    const dir = await makeTempDir('agentd-http-transport-');
    const err = await requestOverSocket({ socketPath: dir, method: 'GET', path: '/' }).catch((e) => e);
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({ socketPath: dir, requestSent: false });
    expect(err.reason).not.toBe('closed');
  });
});
