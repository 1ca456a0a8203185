/**
 * The remediation scripts in examples/ run as documented against the real daemon (`--sim`,
 * without Kubernetes: SKIP_DRAIN=1): join or repave, update, check — with agentctl and with curl.
 */
import { chmod, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENTCTL_BIN, runAgentctl } from '../support/cli.js';
import { REPO_ROOT, childEnv, makeTempDir, type TestDaemon } from '../support/daemon.js';
import { SYSTEM_TESTS_REQUIRED, hasTool, startSimDaemon } from '../support/provision-fixtures.js';

const tools = ['jq', 'curl', 'bash'].filter((t) => !hasTool(t));

describe.skipIf(tools.length > 0 && !SYSTEM_TESTS_REQUIRED)(`examples/ (needs jq, curl, bash)`, () => {
  let d: TestDaemon;
  let bin: string;
  beforeAll(async () => {
    d = await startSimDaemon();
    bin = await makeTempDir('agentctl-bin-');
    // agentctl on PATH, as `npm link` or a package install would put it.
    await writeFile(
      path.join(bin, 'agentctl'),
      `#!/bin/sh\nexec '${process.execPath}' '${AGENTCTL_BIN}' "$@"\n`,
    );
    await chmod(path.join(bin, 'agentctl'), 0o755);
  });
  afterAll(async () => {
    await d?.dispose();
    // Made in beforeAll, outside any test: makeTempDir leaves it to us.
    if (bin) await rm(bin, { recursive: true, force: true });
  });

  function script(name: string, ...args: string[]): Promise<{ code: number; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        'bash',
        [path.join(REPO_ROOT, 'examples', name), ...args],
        {
          env: childEnv({
            AGENTD_SOCKET: d.socket,
            SKIP_DRAIN: '1',
            PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}`,
          }),
          timeout: 60_000,
        },
        (err, _stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stderr }),
      );
    });
  }

  async function node(): Promise<{ activeMachine: string; applied: { kubernetesVersion: string } }> {
    return (
      JSON.parse((await runAgentctl(['--socket', d.socket, '--json', 'status'])).stdout) as { node: never }
    ).node;
  }

  it('remediate-node.sh: joins a fresh node (repave without a version), then updates it', async () => {
    const join = await script('remediate-node.sh');
    expect(join.code, join.stderr).toBe(0);
    expect(join.stderr).toContain('healthy: kube1 runs kubelet (Kubernetes 1.34.0)');
    const update = await script('remediate-node.sh', '1.35.0');
    expect(update.code, update.stderr).toBe(0);
    expect(await node()).toMatchObject({ activeMachine: 'kube2', applied: { kubernetesVersion: '1.35.0' } });
  });

  it('remediate-node.sh: a bad version is agentctl exit 2, passed on', async () => {
    const r = await script('remediate-node.sh', 'banana');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--kubernetes-version');
  });

  it('remediate-node-curl.sh: the same with curl --unix-socket', async () => {
    const r = await script('remediate-node-curl.sh', '1.36.0');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('healthy: kube1 runs kubelet (Kubernetes 1.36.0)');
    expect(await node()).toMatchObject({ activeMachine: 'kube1', applied: { kubernetesVersion: '1.36.0' } });
  });

  it('remediate-node-curl.sh: an invalid version is reported with its code, exit 1', async () => {
    const r = await script('remediate-node-curl.sh', 'banana');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('update: INVALID_PARAMS:');
  });
});
