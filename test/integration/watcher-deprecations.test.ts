// Why the fake API server (test/support/fake-kube): no fault: any API server the watcher talks to; portable.
/**
 * What the Machine watcher leaves in the journal besides agentd's own log lines: nothing. The
 * Kubernetes client's HTTP library (node-fetch 2) parses request URLs with the deprecated
 * `url.parse()`, which Node 24 and later answer with a deprecation warning at the first request;
 * the bundle gives it a parser that does not (src/kube/node-fetch-url.ts). Node 20 prints that
 * warning only with `--pending-deprecation`, which this test sets, so it fails on every runtime
 * when the warning comes back. Needs `npm run build`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon, waitUntil } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';

describe('the Machine watcher on the bundle', () => {
  it('joins and watches without a deprecation warning on stderr', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    const dir = await makeTempDir('agentd-watch-deprecations-');
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const d = await startTestDaemon({
      args: ['--sim', '--kubeconfig', kubeconfig],
      env: { NODE_OPTIONS: '--pending-deprecation' },
    });
    const join = await rpcResult<{ state: string }>(d, 'update', { wait: true });
    expect(join.state).toBe('succeeded');
    await waitUntil(
      'the watcher to connect',
      async () => (await rpcResult<{ watcher: { connected: boolean } }>(d, 'status')).watcher.connected,
      d,
    );
    // It has registered the node (a request through node-fetch) and opened its watch.
    expect(kube.getMachine('sim-node')).toBeDefined();
    expect(d.logs()).not.toMatch(/DeprecationWarning|DEP0\d{3}/);
  });
});
