/**
 * The artifact mirror as a standalone process for benchmarks, so its work does not share an
 * event loop with the client being measured. Prints `{"port":N}` on stdout once listening;
 * exits when stdin closes or on SIGTERM.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createArtifactHandler } from '../../src/sim/mirror/artifacts.js';

const handler = createArtifactHandler();
const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  handler(req, res, url).then(
    (handled) => {
      if (!handled) res.writeHead(404, { 'content-length': 0 }).end();
    },
    (err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))),
  );
});

function stop(): void {
  server.closeAllConnections();
  server.close(() => process.exit(0));
}

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
