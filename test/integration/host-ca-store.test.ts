/**
 * Outbound TLS trusts the host's CA store (src/outbound-http.ts): an HTTPS server whose
 * certificate a test CA signed is trusted when that CA is the store (SSL_CERT_FILE), on a runtime
 * that can add it (the release's; CI runs this file on both runtimes), and through
 * NODE_EXTRA_CA_CERTS on any. The CA and the certificate are made with openssl.
 */
import { execFile } from 'node:child_process';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, makeTempDir } from '../support/daemon.js';
import { SYSTEM_TESTS_REQUIRED, hasTool } from '../support/system-tools.js';
import { makeTestCa } from '../support/test-ca.js';

const run = promisify(execFile);
const CHILD = fileURLToPath(new URL('../support/outbound-child.ts', import.meta.url));
/** Whether this runtime can add the host's store to Node's trust (the child runs on the same). */
const canTrustStore =
  typeof (tls as { setDefaultCACertificates?: unknown }).setDefaultCACertificates === 'function';

describe.skipIf(!hasTool('openssl') && !SYSTEM_TESTS_REQUIRED)('the host CA store (needs openssl)', () => {
  let dir: string;
  let server: https.Server;
  let url: string;

  beforeAll(async () => {
    dir = await makeTempDir('agentd-ca-');
    const ca = await makeTestCa(dir);
    server = https.createServer({ key: ca.key, cert: ca.cert }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/artifact`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  /** The child's answer with the store set to `storeFile` and, when given, NODE_EXTRA_CA_CERTS. */
  async function get(storeFile: string, extra?: string): Promise<{ status?: number; error?: string }> {
    const env = childEnv({
      SSL_CERT_FILE: path.join(dir, storeFile),
      SSL_CERT_DIR: path.join(dir, 'no-such-dir'),
    });
    delete env.NODE_EXTRA_CA_CERTS;
    if (extra) env.NODE_EXTRA_CA_CERTS = path.join(dir, extra);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', CHILD, url], { env, timeout: 30_000 });
    return JSON.parse(stdout) as { status?: number; error?: string };
  }

  it(
    canTrustStore
      ? `trusts a CA in the host's store (Node.js ${process.version})`
      : `cannot trust the host's store on Node.js ${process.version}: the CA is refused`,
    async () => {
      if (canTrustStore) expect(await get('ca.pem')).toEqual({ status: 200 });
      else expect(await get('ca.pem')).toEqual({ error: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    },
  );

  it('refuses the server when its CA is in neither the store nor NODE_EXTRA_CA_CERTS', async () => {
    expect(await get('empty.pem')).toEqual({ error: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
  });

  it('trusts a CA in NODE_EXTRA_CA_CERTS on any runtime', async () => {
    expect(await get('empty.pem', 'ca.pem')).toEqual({ status: 200 });
  });
});
