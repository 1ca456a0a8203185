/** Start `provision-mirror-server.ts` in a child process and learn its port. */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

export interface MirrorProcess {
  baseUrl: string;
  /** CPU the mirror process has used so far, in milliseconds (Linux `/proc`, 10 ms ticks). */
  cpuMs(): number;
  stop(): Promise<void>;
}

export async function startMirrorProcess(): Promise<MirrorProcess> {
  const entry = fileURLToPath(new URL('./provision-mirror-server.ts', import.meta.url));
  const child = execa(process.execPath, ['--import', 'tsx', entry], {
    stdin: 'pipe',
    stderr: 'inherit',
    reject: false,
  });
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    lines.once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) =>
      reject(new Error(`mirror process exited with code ${code} before listening`)),
    );
  });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    cpuMs() {
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10;
    },
    async stop() {
      lines.close();
      child.stdin?.end();
      child.kill('SIGTERM');
      await child;
    },
  };
}
