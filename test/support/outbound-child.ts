/**
 * One GET through agentd's outbound dispatcher (src/outbound-http.ts) in a process of its own,
 * whose environment (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, proxies) the test sets: trusting the
 * host's CA store changes the whole process's TLS defaults, which a test worker must not.
 *
 * Usage: `node --import tsx outbound-child.ts URL`; prints `{"status":N}` or `{"error":"CODE"}`.
 */
import { loadUndici } from '../../src/lazy-undici.js';
import { outboundDispatcher } from '../../src/outbound-http.js';

const url = process.argv[2] ?? '';
try {
  const dispatcher = await outboundDispatcher({ connect: { timeout: 5_000 } });
  const { request } = await loadUndici();
  const res = await request(url, { method: 'GET', dispatcher });
  await res.body.text();
  process.stdout.write(`${JSON.stringify({ status: res.statusCode })}\n`);
  await dispatcher.close();
} catch (err) {
  const e = err as { code?: string; cause?: { code?: string }; message?: string };
  process.stdout.write(`${JSON.stringify({ error: e.cause?.code ?? e.code ?? e.message })}\n`);
}
