/**
 * The baseline of bench/rpc.ts: a bare node:http server on a unix socket that reads the request
 * body and answers a fixed JSON body, i.e. the least any HTTP server must do per call.
 * Plain JavaScript on purpose: it runs under bare `node` with no loader (no tsx), so that its
 * CPU and memory are those of Node itself. CommonJS, as agentd's own entry is: an ES module
 * entry sets up Node's ES module loader, which on Node 26 alone costs ~16 MiB of resident memory
 * (docs/benchmarks.md, "Footprint"), and would make the baseline larger than what Node needs.
 * Usage: node baseline-server.cjs <socket> <body-file>; prints "ready" once listening.
 */
'use strict';
const { readFileSync } = require('node:fs');
const http = require('node:http');

const [socketPath, bodyFile] = process.argv.slice(2);
if (!socketPath || !bodyFile) {
  console.error('usage: baseline-server.cjs <socket> <body-file>');
  process.exit(2);
}
const body = Buffer.from(readFileSync(bodyFile, 'utf8'));

const server = http.createServer((req, res) => {
  // Consume the request like a real server must before answering.
  req.on('data', () => undefined);
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    res.end(body);
  });
});
// fastify's default, so both keep their connections alike.
server.keepAliveTimeout = 72_000;
server.listen(socketPath, () => console.log('ready'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
