/**
 * A forward HTTP proxy for tests, on 127.0.0.1: absolute-URI requests (`GET http://host/path`)
 * are forwarded, `CONNECT host:port` is tunnelled, both only to the host names it is given
 * (`hosts`: `name:port` → `127.0.0.1:port`). A URL naming such a host can be reached through
 * this proxy and in no other way (the name does not resolve), so a request that arrives proves
 * the client used the proxy. Every request is recorded; with `auth`, a request without that
 * `Proxy-Authorization: Basic` is answered 407.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface ProxiedRequest {
  method: string;
  /** The absolute URI of a forwarded request, or `host:port` of a CONNECT. */
  target: string;
  proxyAuthorization: string | undefined;
}

export interface TestProxy {
  /** `http://127.0.0.1:<port>` */
  url: string;
  requests: ProxiedRequest[];
  close(): Promise<void>;
}

export async function startTestProxy(o: {
  hosts: Record<string, string>;
  /** `user:password` the proxy demands. */
  auth?: string;
}): Promise<TestProxy> {
  const requests: ProxiedRequest[] = [];
  const sockets = new Set<net.Socket>();
  const expected = o.auth === undefined ? undefined : `Basic ${Buffer.from(o.auth).toString('base64')}`;
  const allowed = (header: string | undefined): boolean => expected === undefined || header === expected;
  const server = http.createServer((req, res) => {
    const proxyAuthorization = req.headers['proxy-authorization'];
    requests.push({ method: req.method ?? '', target: req.url ?? '', proxyAuthorization });
    if (!allowed(proxyAuthorization)) {
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
      return;
    }
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end('not an absolute-URI request');
      return;
    }
    const to = o.hosts[url.host];
    if (url.protocol !== 'http:' || to === undefined) {
      res.writeHead(502).end(`the test proxy does not know ${url.host}`);
      return;
    }
    const [host, port] = to.split(':');
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = http.request(
      { host, port: Number(port), method: req.method, path: `${url.pathname}${url.search}`, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', (err) => res.writeHead(502).end(err.message));
    req.pipe(upstream);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const proxyAuthorization = req.headers['proxy-authorization'];
    requests.push({ method: 'CONNECT', target: req.url ?? '', proxyAuthorization });
    const to = o.hosts[req.url ?? ''];
    if (!allowed(proxyAuthorization) || to === undefined) {
      client.end(
        `HTTP/1.1 ${to === undefined ? '502 Bad Gateway' : '407 Proxy Authentication Required'}\r\n\r\n`,
      );
      return;
    }
    const [host, port] = to.split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
