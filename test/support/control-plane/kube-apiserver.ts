/**
 * kube-apiserver on 127.0.0.1 (a free port, kept across restarts), HTTPS with the control plane's
 * CA, the Node authorizer and RBAC, NodeRestriction, bootstrap-token authentication, service-account keys and issuer, and the admission
 * plugin that would need a service-account controller turned off. Ready when `/readyz` answers
 * 200 to the admin.
 */
import https from 'node:https';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import type { Pki } from './pki.js';
import { freePort, pollUntil, startProcess, type ManagedProcess, type Reaper } from './processes.js';

export interface KubeApiServerOptions {
  /** `--etcd-compaction-interval` (default the server's 5m). */
  etcdCompactionInterval?: string;
  /** Record every request (`--audit-log-path`; `audit.ts` reads it). */
  audit?: boolean;
  /** More flags, given last. */
  extraArgs?: string[];
}

export interface KubeApiServer {
  /** `https://127.0.0.1:<port>` */
  url: string;
  port: number;
  process(): ManagedProcess;
  /** The audit log's path, when `audit` was asked for. */
  auditLog: string | null;
  /** Start it (again, on the same port and etcd) and wait until it is ready. */
  start(): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL: a crash. */
  kill(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * Every request at the Metadata level (who did what to which object, with what answer), and the
 * Machines' writes with their bodies: what was sent (a patch as sent) and what the server kept;
 * the Leases' writes with what was sent (its resourceVersion: a conditional write or not).
 */
const AUDIT_POLICY = [
  'apiVersion: audit.k8s.io/v1',
  'kind: Policy',
  'omitStages: [RequestReceived]',
  'rules:',
  '  - level: RequestResponse',
  '    resources: [{ group: unbounded-cloud.io, resources: [machines, machines/status] }]',
  '    verbs: [create, update, patch]',
  '  - level: Request',
  '    resources: [{ group: coordination.k8s.io, resources: [leases] }]',
  '    verbs: [create, update, patch]',
  '  - level: Metadata',
  '',
].join('\n');

export function readyz(url: string, pki: Pki): Promise<boolean> {
  return new Promise((resolve) => {
    https
      .get(
        `${url}/readyz`,
        { ca: pki.caPem, cert: pki.adminCertPem, key: pki.adminKeyPem, agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode === 200));
        },
      )
      .on('error', () => resolve(false));
  });
}

export async function createKubeApiServer(
  bin: string,
  dir: string,
  etcdUrl: string,
  pki: Pki,
  reaper: Reaper,
  o: KubeApiServerOptions = {},
): Promise<KubeApiServer> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  let auditLog: string | null = null;
  const auditArgs: string[] = [];
  if (o.audit) {
    const policy = path.join(dir, 'audit-policy.yaml');
    await writeFile(policy, AUDIT_POLICY);
    auditLog = path.join(dir, 'audit.log');
    auditArgs.push(
      `--audit-policy-file=${policy}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-mode=blocking',
    );
  }
  const args = [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
    `--tls-cert-file=${pki.serverCertFile}`,
    `--tls-private-key-file=${pki.serverKeyFile}`,
    `--client-ca-file=${pki.caFile}`,
    // As kubeadm runs it: the Node authorizer and NodeRestriction tie a node's own identity to
    // its Node and the pods bound to it (docs/watcher.md, "Least privilege").
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--enable-bootstrap-token-auth',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki.saPubFile}`,
    `--service-account-signing-key-file=${pki.saKeyFile}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--disable-admission-plugins=ServiceAccount',
    '--allow-privileged=true',
    '--profiling=false',
    ...(o.etcdCompactionInterval ? [`--etcd-compaction-interval=${o.etcdCompactionInterval}`] : []),
    ...auditArgs,
    ...(o.extraArgs ?? []),
  ];
  let current: ManagedProcess | null = null;
  const server: KubeApiServer = {
    url,
    port,
    auditLog,
    process() {
      if (!current) throw new Error('kube-apiserver has not been started');
      return current;
    },
    async start() {
      if (current?.running()) throw new Error('kube-apiserver runs already');
      const p = startProcess(reaper, 'kube-apiserver', path.join(bin, 'kube-apiserver'), args);
      current = p;
      await pollUntil('kube-apiserver /readyz', () => readyz(url, pki), READY_TIMEOUT_MS, p);
    },
    async stop() {
      await current?.stop(10_000);
    },
    async kill() {
      await current?.kill();
    },
  };
  return server;
}
