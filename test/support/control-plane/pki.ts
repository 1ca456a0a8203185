/**
 * The control plane's PKI, made with the openssl tool (`.ci/run` installs it): a CA of its own,
 * kube-apiserver's serving certificate (127.0.0.1, localhost and the in-cluster names), an admin
 * client certificate (O=system:masters) for the tests and kube-controller-manager, and the
 * service-account signing key. Short-lived (2 days): nothing outlives a test run.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Pki {
  dir: string;
  /** The CA's certificate: a PEM file and its text. */
  caFile: string;
  caPem: string;
  caKeyFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  adminCertFile: string;
  adminKeyFile: string;
  adminCertPem: string;
  adminKeyPem: string;
  /** The service-account signing key (RSA, PEM) and its public half. */
  saKeyFile: string;
  saPubFile: string;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export async function makePki(dir: string): Promise<Pki> {
  const ssl = async (...args: string[]): Promise<void> => {
    try {
      await run('openssl', args, { cwd: dir });
    } catch (err) {
      throw new Error(
        `openssl ${args[0]} failed (openssl is needed for the control plane's CA): ${String(err)}`,
      );
    }
  };
  await ssl(
    'req',
    '-x509',
    ...EC,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=agentd test control plane CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  const sign = async (name: string, subject: string, ext: string): Promise<void> => {
    await ssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    await writeFile(path.join(dir, `${name}.ext`), ext);
    await ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    );
  };
  await sign(
    'apiserver',
    '/CN=kube-apiserver',
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc',
      '',
    ].join('\n'),
  );
  await sign(
    'admin',
    '/O=system:masters/CN=agentd-test-admin',
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=clientAuth',
      '',
    ].join('\n'),
  );
  await ssl('genrsa', '-out', 'sa.key', '2048');
  await ssl('rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub');
  const f = (name: string): string => path.join(dir, name);
  return {
    dir,
    caFile: f('ca.pem'),
    caPem: await readFile(f('ca.pem'), 'utf8'),
    caKeyFile: f('ca.key'),
    serverCertFile: f('apiserver.pem'),
    serverKeyFile: f('apiserver.key'),
    adminCertFile: f('admin.pem'),
    adminKeyFile: f('admin.key'),
    adminCertPem: await readFile(f('admin.pem'), 'utf8'),
    adminKeyPem: await readFile(f('admin.key'), 'utf8'),
    saKeyFile: f('sa.key'),
    saPubFile: f('sa.pub'),
  };
}

/** A kubeconfig for `server` trusting the CA, authenticating with the admin certificate. */
export function adminKubeconfigYaml(pki: Pki, server: string): string {
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: test',
    '    cluster:',
    `      server: ${server}`,
    `      certificate-authority-data: ${b64(pki.caPem)}`,
    'users:',
    '  - name: admin',
    '    user:',
    `      client-certificate-data: ${b64(pki.adminCertPem)}`,
    `      client-key-data: ${b64(pki.adminKeyPem)}`,
    'contexts:',
    '  - name: test',
    '    context: { cluster: test, user: admin }',
    'current-context: test',
    '',
  ].join('\n');
}

/** A kubeconfig for `server` trusting the CA, authenticating with a bearer token. */
export function tokenKubeconfigYaml(caPem: string, server: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: test',
    '    cluster:',
    `      server: ${server}`,
    `      certificate-authority-data: ${Buffer.from(caPem).toString('base64')}`,
    'users:',
    '  - name: agent',
    `    user: { token: ${JSON.stringify(token)} }`,
    'contexts:',
    '  - name: test',
    '    context: { cluster: test, user: agent }',
    'current-context: test',
    '',
  ].join('\n');
}
