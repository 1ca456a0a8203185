// Why the fake API server (test/support/fake-kube): no fault: a drain a PDB holds open while agentctl is interrupted; portable (a real PDB allowing nothing holds it too).
/**
 * Ctrl-C and a lost daemon, as the operator meets them (docs/cli.md, exit codes): agentctl runs in
 * this process with its Ctrl-C handler captured, against a real `--sim` daemon reached through a
 * unix-socket proxy that sees every request.
 *
 * - Ctrl-C before the `update` request is sent: nothing is requested, nothing starts.
 * - Ctrl-C while the request is in flight: the operation the daemon created is cancelled at once,
 *   and the node is as it was (update, drain); one agentd cannot cancel (reset) is named, and
 *   agentctl detaches from it.
 * - The daemon dies while agentctl follows: agentctl names the operation and how to check on it.
 * - The connection closes after the update request went out, before any answer: the update may
 *   have started, and agentctl says how to find it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import { holdImagePulls } from '../support/holding-registry.js';
import {
  JOIN_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  type Op,
  type SimNode,
  waitFor,
} from '../support/sim-node.js';
import { runInProcess } from '../support/unanswering-daemon.js';

interface Proxy {
  socket: string;
  /** Method names of the JSON-RPC requests that went through, in order. */
  methods: string[];
}

/**
 * A unix-socket proxy to `target` that calls `onRequest(method)` as each RPC request passes. A
 * request naming `cutOn` goes on to the daemon, but the proxy closes agentctl's connection without
 * a byte of the answer (as a daemon that stops or dies as the request comes in).
 */
async function startProxy(
  target: string,
  onRequest: (method: string) => void,
  options: { cutOn?: string } = {},
): Promise<Proxy> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-proxy-'));
  const socket = path.join(dir, 'proxy.sock');
  const methods: string[] = [];
  const conns = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target);
    conns.add(client).add(upstream);
    let cut = false;
    client.on('data', (chunk: Buffer) => {
      for (const m of chunk.toString('utf8').matchAll(/"method":"([^"]+)"/g)) {
        methods.push(m[1] as string);
        onRequest(m[1] as string);
        if (m[1] === options.cutOn) cut = true;
      }
      upstream.write(chunk);
      if (cut) {
        upstream.unpipe(client);
        client.end();
      }
    });
    upstream.pipe(client);
    const close = (): void => {
      client.destroy();
      // A cut request still gets the daemon's answer (into the void): the daemon sees no hang-up.
      if (!cut) upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    upstream.on('data', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  onTestFinished(async () => {
    for (const c of conns) c.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });
  return { socket, methods };
}

/** Run agentctl in this process; `onInterruptInstalled` gets its Ctrl-C handler once it installs one. */
function agentctl(
  args: string[],
  onInterruptInstalled: (fire: () => void) => void = () => undefined,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return runInProcess(args, os.tmpdir(), { onInstalled: onInterruptInstalled }).done;
}

describe('agentctl and Ctrl-C, and a daemon lost while following', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('Ctrl-C before the update request is sent: nothing is requested, nothing starts', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = await node.operations();
    const proxy = await startProxy(node.socket, () => undefined);

    // The Ctrl-C arrives as soon as agentctl takes it over, before the request goes out.
    const r = await agentctl(['--socket', proxy.socket, 'update', '--kubernetes-version', '1.35.0'], (fire) =>
      fire(),
    );
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain('interrupted before the update was requested; nothing was started');
    expect(proxy.methods).not.toContain('update');
    expect(await node.operations()).toEqual(before);
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });

  it('Ctrl-C while the update request is in flight: the new operation is cancelled at once', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const registry = await holdImagePulls(node);
    let fire: (() => void) | undefined;
    // The Ctrl-C arrives while the daemon is creating the operation: after the request left
    // agentctl, before the answer (with the operation's id) came back.
    const proxy = await startProxy(node.socket, (method) => {
      if (method === 'update') fire?.();
    });

    const r = await agentctl(
      ['--socket', proxy.socket, '--json', 'update', '--image', registry.image],
      (handler) => (fire = handler),
    );
    expect(r.code, r.stderr).toBe(130);
    expect(proxy.methods.slice(0, 3)).toEqual(['update', 'operations.cancel', 'operations.wait']);
    const printed = JSON.parse(r.stdout) as Op;
    expect(printed.state).toBe('cancelled');
    // Said at the Ctrl-C, before the answer came; then what became of the update.
    expect(r.stderr).toContain(
      'interrupted: agentd has not answered the update request yet; waiting for its answer to cancel the update it may have started',
    );
    expect(r.stderr).toContain(
      `interrupted: cancelled update ${printed.id} as it started; nothing was changed`,
    );
    const [newest] = await node.operations();
    expect(newest).toMatchObject({ id: printed.id, kind: 'update', state: 'cancelled' });
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });

  it('the daemon dies while agentctl follows: the operation id and how to check on it', async () => {
    const node = await cloneSimNode(template);
    const daemon = await node.start();
    const registry = await holdImagePulls(node);
    // The update stays in provision (its pull is held); then the daemon is killed.
    const killed = registry.blobRequested.then(() => daemon.kill());

    const r = await agentctl(['--socket', node.socket, '--json', 'update', '--image', registry.image]);
    expect(r.code, r.stderr).toBe(3);
    const printed = JSON.parse(r.stdout) as {
      error: { operation: string; message: string; exitCode: number };
    };
    const id = printed.error.operation;
    expect(id).toMatch(/^op-/);
    expect(printed.error.exitCode).toBe(3);
    const resume = `agentctl --socket ${node.socket} ops wait ${id}`;
    expect(printed.error.message).toContain(
      `following update ${id} stopped, it may still be running: ${resume}`,
    );
    expect(r.stderr).toContain(resume);

    // What the message promises: once agentd is back, that command gives the operation's end
    // (here recovery closed it: agentd was killed during it).
    await killed; // agentctl may see the socket close before the process is reaped
    await node.start();
    const again = await agentctl(['--socket', node.socket, '--json', 'ops', 'wait', id]);
    expect((JSON.parse(again.stdout) as Op).state).toBe('interrupted');
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });

  it('Ctrl-C while the reset request is in flight: agentctl names the reset and detaches (it cannot be cancelled)', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    let fire: (() => void) | undefined;
    const proxy = await startProxy(node.socket, (method) => {
      if (method === 'reset') fire?.();
    });

    const r = await agentctl(
      ['--socket', proxy.socket, '--json', 'reset', '--yes'],
      (handler) => (fire = handler),
    );
    expect(r.code, r.stderr).toBe(130);
    // Said at the Ctrl-C, before the answer came.
    expect(r.stderr).toContain(
      'interrupted: agentd has not answered the reset request yet; waiting for its answer to name the reset it may have started, which cannot be cancelled',
    );
    // No cancel is tried: agentd refuses to cancel a reset.
    expect(proxy.methods).not.toContain('operations.cancel');
    const printed = JSON.parse(r.stdout) as Op;
    expect(printed.kind).toBe('reset');
    expect(r.stderr).toContain(
      `detached; reset ${printed.id} keeps running. Follow it again with: agentctl --socket ${proxy.socket} ops wait ${printed.id}`,
    );
    // What the message promises: that command follows the reset to its end.
    const again = await agentctl(['--socket', node.socket, '--json', 'ops', 'wait', printed.id]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: printed.id, kind: 'reset', state: 'succeeded' });
  });

  it('Ctrl-C while the drain request is in flight: the new drain is cancelled at once', async () => {
    const NODE = 'sim-node';
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode(NODE, {});
    // The drain waits on this pod (its PodDisruptionBudget never allows an eviction) until cancelled.
    kube.addPod({ name: 'web-1', nodeName: NODE, labels: { app: 'web' } });
    kube.addPdb({ name: 'web', selector: { matchLabels: { app: 'web' } }, disruptionsAllowed: 0 });
    const dir = await makeTempDir('agentd-cli-interrupt-drain-');
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const d = await startTestDaemon({
      args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NODE, '--no-watch'],
    });
    let fire: (() => void) | undefined;
    const proxy = await startProxy(d.socket, (method) => {
      if (method === 'drain') fire?.();
    });

    const r = await agentctl(
      ['--socket', proxy.socket, '--json', 'drain', '--timeout', '5m'],
      (handler) => (fire = handler),
    );
    expect(r.code, r.stderr).toBe(130);
    expect(proxy.methods.slice(0, 3)).toEqual(['drain', 'operations.cancel', 'operations.wait']);
    const printed = JSON.parse(r.stdout) as Op;
    expect(printed).toMatchObject({ kind: 'drain', state: 'cancelled' });
    expect(r.stderr).toContain(
      'interrupted: agentd has not answered the drain request yet; waiting for its answer to cancel the drain it may have started',
    );
    expect(r.stderr).toContain(
      `interrupted: cancelled drain ${printed.id} as it started; pods it evicted stay evicted, and any cordon it made stays until: agentctl --socket ${proxy.socket} uncordon`,
    );
    expect(kube.getPod('default', 'web-1')).toBeDefined();
  });

  it('the connection closes after the update request went out, before any answer: the update may have started', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = await node.operations();
    const proxy = await startProxy(node.socket, () => undefined, { cutOn: 'update' });

    const r = await agentctl([
      '--socket',
      proxy.socket,
      '--json',
      'update',
      '--kubernetes-version',
      '1.35.0',
    ]);
    expect(r.code, r.stderr).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'UNREACHABLE', exitCode: 3, reason: 'closed', mayHaveStarted: true },
    });
    expect(r.stderr).toContain(
      `closed the connection without answering the update request; the update may have started on the daemon all the same: once agentd answers again, see it with: agentctl --socket ${proxy.socket} ops list`,
    );
    // It had started: `ops list` shows it (agentd creates it as it reads the request, so it
    // may not be there yet), and `ops wait ID` follows it to its end.
    const known = new Set(before.map((o) => o.id));
    let newest: Op | undefined;
    await waitFor('the update in the operations list', async () => {
      const list = await agentctl(['--socket', node.socket, '--json', 'ops', 'list']);
      newest = (JSON.parse(list.stdout) as { operations: Op[] }).operations.find((o) => !known.has(o.id));
      return newest !== undefined;
    });
    expect(newest?.kind).toBe('update');
    const again = await agentctl(['--socket', node.socket, '--json', 'ops', 'wait', newest!.id]);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: newest!.id, kind: 'update', state: 'succeeded' });
    await expectSingleMachine(node, { active: 'kube2', version: '1.35.0' });
  });
});
