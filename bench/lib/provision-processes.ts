/**
 * The child processes of `bench/provision.ts`: the artifact mirror, and each download client in a
 * process of its own (see `provision-download-client.ts`). Both are TypeScript entries run by
 * node with tsx and spoken to in JSON lines over stdin and stdout.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { DownloadVariant } from './provision-download-client.js';

/** CPU a process has used so far, in milliseconds (Linux `/proc`, 10 ms ticks). */
function cpuMsOf(pid: number | undefined): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface LineChild {
  /** The next JSON line the child writes. */
  next<T>(): Promise<T>;
  send(message: unknown): void;
  cpuMs(): number;
  stop(): Promise<void>;
}

function startLineChild(entry: string, args: readonly string[]): LineChild {
  const file = fileURLToPath(new URL(entry, import.meta.url));
  const child = execa(process.execPath, ['--import', 'tsx', file, ...args], {
    stdin: 'pipe',
    stderr: 'inherit',
    reject: false,
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const exited = child.then((r) => {
    throw new Error(`${entry} ${args.join(' ')} exited with code ${r.exitCode} before answering`);
  });
  // Handled here so an early exit is reported by the next `next()`, not as an unhandled rejection.
  exited.catch(() => undefined);
  return {
    async next<T>() {
      const line = await Promise.race([lines.next(), exited]);
      if (line.done) throw new Error(`${entry} closed its output`);
      return JSON.parse(line.value as string) as T;
    },
    send(message) {
      child.stdin!.write(`${JSON.stringify(message)}\n`);
    },
    cpuMs: () => cpuMsOf(child.pid),
    async stop() {
      child.stdin?.end();
      child.kill('SIGTERM');
      await child;
    },
  };
}

export interface MirrorProcess {
  baseUrl: string;
  /** CPU the mirror process has used so far, in milliseconds. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Start `provision-mirror-server.ts` and learn its port. */
export async function startMirrorProcess(): Promise<MirrorProcess> {
  const child = startLineChild('./provision-mirror-server.ts', []);
  const { port } = await child.next<{ port: number }>();
  return { baseUrl: `http://127.0.0.1:${port}`, cpuMs: child.cpuMs, stop: child.stop };
}

export interface DownloadClient {
  /** Download `url` into a fresh entry under `dir`: wall time and the client's CPU, in ms. */
  download(url: string, sha256: string, dir: string): Promise<{ ms: number; cpu: number }>;
  stop(): Promise<void>;
}

/** Start one download client of `provision-download-client.ts` in a process of its own. */
export function startDownloadClient(variant: DownloadVariant): DownloadClient {
  const child = startLineChild('./provision-download-client.ts', [variant]);
  return {
    async download(url, sha256, dir) {
      child.send({ url, sha256, dir });
      const { ms, cpuMs } = await child.next<{ ms: number; cpuMs: number }>();
      return { ms, cpu: cpuMs };
    },
    stop: child.stop,
  };
}
