/**
 * Client identities signed by the control plane's CA (pki.ts), for tests that need a user other
 * than the admin and the bootstrap tokens: a node's own identity (O=system:nodes,
 * CN=system:node:<name>, what a kubelet's client certificate says after its TLS bootstrap) or an
 * operator's (any groups). Made with the openssl tool, like the rest of the PKI.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiClient, type ApiClient } from './api.js';
import type { ControlPlane } from './index.js';

const run = promisify(execFile);

export interface ClientIdentity {
  /** The user name the API server sees. */
  user: string;
  certPem: string;
  keyPem: string;
  /** A client authenticating with this certificate. */
  api: ApiClient;
  /** A kubeconfig (YAML text) for kube-apiserver with this certificate. */
  kubeconfig: string;
}

let serial = 0;

/** A client certificate with CN=`user` and one O= per group. */
export async function clientIdentity(
  cp: ControlPlane,
  user: string,
  groups: string[],
): Promise<ClientIdentity> {
  const name = `identity-${process.pid}-${++serial}`;
  const f = (ext: string): string => path.join(cp.dir, `${name}.${ext}`);
  const subject = `${groups.map((g) => `/O=${g}`).join('')}/CN=${user}`;
  const ssl = (...args: string[]) => run('openssl', args, { cwd: cp.dir });
  await ssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    f('key'),
    '-out',
    f('csr'),
    '-subj',
    subject,
  );
  await writeFile(
    f('ext'),
    'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n',
  );
  await ssl(
    'x509',
    '-req',
    '-in',
    f('csr'),
    '-CA',
    path.join(cp.dir, 'ca.pem'),
    '-CAkey',
    path.join(cp.dir, 'ca.key'),
    // A serial of its own: identities made side by side must not share the CA's serial file.
    '-set_serial',
    `0x${randomBytes(16).toString('hex')}`,
    '-out',
    f('pem'),
    '-days',
    '2',
    '-extfile',
    f('ext'),
  );
  const certPem = await readFile(f('pem'), 'utf8');
  const keyPem = await readFile(f('key'), 'utf8');
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  const kubeconfig = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: test',
    '    cluster:',
    `      server: ${cp.server}`,
    `      certificate-authority-data: ${b64(cp.caPem)}`,
    'users:',
    '  - name: identity',
    '    user:',
    `      client-certificate-data: ${b64(certPem)}`,
    `      client-key-data: ${b64(keyPem)}`,
    'contexts:',
    '  - name: test',
    '    context: { cluster: test, user: identity }',
    'current-context: test',
    '',
  ].join('\n');
  return {
    user,
    certPem,
    keyPem,
    api: apiClient({ server: cp.server, caPem: cp.caPem, cert: certPem, key: keyPem }),
    kubeconfig,
  };
}

/** A node's own identity, as its kubelet's client certificate says: system:node:<name>. */
export const nodeIdentity = (cp: ControlPlane, node: string): Promise<ClientIdentity> =>
  clientIdentity(cp, `system:node:${node}`, ['system:nodes']);
