/** Fixtures for the artifact tests: a mirror on 127.0.0.1, a fake clock, temp dirs, a file walker. */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import {
  agentConfigSchema,
  type AgentConfig,
  type AgentConfigInput,
} from '../../../../src/config/agent-config.js';
import type { Clock } from '../../../../src/host/types.js';
import {
  createArtifactHandler,
  mirrorDownloads,
  type ArtifactFault,
  type ArtifactHandlerOptions,
} from '../../../../src/sim/mirror/artifacts.js';
import { makeAgentConfig } from '../../../support/agent-config.js';

export interface TestMirror {
  baseUrl: string;
  faults: ArtifactFault[];
  requests: Array<{ method: string; path: string }>;
  close(): Promise<void>;
}

/** The artifact handler on a node:http server bound to 127.0.0.1, port 0. */
export async function startMirror(options: ArtifactHandlerOptions = {}): Promise<TestMirror> {
  const faults: ArtifactFault[] = options.faults ?? [];
  const requests: Array<{ method: string; path: string }> = [];
  const handler = createArtifactHandler({ ...options, faults, onRequest: (r) => requests.push(r) });
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://mirror.test');
    handler(req, res, url).then(
      (handled) => {
        if (!handled) res.writeHead(404, { 'content-length': 0 }).end();
      },
      (err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    faults,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A clock whose sleeps return at once and are recorded. */
export function fakeClock(): { clock: Clock; sleeps: number[] } {
  let now = 0;
  const sleeps: number[] = [];
  return {
    sleeps,
    clock: {
      now: () => now,
      sleep: async (ms, signal) => {
        signal?.throwIfAborted();
        sleeps.push(ms);
        now += ms;
      },
    },
  };
}

/** A parsed agent config whose downloads point at `baseUrl`. */
export function mirrorConfig(baseUrl: string, overrides: Partial<AgentConfigInput> = {}): AgentConfig {
  return agentConfigSchema.parse({ ...makeAgentConfig(), Downloads: mirrorDownloads(baseUrl), ...overrides });
}

/** Temp dirs created by a test, removed by `cleanup`. */
export function tempDirs(): { make(prefix?: string): Promise<string>; cleanup(): Promise<void> } {
  const dirs: string[] = [];
  return {
    async make(prefix = 'agentd-artifacts-') {
      const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    async cleanup() {
      await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}

/** Every file and symlink under `dir`, as sorted paths relative to it (directories omitted). */
export async function walkFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => !e.isDirectory())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/** A fresh undici Agent for one test (closed by the test), so no socket outlives its server. */
export function testDispatcher(): Agent {
  return new Agent({ keepAliveTimeout: 1_000 });
}

export const ALL_INSTALLED_FILES = [
  'opt/cni/bin/bridge',
  'opt/cni/bin/host-local',
  'opt/cni/bin/loopback',
  'opt/cni/bin/portmap',
  'usr/local/bin/containerd',
  'usr/local/bin/containerd-shim-runc-v2',
  'usr/local/bin/containerd-stress',
  'usr/local/bin/crictl',
  'usr/local/bin/ctr',
  'usr/local/bin/kube-proxy',
  'usr/local/bin/kubectl',
  'usr/local/bin/kubelet',
  'usr/local/bin/runc',
].sort();
