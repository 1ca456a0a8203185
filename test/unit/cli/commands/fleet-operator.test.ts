/**
 * `agentctl fleet pause|resume` with the operator's kubeconfig (src/cli/commands/fleet.ts,
 * src/fleet/operator.ts): agentctl runs in this process, against the fake API server enforcing
 * deploy/rbac.yaml's roles, and no agentd at all (the socket names nothing): the change is made
 * with the kubeconfig, never through a daemon. Each failure has its code and exit status
 * (docs/errors.md, "agentctl errors").
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { operatorCliError } from '../../../../src/cli/commands/fleet.js';
import { runCli } from '../../../../src/cli/main.js';
import { systemClock } from '../../../../src/host/clock.js';
import { recordingStream } from '../../../support/cli.js';
import { startFakeKube, type FakeKube } from '../../../support/fake-kube.js';
import { rolesOfDeployRbac } from '../../../support/rbac-rules.js';

const NS = 'agentd-system';
const OPERATOR = 'operator-token';
const NODE = 'abcdef.0123456789abcdef';

let kube: FakeKube;
let dir: string;
let home: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-fleet-operator-'));
  home = path.join(dir, 'home');
  await mkdir(path.join(home, '.kube'), { recursive: true });
  kube = await startFakeKube({
    tokens: {
      [OPERATOR]: await rolesOfDeployRbac({ group: 'agentd:fleet-operators', user: 'alice' }),
      [NODE]: await rolesOfDeployRbac(),
    },
  });
});
afterEach(async () => {
  await kube.close();
  await rm(dir, { recursive: true, force: true });
});

/** Run agentctl in this process with `env` (HOME is the test's own), no daemon on its socket. */
async function agentctl(args: string[], env: NodeJS.ProcessEnv = {}) {
  const stdout = recordingStream();
  const stderr = recordingStream();
  const proc = { stdin: new PassThrough(), clock: systemClock, onInterrupt: () => () => undefined };
  const code = await runCli(['node', 'agentctl', '--socket', path.join(dir, 'no-agentd.sock'), ...args], {
    env: { HOME: home, ...env },
    cwd: dir,
    stdout,
    stderr,
    proc,
  });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

async function kubeconfigFile(name: string, token: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, kube.kubeconfigYaml(token));
  return file;
}

describe('agentctl fleet pause|resume with the operator kubeconfig', () => {
  it('--kubeconfig: pauses as the operator, without any agentd, and says with which credentials', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 3\n' });
    const file = await kubeconfigFile('ops.yaml', OPERATOR);
    const r = await agentctl(['fleet', 'pause', '--kubeconfig', 'ops.yaml']);
    expect(r, r.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toContain(
      `paused as context fake of ${file}: running updates finish, no new one takes a slot\n`,
    );
    expect(r.stdout).toContain(`fleet      paused  (namespace ${NS}, read with context fake)`);
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({
      'policy.yaml': 'maxConcurrent: 3\npaused: true\n',
    });
    const json = await agentctl(['--json', 'fleet', 'pause', '--kubeconfig', file]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      namespace: NS,
      kubeconfig: { source: '--kubeconfig', files: [file], context: 'fake', server: kube.url },
      paused: true,
      policy: { maxConcurrent: 3, paused: true },
    });
  });

  it('KUBECONFIG, then ~/.kube/config, as kubectl: resume clears the failures', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'paused: true\n' });
    const failures = [{ node: 'w1', operation: 'op-1', state: 'failed', message: 'x', at: 't' }];
    kube.putConfigMap(NS, 'agentd-fleet-state', { 'failures.json': JSON.stringify(failures) });
    const env = await kubeconfigFile('env.yaml', OPERATOR);
    const r = await agentctl(['--json', 'fleet', 'resume'], { KUBECONFIG: env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      clearedFailures: 1,
      status: { paused: false, kubeconfig: { source: 'KUBECONFIG', files: [env] } },
    });
    await writeFile(path.join(home, '.kube/config'), kube.kubeconfigYaml(OPERATOR));
    const human = await agentctl(['fleet', 'resume']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(
      new RegExp(
        `^resumed as context fake of ${path.join(home, '.kube/config')}: 0 recorded failure\\(s\\) cleared, paused: false\n`,
      ),
    );
  });

  it("a node's credentials: PERMISSION_DENIED (exit 1) naming the missing right and the Role that has it", async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 3\n' });
    const file = await kubeconfigFile('node.yaml', NODE);
    const r = await agentctl(['--json', 'fleet', 'pause', '--kubeconfig', file]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: {
        code: 'PERMISSION_DENIED',
        exitCode: 1,
        reason: 'Forbidden',
        right: `update configmaps agentd-fleet in namespace ${NS}`,
        verb: 'update',
        resource: 'configmaps',
        name: 'agentd-fleet',
        namespace: NS,
        context: 'fake',
      },
    });
    expect(r.stderr).toMatch(
      new RegExp(
        `^agentctl: fleet pause: the credentials of context fake of ${file} may not update configmaps agentd-fleet in namespace ${NS} \\(the API server: .+\\); pause needs the rights of the Role agentd-fleet-operator in ${NS} \\(deploy/rbac.yaml\\), bound to the group agentd:fleet-operators`,
      ),
    );
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({ 'policy.yaml': 'maxConcurrent: 3\n' });
  });

  it('a bad kubeconfig path, an unknown context, no kubeconfig at all: INVALID_CONFIG (exit 2) naming the file', async () => {
    const missing = path.join(dir, 'missing.yaml');
    const bad = await agentctl(['--json', 'fleet', 'resume', '--kubeconfig', missing]);
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stdout)).toMatchObject({
      error: { code: 'INVALID_CONFIG', exitCode: 2, option: 'kubeconfig', file: missing },
    });
    expect(bad.stderr).toMatch(new RegExp(`^agentctl: --kubeconfig ${missing}: cannot read it: .*ENOENT`));
    const file = await kubeconfigFile('ops.yaml', OPERATOR);
    const context = await agentctl(['fleet', 'pause', '--kubeconfig', file, '--context', 'prod']);
    expect(context.code).toBe(2);
    expect(context.stderr).toBe(
      `agentctl: --context prod: --kubeconfig ${file} has no such context (it has fake)\n`,
    );
    const none = await agentctl(['fleet', 'pause']);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(
      `agentctl: no kubeconfig: no --kubeconfig, KUBECONFIG is not set, and ${path.join(home, '.kube/config')} does not exist; pass your kubeconfig with --kubeconfig FILE\n`,
    );
    expect(kube.countRequests()).toBe(0);
  });

  it('--fleet-namespace: the fleet of that namespace; a name Kubernetes refuses is a usage error', async () => {
    kube.putConfigMap('pool-b', 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2\n' });
    const file = await kubeconfigFile('admin.yaml', kube.token);
    const r = await agentctl([
      '--json',
      'fleet',
      'pause',
      '--kubeconfig',
      file,
      '--fleet-namespace',
      'pool-b',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ namespace: 'pool-b', paused: true });
    expect(kube.getConfigMap('pool-b', 'agentd-fleet')?.data).toEqual({
      'policy.yaml': 'maxConcurrent: 2\npaused: true\n',
    });
    expect(kube.getConfigMap(NS, 'agentd-fleet')).toBeUndefined();
    const usage = await agentctl(['fleet', 'pause', '--kubeconfig', file, '--fleet-namespace', 'Pool_B']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain(
      'agentctl: --fleet-namespace: expected a Kubernetes namespace name: lowercase letters, digits and -, at most 63, such as agentd-system, got "Pool_B"',
    );
  });

  it('--timeout passes before the API server answers the write: TIMEOUT (exit 5), the pause may have taken effect', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 3\n' });
    kube.delay(2_000, { verb: 'update', resource: 'configmaps' });
    const file = await kubeconfigFile('ops.yaml', OPERATOR);
    const r = await agentctl(['--json', '--timeout', '300ms', 'fleet', 'pause', '--kubeconfig', file]);
    expect(r.code).toBe(5);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'TIMEOUT', exitCode: 5, mayHaveStarted: true },
    });
    expect(r.stderr).toMatch(
      /^agentctl: the Kubernetes API server did not answer within 300ms \(--timeout\): update ConfigMap agentd-system\/agentd-fleet: cancelled; the pause may have taken effect all the same: see whether it did with: kubectl -n agentd-system get configmap agentd-fleet agentd-fleet-state -o yaml/,
    );
  });
});

describe('operatorCliError', () => {
  it('gives each failure of the operator code its agentctl code and exit status; anything else passes on', () => {
    const conflict = {
      code: 'KUBE_CONFLICT',
      message: 'update ConfigMap x: conflict',
      data: { reason: 'Conflict' },
    };
    expect(operatorCliError(conflict, null)).toMatchObject({
      exitCode: 1,
      details: { code: 'KUBE_CONFLICT', reason: 'Conflict' },
    });
    const lost = {
      code: 'KUBE_UNAVAILABLE',
      message: 'm',
      data: { reason: 'Unreachable', mayHaveStarted: true },
    };
    expect(operatorCliError(lost, null)).toMatchObject({
      exitCode: 1,
      details: { code: 'KUBE_UNAVAILABLE', mayHaveStarted: true },
    });
    expect(
      operatorCliError({ code: 'KUBE_UNAVAILABLE', message: 'm', data: { reason: 'Forbidden' } }, null),
    ).toMatchObject({
      exitCode: 1,
      details: { code: 'PERMISSION_DENIED' },
    });
    // A cancel the deadline did not cause, and what is no agentd error, are not renamed.
    const cancelled = { code: 'CANCELLED', message: 'x: cancelled', data: {} };
    expect(operatorCliError(cancelled, null)).toBe(cancelled);
    const bug = new TypeError('x is not a function');
    expect(operatorCliError(bug, 1000)).toBe(bug);
  });
});
