/**
 * The operator's kubeconfig of `agentctl fleet pause|resume` (src/kube/kubeconfig.ts), found as
 * kubectl finds it: --kubeconfig, else KUBECONFIG's files merged, else ~/.kube/config; --context
 * instead of the current one. Every failure is INVALID_CONFIG and names the file.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadKubeconfig, loadOperatorKubeconfig } from '../../../src/kube/kubeconfig.js';

/** A kubeconfig with one context per entry, each naming its own cluster and user. */
function kubeconfig(contexts: Array<{ name: string; server: string }>, current?: string): string {
  const lines = ['apiVersion: v1', 'kind: Config', 'clusters:'];
  for (const c of contexts) lines.push(`  - name: ${c.name}`, '    cluster:', `      server: ${c.server}`);
  lines.push('users:');
  for (const c of contexts) lines.push(`  - name: ${c.name}`, '    user:', `      token: token-${c.name}`);
  lines.push('contexts:');
  for (const c of contexts)
    lines.push(`  - name: ${c.name}`, '    context:', `      cluster: ${c.name}`, `      user: ${c.name}`);
  if (current !== undefined) lines.push(`current-context: ${current}`);
  return `${lines.join('\n')}\n`;
}

let dir: string;
let home: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-kubeconfig-'));
  home = path.join(dir, 'home');
  await mkdir(path.join(home, '.kube'), { recursive: true });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const load = (o: { kubeconfig?: string; context?: string; env?: NodeJS.ProcessEnv }) =>
  loadOperatorKubeconfig({ ...o, env: o.env ?? { HOME: home }, homedir: '/nonexistent', cwd: dir });

function failure(fn: () => unknown): { code?: string; message: string; data?: Record<string, unknown> } {
  try {
    fn();
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('expected it to throw');
}

describe('the operator kubeconfig', () => {
  it('takes --kubeconfig first, relative to the working directory, over KUBECONFIG and ~/.kube/config', async () => {
    await writeFile(
      path.join(dir, 'ops.yaml'),
      kubeconfig([{ name: 'ops', server: 'https://ops:6443' }], 'ops'),
    );
    await writeFile(
      path.join(dir, 'env.yaml'),
      kubeconfig([{ name: 'env', server: 'https://env:6443' }], 'env'),
    );
    await writeFile(
      path.join(home, '.kube/config'),
      kubeconfig([{ name: 'home', server: 'https://h:6443' }], 'home'),
    );
    const env = { HOME: home, KUBECONFIG: path.join(dir, 'env.yaml') };
    expect(load({ kubeconfig: 'ops.yaml', env })).toMatchObject({
      source: '--kubeconfig',
      files: [path.join(dir, 'ops.yaml')],
      context: 'ops',
      server: 'https://ops:6443',
    });
    expect(load({ env })).toMatchObject({ source: 'KUBECONFIG', context: 'env', server: 'https://env:6443' });
    expect(load({})).toMatchObject({
      source: '~/.kube/config',
      files: [path.join(home, '.kube/config')],
      context: 'home',
    });
  });

  it('merges the KUBECONFIG files as kubectl does: missing ones skipped, the first name and current-context win', async () => {
    const a = path.join(dir, 'a.yaml');
    const b = path.join(dir, 'b.yaml');
    // a has no current-context; both define "shared", a's server wins.
    await writeFile(a, kubeconfig([{ name: 'shared', server: 'https://a:6443' }]));
    await writeFile(
      b,
      kubeconfig(
        [
          { name: 'shared', server: 'https://b:6443' },
          { name: 'only-b', server: 'https://only-b:6443' },
        ],
        'shared',
      ),
    );
    const env = { HOME: home, KUBECONFIG: [path.join(dir, 'gone.yaml'), a, b].join(path.delimiter) };
    const kc = load({ env });
    expect(kc).toMatchObject({ files: [a, b], context: 'shared', server: 'https://a:6443' });
    expect(load({ env, context: 'only-b' })).toMatchObject({
      context: 'only-b',
      server: 'https://only-b:6443',
    });
  });

  it('--context picks another context; an unknown one is named with those there are', async () => {
    const file = path.join(dir, 'two.yaml');
    await writeFile(
      file,
      kubeconfig(
        [
          { name: 'prod', server: 'https://prod:6443' },
          { name: 'lab', server: 'https://lab:6443' },
        ],
        'prod',
      ),
    );
    expect(load({ kubeconfig: file, context: 'lab' })).toMatchObject({
      context: 'lab',
      server: 'https://lab:6443',
    });
    expect(failure(() => load({ kubeconfig: file, context: 'staging' }))).toMatchObject({
      code: 'INVALID_CONFIG',
      message: `--context staging: --kubeconfig ${file} has no such context (it has prod, lab)`,
      data: { option: 'context', context: 'staging' },
    });
  });

  it('a --kubeconfig that is missing, unreadable, empty or not a kubeconfig: INVALID_CONFIG naming the file', async () => {
    const missing = path.join(dir, 'missing.yaml');
    expect(failure(() => load({ kubeconfig: missing }))).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringMatching(new RegExp(`^--kubeconfig ${missing}: cannot read it: .*ENOENT`)),
      data: { option: 'kubeconfig', file: missing },
    });
    expect(failure(() => load({ kubeconfig: dir })).message).toMatch(
      new RegExp(`^--kubeconfig ${dir}: cannot read it: .*EISDIR`),
    );
    const empty = path.join(dir, 'empty.yaml');
    await writeFile(empty, '\n');
    expect(failure(() => load({ kubeconfig: empty })).message).toBe(
      `--kubeconfig ${empty}: the file is empty: expected a kubeconfig (kind: Config)`,
    );
    // A YAML error says where, but not the lines around it: they may hold a token or a key.
    const garbled = path.join(dir, 'garbled.yaml');
    await writeFile(garbled, 'users:\n- name: u\n  user:\n    token: s3cr3t-t0ken\n  bad: [\n');
    expect(failure(() => load({ kubeconfig: garbled })).message).toBe(
      `--kubeconfig ${garbled}: not a kubeconfig: unexpected end of the stream within a flow collection (line 6, column 1)`,
    );
    if (process.getuid?.() !== 0) {
      const secret = path.join(dir, 'secret.yaml');
      await writeFile(secret, kubeconfig([{ name: 'x', server: 'https://x' }], 'x'));
      await chmod(secret, 0o000);
      expect(failure(() => load({ kubeconfig: secret })).message).toMatch(/cannot read it: .*EACCES/);
    }
  });

  it('no current-context, or one naming what the file lacks: says so, with the contexts there are', async () => {
    const file = path.join(dir, 'nocurrent.yaml');
    await writeFile(file, kubeconfig([{ name: 'a', server: 'https://a' }]));
    expect(failure(() => load({ kubeconfig: file })).message).toBe(
      `--kubeconfig ${file}: no current-context: pass --context NAME (it has a)`,
    );
    const dangling = path.join(dir, 'dangling.yaml');
    await writeFile(
      dangling,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: []',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: c, context: {cluster: nowhere, user: u}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
    expect(failure(() => load({ kubeconfig: dangling })).message).toBe(
      `--kubeconfig ${dangling}: context "c" names cluster "nowhere", which is not defined there`,
    );
  });

  it("nothing found: names KUBECONFIG's files, or ~/.kube/config and the way to pass one", () => {
    const gone = path.join(dir, 'gone.yaml');
    expect(failure(() => load({ env: { HOME: home, KUBECONFIG: gone } }))).toMatchObject({
      code: 'INVALID_CONFIG',
      message: `KUBECONFIG=${gone}: the file does not exist; pass --kubeconfig FILE`,
    });
    expect(failure(() => load({}))).toMatchObject({
      code: 'INVALID_CONFIG',
      message: `no kubeconfig: no --kubeconfig, KUBECONFIG is not set, and ${path.join(home, '.kube/config')} does not exist; pass your kubeconfig with --kubeconfig FILE`,
    });
    // Without HOME, the user's home directory as the system says it.
    expect(failure(() => loadOperatorKubeconfig({ env: {}, homedir: dir, cwd: dir })).message).toContain(
      `${path.join(dir, '.kube/config')} does not exist`,
    );
  });

  it("relative certificate paths are the file's directory's, as kubectl reads them", async () => {
    const sub = path.join(dir, 'sub');
    await mkdir(sub);
    const file = path.join(sub, 'cert.yaml');
    await writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://c", certificate-authority: ca.pem}}]',
        'users: [{name: u, user: {client-certificate: me.pem, client-key: me.key}}]',
        'contexts: [{name: c, context: {cluster: c, user: u}}]',
        'current-context: c',
        '',
      ].join('\n'),
    );
    const { kc } = load({ kubeconfig: file });
    expect(kc.getCurrentCluster()?.caFile).toBe(path.join(sub, 'ca.pem'));
    expect(kc.getCurrentUser()).toMatchObject({
      certFile: path.join(sub, 'me.pem'),
      keyFile: path.join(sub, 'me.key'),
    });
  });
});

describe("agentd's --kubeconfig", () => {
  it('loads the file with its current context, and names the flag in every error', async () => {
    const file = path.join(dir, 'agentd.yaml');
    await writeFile(file, kubeconfig([{ name: 'n', server: 'https://n:6443' }], 'n'));
    expect(loadKubeconfig(file).getCurrentCluster()?.server).toBe('https://n:6443');
    await writeFile(file, kubeconfig([{ name: 'n', server: 'https://n:6443' }], 'other'));
    expect(failure(() => loadKubeconfig(file))).toMatchObject({
      code: 'INVALID_CONFIG',
      message: `--kubeconfig ${file}: no context named "other" (it has n)`,
      data: { option: 'kubeconfig', file },
    });
  });
});
