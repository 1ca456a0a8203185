/**
 * A TCP proxy in front of kube-apiserver that the test controls: agentd is given its address
 * (TLS passes through it untouched: the certificate names 127.0.0.1), and the test cuts every
 * connection through it at a chosen moment, or refuses new ones, as a load balancer or NAT that
 * drops flows would.
 */
import net from 'node:net';

export interface TcpProxy {
  /** `https://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Connections open now. */
  open(): number;
  /** Destroy every open connection (both sides): a reset mid-stream. */
  cutAll(): number;
  /** While true, new connections are closed at once. */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<{ a: net.Socket; b: net.Socket }>();
  let accepted = 0;
  let refusing = false;
  const server = net.createServer((a) => {
    accepted++;
    if (refusing) {
      a.destroy();
      return;
    }
    const b = net.connect(targetPort, '127.0.0.1');
    const pair = { a, b };
    pairs.add(pair);
    const end = (): void => {
      pairs.delete(pair);
      a.destroy();
      b.destroy();
    };
    a.on('error', end).on('close', end);
    b.on('error', end).on('close', end);
    a.pipe(b);
    b.pipe(a);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    accepted: () => accepted,
    open: () => pairs.size,
    cutAll() {
      const n = pairs.size;
      for (const { a, b } of [...pairs]) {
        a.resetAndDestroy();
        b.destroy();
      }
      pairs.clear();
      return n;
    },
    refuse(on) {
      refusing = on;
    },
    async close() {
      for (const { a, b } of [...pairs]) {
        a.destroy();
        b.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
