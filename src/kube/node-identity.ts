/**
 * This node's own identity (docs/watcher.md, "Least privilege"): the client certificate the
 * active machine's kubelet holds after its TLS bootstrap (`system:node:<name>`, group
 * `system:nodes`), which kube-apiserver's Node authorizer and NodeRestriction let patch its own
 * Node and evict its own pods. It is found from the kubelet's kubeconfig inside the machine
 * rootfs (`/var/lib/kubelet/kubeconfig`, written by kubelet, naming
 * `/var/lib/kubelet/pki/kubelet-client-current.pem`): every path in it, and every symlink on the
 * way (kubelet's `-current.pem` points at the dated file by its absolute machine path), is a
 * machine path, resolved under the rootfs on the host, never on the host itself.
 *
 * The files are looked at (stat) on every lookup and read again only when one of them changed:
 * a certificate kubelet rotated or another machine made active gives the new identity at once.
 * Nothing here throws: a missing or unusable identity is `{ identity: null, reason }`.
 */
import { X509Certificate } from 'node:crypto';
import { lstatSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import { describeError } from '../errors.js';
import type { ClientCertificate, KubeClients } from './client.js';

/** The kubelet's client certificate and key, as read. */
export interface NodeIdentity {
  /** The user the API server sees: the certificate's CN, `system:node:<name>`. */
  user: string;
  certPem: string;
  keyPem: string;
  /** The host files it was read from (safe to log). */
  certFile: string;
  keyFile: string;
  /** Changes whenever one of the files it was read from changes. */
  stamp: string;
}

/** Where the active machine's kubelet keeps its kubeconfig: the rootfs on the host, the path in the machine. */
export interface KubeletFiles {
  rootfs: string;
  /** The kubelet's kubeconfig as the machine sees it (`/var/lib/kubelet/kubeconfig`). */
  kubeconfig: string;
}

export type NodeIdentityLookup = { identity: NodeIdentity } | { identity: null; reason: string };

/** Symlinks followed at most while resolving one path (as Linux's MAXSYMLINKS). */
const MAX_LINKS = 40;

/**
 * A machine path (absolute, as the machine sees it) as a host path under `rootfs`: each
 * component's symlink is followed inside the machine (an absolute target is under the rootfs,
 * `..` stops at its root). A component that does not exist ends the walk (the read then fails).
 */
export function resolveInRootfs(rootfs: string, machinePath: string): string {
  let rest = machinePath.split('/').filter((p) => p !== '' && p !== '.');
  let cur = '/';
  let links = 0;
  while (rest.length > 0) {
    const [part, ...tail] = rest as [string, ...string[]];
    const next = path.posix.resolve(cur, part);
    const host = path.join(rootfs, next);
    let isLink: boolean;
    try {
      isLink = lstatSync(host).isSymbolicLink();
    } catch {
      return path.join(rootfs, path.posix.resolve(next, ...tail));
    }
    if (isLink) {
      if (++links > MAX_LINKS) throw new Error(`too many symlinks resolving ${machinePath} in ${rootfs}`);
      const target = path.posix.resolve(cur, readlinkSync(host));
      rest = [...target.split('/').filter((p) => p !== ''), ...tail];
      cur = '/';
      continue;
    }
    cur = next;
    rest = tail;
  }
  return path.join(rootfs, cur);
}

interface KubeconfigUser {
  'client-certificate'?: string;
  'client-key'?: string;
  'client-certificate-data'?: string;
  'client-key-data'?: string;
}

/** The current context's user of a kubeconfig (YAML text), or why there is none. */
function currentUser(text: string): KubeconfigUser | string {
  const doc = parse(text) as {
    'current-context'?: string;
    contexts?: { name?: string; context?: { user?: string } }[];
    users?: { name?: string; user?: KubeconfigUser }[];
  } | null;
  const ctx = doc?.contexts?.find((c) => c.name === doc['current-context']);
  const user = doc?.users?.find((u) => u.name === ctx?.context?.user)?.user;
  if (user === undefined)
    return `its current-context ${JSON.stringify(doc?.['current-context'])} names no user`;
  return user;
}

const CERT_RE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const KEY_RE = /-----BEGIN (?:EC |RSA )?PRIVATE KEY-----[\s\S]+?-----END (?:EC |RSA )?PRIVATE KEY-----/;

/** A stat of a host file as a stamp part: which file, what size, when written. */
function statStamp(file: string): string {
  const s = statSync(file);
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
}

type Step = { stamp: string; value: NodeIdentityLookup };
const none = (reason: string): Step => ({ stamp: '', value: { identity: null, reason } });

/**
 * A reader of one node's identity: `lookup(at)` for the active machine's kubelet files. Each lookup
 * resolves and stats the files anew (a symlink kubelet swapped to a rotated certificate resolves
 * to the new file); it reads them again only when their stamp changed.
 */
export function createNodeIdentityReader(): { lookup(at: KubeletFiles): NodeIdentityLookup } {
  let last: Step | null = null;

  function lookup({ rootfs, kubeconfig }: KubeletFiles): Step {
    const kubeconfigFile = path.join(rootfs, kubeconfig);
    const bad = (what: string): Step => none(`the kubelet kubeconfig ${kubeconfigFile}: ${what}`);
    let stamp: string;
    let text: string;
    try {
      const file = resolveInRootfs(rootfs, kubeconfig);
      stamp = `${rootfs}|${statStamp(file)}`;
      text = readFileSync(file, 'utf8');
    } catch (err) {
      return none(
        (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? `no kubelet kubeconfig at ${kubeconfigFile} (kubelet has not bootstrapped yet)`
          : `the kubelet kubeconfig ${kubeconfigFile} cannot be read: ${describeError(err)}`,
      );
    }
    let user: KubeconfigUser | string;
    try {
      user = currentUser(text);
    } catch (err) {
      return bad(`not a kubeconfig: ${describeError(err)}`);
    }
    if (typeof user === 'string') return bad(user);
    // Relative paths in a kubeconfig are relative to its directory (in the machine).
    const inMachine = (p: string): string => path.posix.resolve(path.posix.dirname(kubeconfig), p);
    const source = (
      file: string | undefined,
      data: string | undefined,
    ): { file: string } | { data: string } | null =>
      file !== undefined
        ? { file: resolveInRootfs(rootfs, inMachine(file)) }
        : data !== undefined
          ? { data: Buffer.from(data, 'base64').toString('utf8') }
          : null;
    let cert: { file: string } | { data: string } | null;
    let key: { file: string } | { data: string } | null;
    try {
      cert = source(user['client-certificate'], user['client-certificate-data']);
      key = source(user['client-key'], user['client-key-data']);
      if (cert === null) {
        return bad(
          'its user has no client certificate (an exec plugin or a token: the session uses it already)',
        );
      }
      if (key === null) return bad('its user has a client certificate but no client key');
      for (const s of [cert, key]) if ('file' in s) stamp += `|${statStamp(s.file)}`;
    } catch (err) {
      return bad(`its client certificate or key cannot be read: ${describeError(err)}`);
    }
    if (last !== null && last.stamp === stamp) return last;
    let certText: string;
    let keyText: string;
    try {
      certText = 'file' in cert ? readFileSync(cert.file, 'utf8') : cert.data;
      keyText = 'file' in key ? readFileSync(key.file, 'utf8') : key.data;
    } catch (err) {
      return bad(`its client certificate or key cannot be read: ${describeError(err)}`);
    }
    const certFile = 'file' in cert ? cert.file : kubeconfigFile;
    const keyFile = 'file' in key ? key.file : kubeconfigFile;
    const certPem = certText.match(CERT_RE)?.join('\n');
    const keyPem = keyText.match(KEY_RE)?.[0];
    if (certPem === undefined) return bad(`no PEM certificate in ${certFile}`);
    if (keyPem === undefined) return bad(`no PEM private key in ${keyFile}`);
    let subject: string;
    try {
      subject = new X509Certificate(certPem).subject;
    } catch (err) {
      return bad(`the client certificate in ${certFile} cannot be parsed: ${describeError(err)}`);
    }
    const cn = /^CN=(.*)$/m.exec(subject)?.[1];
    if (cn === undefined || !cn.startsWith('system:node:')) {
      return bad(`the client certificate in ${certFile} is not a node's (CN ${JSON.stringify(cn ?? '')})`);
    }
    return { stamp, value: { identity: { user: cn, certPem, keyPem, certFile, keyFile, stamp } } };
  }

  return {
    lookup(at) {
      last = lookup(at);
      return last.value;
    },
  };
}

/** Which credentials this node's Node and pod calls use. */
export type NodeCredentials =
  { source: 'node-identity'; user: string; certFile: string } | { source: 'session'; reason: string };

export interface NodeCredentialChooserOptions {
  /** `--kubeconfig` given: its credentials are used for everything. */
  kubeconfigGiven: boolean;
  /** The active machine's applied config (its credentials are the session's), or null. */
  appliedConfig: () => AgentConfig | null;
  /** The active machine's rootfs and its kubelet's kubeconfig, or null (no active machine). */
  activeKubelet?: () => KubeletFiles | null;
  logger: Logger;
}

/**
 * The choice of credentials for this node's Node and pod calls: the node's own identity when the
 * session's credentials are the applied config's and the active machine's kubelet holds a client
 * certificate, else the session's. Looked up anew on every call (the active machine or the
 * certificate may have changed since); the log says which, once per change.
 */
export function createNodeCredentialChooser(o: NodeCredentialChooserOptions): {
  current(): NodeCredentials;
  clients(base: KubeClients, make: (base: KubeClients, id: ClientCertificate) => KubeClients): KubeClients;
} {
  const reader = createNodeIdentityReader();
  let memo: { base: KubeClients; stamp: string; value: KubeClients } | null = null;
  let told: string | null = null;

  function choose(): NodeIdentityLookup {
    if (o.kubeconfigGiven) return { identity: null, reason: '--kubeconfig is given' };
    if (o.appliedConfig() === null) return { identity: null, reason: 'no applied config (not joined yet)' };
    const at = o.activeKubelet?.() ?? null;
    if (at === null) return { identity: null, reason: 'no active machine' };
    return reader.lookup(at);
  }

  const describe = (c: NodeIdentityLookup): NodeCredentials =>
    c.identity === null
      ? { source: 'session', reason: c.reason }
      : { source: 'node-identity', user: c.identity.user, certFile: c.identity.certFile };

  return {
    current: () => describe(choose()),
    clients(base, make) {
      const chosen = choose();
      const now =
        chosen.identity === null ? chosen.reason : `${chosen.identity.user} ${chosen.identity.certFile}`;
      if (now !== told) {
        told = now;
        if (chosen.identity !== null) {
          o.logger.info(
            { user: chosen.identity.user, certFile: chosen.identity.certFile },
            'Node and pod calls (cordon, drain, uncordon, the Node watch and health) use this node’s own identity',
          );
        } else {
          o.logger.info(
            { source: base.source, reason: chosen.reason },
            'Node and pod calls (cordon, drain, uncordon, the Node watch and health) use the session’s credentials: no node identity',
          );
        }
      }
      if (chosen.identity === null) return base;
      const { stamp } = chosen.identity;
      if (memo?.base !== base || memo.stamp !== stamp) {
        memo = { base, stamp, value: make(base, chosen.identity) };
      }
      return memo.value;
    },
  };
}
