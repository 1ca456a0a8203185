/**
 * A test certificate authority and a server certificate it signed for 127.0.0.1, made with the
 * openssl tool (which `.ci/run` installs): for tests of what outbound TLS trusts.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCa {
  /** The CA's certificate (PEM file). */
  caFile: string;
  /** An empty PEM file: a certificate store that trusts nothing. */
  emptyFile: string;
  /** The server's key and certificate, for `https.createServer`. */
  key: Buffer;
  cert: Buffer;
}

export async function makeTestCa(dir: string): Promise<TestCa> {
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await ssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=agentd test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  );
  await ssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  await writeFile(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'san.ext',
  );
  await writeFile(path.join(dir, 'empty.pem'), '');
  return {
    caFile: path.join(dir, 'ca.pem'),
    emptyFile: path.join(dir, 'empty.pem'),
    key: await readFile(path.join(dir, 'server.key')),
    cert: await readFile(path.join(dir, 'server.pem')),
  };
}
