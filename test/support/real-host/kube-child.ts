/**
 * The fake API server (test/support/fake-kube) as a process of its own, for the real-host suite:
 * started in a host's network namespace (`ip netns exec`), where the test process cannot listen.
 * It writes a kubeconfig for itself (plain HTTP on 127.0.0.1 of that namespace) to KUBECONFIG_OUT,
 * then prints one line of JSON: its URL and its admin token, for the test's own requests.
 * usage: node --import tsx kube-child.ts KUBECONFIG_OUT
 */
import { writeFile } from 'node:fs/promises';
import { startFakeKube } from '../fake-kube.js';

const out = process.argv[2];
if (!out) throw new Error('usage: kube-child.ts KUBECONFIG_OUT');
const kube = await startFakeKube();
await writeFile(out, kube.kubeconfigYaml(), { mode: 0o600 });
process.stdout.write(`${JSON.stringify({ url: kube.url, token: kube.token })}\n`);
const close = (): void => void kube.close().then(() => process.exit(0));
process.once('SIGTERM', close);
process.once('SIGINT', close);
