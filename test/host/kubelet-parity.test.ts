/**
 * The kubelet and containerd of a taken-over node as upstream ran them, on real systemd: one
 * node joined with an exec credential (kube1), then a repave to kube2 with the
 * `kubelet-hooks` image (an operator's `/etc/default/kubelet` and a static pod kept in the
 * image, test/support/real-host/images.ts). What each machine's kubelet and containerd got is
 * read from the running processes: the kubelet stand-in keeps the command line systemd gave it
 * (`/proc/<pid>/cmdline`), the containerd stand-in writes the configuration it loaded, its
 * `imports` merged as containerd 2.x merges them (src/sim/mirror/artifact-content.ts).
 *
 * - The exec credential: the applied config carries it, kube2's kubeconfig holds the same plugin,
 *   kubelet runs with no `--bootstrap-kubeconfig` and no certificate rotation, and the plugin
 *   answers the same credential in kube2 as in kube1.
 * - `/etc/default/kubelet`: written into kube1 by hand it ends kubelet's command line once kubelet
 *   restarts; kept in the image it does in kube2 from its first start. What was written by hand
 *   into kube1 is not in kube2: a repave starts from the image (docs/operations.md).
 * - Static pods: the kubelet configuration's `staticPodPath` is `/etc/kubernetes/manifests/`
 *   (0700), where a manifest dropped into kube1 is, and in kube2 the image's.
 * - The hostname: the host's `/etc/hostname` is changed before the repave, its running name not;
 *   kube2's hostname, what its kubelet registers the Node as, is kube1's, the Node's name.
 * - containerd: an operator's `conf.d` drop-in and `certs.d` in kube1 are carried to kube2, where
 *   containerd loaded the drop-in over agentd's config.toml (the GPU drop-in: gpu.test.ts).
 */
import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONTAINERD_LOADED_CONFIG } from '../../src/sim/mirror/artifact-content.js';
import { expectNode, type OperationJson } from '../support/real-host/assert-node.js';
import { KUBELET_HOOKS } from '../support/real-host/images.js';
import { startRealNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

type Machine = 'kube1' | 'kube2';

/** A plugin every machine has (/bin/sh): the credential it answers is the node's identity. */
const NODE_TOKEN = 'node-identity-worker-01';
const EXEC_CREDENTIAL = {
  apiVersion: 'client.authentication.k8s.io/v1',
  command: '/bin/sh',
  args: [
    '-c',
    `printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$NODE_TOKEN"`,
  ],
  env: [{ name: 'NODE_TOKEN', value: NODE_TOKEN }],
};

/** kubelet's command line from agentd's drop-ins, for this node's config (labels, DNS). */
const AGENTD_KUBELET_ARGS = [
  '--kubeconfig=/var/lib/kubelet/kubeconfig',
  '--config=/var/lib/kubelet/config.yaml',
  '--node-labels=unbounded-cloud.io/site=test',
  '--cluster-dns=10.96.0.10',
  '--client-ca-file=/etc/kubernetes/pki/apiserver-client-ca.crt',
];

/** The hooks an operator writes into kube1 by hand (the image's are KUBELET_HOOKS). */
const HAND_ENV_FILE = 'KUBELET_EXTRA_ARGS="--v=5 --image-gc-high-threshold=90"\n';
const HAND_ARGS = ['--v=5', '--image-gc-high-threshold=90'];
const HAND_MANIFEST = '/etc/kubernetes/manifests/hand-static-pod.yaml';

/** An operator's containerd drop-in: replaces one key of agentd's config, adds a runtime. */
const OPERATOR_DROP_IN = {
  path: '/etc/containerd/conf.d/50-operator.toml',
  content: [
    'version = 3',
    '',
    "[plugins.'io.containerd.cri.v1.images']",
    "  snapshotter = 'native'",
    '',
    "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]",
    "  runtime_type = 'io.containerd.kata.v2'",
    '',
  ].join('\n'),
};
const OPERATOR_HOSTS = {
  path: '/etc/containerd/certs.d/registry.corp.example/hosts.toml',
  content:
    'server = "https://registry.corp.example"\n\n[host."https://mirror.corp.example"]\n  capabilities = ["pull", "resolve"]\n',
};
const KERNEL_HOSTNAME = '/proc/sys/kernel/hostname';
const CRI_IMAGES = "plugins.'io.containerd.cri.v1.images'";
const CRI_RUNTIME = "plugins.'io.containerd.cri.v1.runtime'";

interface KubeconfigUser {
  users: Array<{ user: { exec?: Record<string, unknown>; token?: string } }>;
}

describe.skipIf(!requireRealHost())(
  'kubelet and containerd as upstream ran them, on real systemd',
  { timeout: 180_000 },
  () => {
    let node: RealNode;
    /** What kube1 had, read before the repave. */
    const kube1: { hostname?: string; exec?: Record<string, unknown> } = {};

    const inMachine = async (m: Machine, argv: string[]): Promise<string> =>
      (await node.host.execOk(['systemd-run', `--machine=${m}`, '--pipe', '--wait', ...argv])).stdout;
    const exists = async (m: Machine, p: string): Promise<boolean> =>
      (await node.host.exec(['test', '-e', `/var/lib/machines/${m}${p}`])).exitCode === 0;
    /** Write a file into a machine's rootfs from outside, as an operator on the host would. */
    const writeInto = async (m: Machine, p: string, content: string): Promise<void> => {
      const file = node.host.outside(`/var/lib/machines/${m}${p}`);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, content);
    };

    /**
     * The arguments of the running kubelet, from its command line: `/bin/sh <script> ARGS…` while
     * the stand-in starts, `perl - ARGS…` once it serves; waits for the second.
     */
    const kubeletArgv = async (m: Machine): Promise<string[]> => {
      const script =
        'pid=$(systemctl show -p MainPID --value kubelet.service); tr "\\0" "\\n" < /proc/$pid/cmdline';
      for (let i = 0; ; i++) {
        const argv = (await inMachine(m, ['sh', '-c', script])).split('\n').filter((a) => a !== '');
        if (argv[0] === 'perl' && argv[1] === '-') return argv.slice(2);
        if (i >= 100)
          throw new Error(`kubelet in ${m} is not serving: its command line is ${argv.join(' ')}`);
        await delay(100);
      }
    };
    /** The kubelet configuration the running kubelet was given (`--config=`), parsed. */
    const kubeletConfig = async (m: Machine): Promise<Record<string, unknown>> => {
      const file = (await kubeletArgv(m)).find((a) => a.startsWith('--config='))?.slice('--config='.length);
      expect(file).toBeDefined();
      return parse(await inMachine(m, ['cat', file as string])) as Record<string, unknown>;
    };
    const kubeconfigExec = async (m: Machine): Promise<Record<string, unknown>> => {
      const doc = parse(await inMachine(m, ['cat', '/var/lib/kubelet/kubeconfig'])) as KubeconfigUser;
      expect(doc.users).toHaveLength(1);
      expect(doc.users[0]?.user.token).toBeUndefined();
      return doc.users[0]?.user.exec as Record<string, unknown>;
    };
    /** Run the exec plugin inside a machine as kubelet does: its command, args and env, nothing else. */
    const runPlugin = async (m: Machine, exec: Record<string, unknown>): Promise<string> => {
      const env = (exec.env as Array<{ name: string; value: string }>).map((e) => `${e.name}=${e.value}`);
      const out = await inMachine(m, [
        'env',
        '-i',
        ...env,
        exec.command as string,
        ...(exec.args as string[]),
      ]);
      return (JSON.parse(out) as { status: { token: string } }).status.token;
    };
    /** What containerd loaded at its start, as `key = value` by key. */
    const containerdLoaded = async (m: Machine): Promise<{ imports: string; keys: Map<string, string> }> => {
      const lines = (await inMachine(m, ['cat', CONTAINERD_LOADED_CONFIG])).split('\n');
      const keys = new Map<string, string>();
      for (const line of lines) {
        const eq = line.indexOf(' = ');
        if (!line.startsWith('#') && eq > 0) keys.set(line.slice(0, eq), line.slice(eq + 3));
      }
      return { imports: keys.get('imports') ?? '', keys };
    };

    beforeAll(async () => {
      node = await startRealNode({ label: 'kubelet-parity' });
      await node.waitReady();
      const config = node.agentConfig({
        Kubelet: {
          ApiServer: 'https://127.0.0.1:6443',
          Auth: { ExecCredential: EXEC_CREDENTIAL },
          Labels: { 'unbounded-cloud.io/site': 'test' },
          RegisterWithTaints: [],
        },
      });
      const op = await node.agentctlJson<OperationJson>(
        ['update', '--config', await node.configFile(config)],
        0,
        300_000,
      );
      expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    }, 600_000);

    afterAll(async () => {
      await node?.stop();
    }, 120_000);

    it('kube1: kubelet joins with the exec plugin kubeconfig, no bootstrap, no rotation', async () => {
      expect(await kubeletArgv('kube1')).toEqual(AGENTD_KUBELET_ARGS);
      expect(await exists('kube1', '/var/lib/kubelet/bootstrap-kubeconfig')).toBe(false);
      expect((await inMachine('kube1', ['stat', '-c', '%a', '/var/lib/kubelet/kubeconfig'])).trim()).toBe(
        '600',
      );
      kube1.exec = await kubeconfigExec('kube1');
      expect(kube1.exec).toEqual({ ...EXEC_CREDENTIAL, interactiveMode: 'Never' });
      expect(await runPlugin('kube1', kube1.exec)).toBe(NODE_TOKEN);
      expect((await kubeletConfig('kube1')).rotateCertificates).toBe(false);
    });

    it('kube1: /etc/default/kubelet written by hand ends kubelet’s command line once kubelet restarts', async () => {
      await writeInto('kube1', KUBELET_HOOKS.envFile.path, HAND_ENV_FILE);
      await inMachine('kube1', ['systemctl', 'restart', 'kubelet.service']);
      // systemd splits each unbraced $VARIABLE into words; the operator's come last, so theirs win.
      expect(await kubeletArgv('kube1')).toEqual([...AGENTD_KUBELET_ARGS, ...HAND_ARGS]);
    });

    it('kube1: a static pod manifest dropped into the machine is in kubelet’s staticPodPath (0700)', async () => {
      await writeInto(
        'kube1',
        HAND_MANIFEST,
        'apiVersion: v1\nkind: Pod\nmetadata: { name: hand-static-pod }\n',
      );
      const staticPodPath = (await kubeletConfig('kube1')).staticPodPath as string;
      expect(staticPodPath).toBe('/etc/kubernetes/manifests/');
      expect((await inMachine('kube1', ['stat', '-c', '%a', staticPodPath])).trim()).toBe('700');
      expect((await inMachine('kube1', ['ls', staticPodPath])).split('\n')).toContain(
        path.basename(HAND_MANIFEST),
      );
    });

    it('kube1: containerd loaded agentd’s config.toml alone (no drop-in yet, no GPU)', async () => {
      const loaded = await containerdLoaded('kube1');
      expect(loaded.imports).toBe("['/etc/containerd/config.toml']");
      expect(loaded.keys.get(`${CRI_IMAGES}.snapshotter`)).toBe("'overlayfs'");
      expect(loaded.keys.get(`${CRI_RUNTIME}.containerd.default_runtime_name`)).toBe("'runc'");
    });

    it('repaves to kube2 with the kubelet-hooks image after the host’s /etc/hostname changed', async () => {
      // kubelet names its Node by the kernel's hostname (Go's os.Hostname reads this file).
      kube1.hostname = (await inMachine('kube1', ['cat', KERNEL_HOSTNAME])).trim();
      // The Node kube1's kubelet registered is named by kube1's hostname: the host's running name.
      expect(kube1.hostname).toBe((await node.host.execOk(['cat', KERNEL_HOSTNAME])).stdout.trim());
      // Renamed on disk only (DHCP, cloud-init, an edit): the running name, the Node's, stays.
      await node.host.execOk(['sh', '-c', 'echo renamed-on-disk > /etc/hostname']);
      await writeInto('kube1', OPERATOR_DROP_IN.path, OPERATOR_DROP_IN.content);
      await writeInto('kube1', OPERATOR_HOSTS.path, OPERATOR_HOSTS.content);
      const op = await node.agentctlJson<OperationJson>(
        ['update', '--image', node.image('kubelet-hooks')],
        0,
        300_000,
      );
      expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
      await expectNode(node, { active: 'kube2', version: '1.34.0', image: node.image('kubelet-hooks') });
    });

    it('kube2: the exec credential is the node’s identity still: the same plugin, the same credential, no CSR', async () => {
      // What carries it: the applied config on the host, rendered into the new machine's kubeconfig.
      const applied = JSON.parse(
        (await node.host.execOk(['cat', '/etc/unbounded/agent/kube2-applied-config.json'])).stdout,
      ) as { Kubelet: { Auth: Record<string, unknown> } };
      expect(applied.Kubelet.Auth).toEqual({ ExecCredential: EXEC_CREDENTIAL });
      const exec = await kubeconfigExec('kube2');
      expect(exec).toEqual(kube1.exec);
      expect(await runPlugin('kube2', exec)).toBe(NODE_TOKEN);
      // No TLS bootstrap: no bootstrap kubeconfig, so no certificate signing request, and no rotation.
      expect(await exists('kube2', '/var/lib/kubelet/bootstrap-kubeconfig')).toBe(false);
      const argv = await kubeletArgv('kube2');
      expect(argv[0]).toBe('--kubeconfig=/var/lib/kubelet/kubeconfig');
      expect(argv.some((a) => a.startsWith('--bootstrap-kubeconfig'))).toBe(false);
      expect((await kubeletConfig('kube2')).rotateCertificates).toBe(false);
    });

    it('kube2: its hostname, the name its kubelet registers, is the Node’s current name', async () => {
      expect((await inMachine('kube2', ['cat', KERNEL_HOSTNAME])).trim()).toBe(kube1.hostname);
      expect(await inMachine('kube2', ['cat', '/etc/hostname'])).toBe(`${kube1.hostname}\n`);
      expect((await kubeletArgv('kube2')).some((a) => a.startsWith('--hostname-override'))).toBe(false);
    });

    it('kube2: the image’s /etc/default/kubelet ends kubelet’s command line from its first start; kube1’s hand-made one is gone', async () => {
      expect(await inMachine('kube2', ['cat', KUBELET_HOOKS.envFile.path])).toBe(
        KUBELET_HOOKS.envFile.content,
      );
      expect(await kubeletArgv('kube2')).toEqual([...AGENTD_KUBELET_ARGS, ...KUBELET_HOOKS.envFile.argv]);
    });

    it('kube2: the image’s static pod is in kubelet’s staticPodPath (0700); kube1’s hand-made one is gone', async () => {
      const staticPodPath = (await kubeletConfig('kube2')).staticPodPath as string;
      expect(staticPodPath).toBe('/etc/kubernetes/manifests/');
      expect((await inMachine('kube2', ['stat', '-c', '%a', staticPodPath])).trim()).toBe('700');
      expect((await inMachine('kube2', ['ls', staticPodPath])).split('\n').filter(Boolean)).toEqual([
        path.basename(KUBELET_HOOKS.manifest.path),
      ]);
      expect(await inMachine('kube2', ['cat', KUBELET_HOOKS.manifest.path])).toBe(
        KUBELET_HOOKS.manifest.content,
      );
    });

    it('kube2: the operator’s conf.d drop-in, carried, is merged into what containerd loaded; certs.d carried too', async () => {
      expect(await inMachine('kube2', ['cat', OPERATOR_DROP_IN.path])).toBe(OPERATOR_DROP_IN.content);
      expect(await inMachine('kube2', ['cat', OPERATOR_HOSTS.path])).toBe(OPERATOR_HOSTS.content);
      const loaded = await containerdLoaded('kube2');
      expect(loaded.imports).toBe(`['/etc/containerd/config.toml', '${OPERATOR_DROP_IN.path}']`);
      // The drop-in's key wins, its runtime joins agentd's, and agentd's other keys stay.
      expect(loaded.keys.get(`${CRI_IMAGES}.snapshotter`)).toBe("'native'");
      expect(loaded.keys.get(`${CRI_RUNTIME}.containerd.runtimes.kata.runtime_type`)).toBe(
        "'io.containerd.kata.v2'",
      );
      expect(loaded.keys.get(`${CRI_RUNTIME}.containerd.default_runtime_name`)).toBe("'runc'");
      expect(loaded.keys.get(`${CRI_RUNTIME}.containerd.runtimes.untrusted.options.NoNewKeyring`)).toBe(
        'true',
      );
      expect(loaded.keys.get(`${CRI_IMAGES}.pinned_images.sandbox`)).toBe(
        "'mcr.microsoft.com/oss/kubernetes/pause:3.9'",
      );
      expect(loaded.keys.get(`${CRI_IMAGES}.registry.config_path`)).toBe("'/etc/containerd/certs.d'");
      // No GPU on this host: no nvidia runtime.
      expect([...loaded.keys.keys()].filter((k) => k.includes('nvidia'))).toEqual([]);
    });
  },
);
