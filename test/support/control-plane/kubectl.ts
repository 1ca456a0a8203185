/**
 * The kubectl built from the same pinned module as the server (client and server match), run
 * with the admin kubeconfig, as an operator would run it.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function kubectl(
  bin: string,
  kubeconfig: string,
  args: string[],
  timeoutMs = 60_000,
): Promise<KubectlResult> {
  return new Promise((resolve) => {
    execFile(
      path.join(bin, 'kubectl'),
      [`--kubeconfig=${kubeconfig}`, ...args],
      {
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
        env: { ...process.env, KUBECTL_INTERACTIVE_DELETE: 'false' },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** kubectl, failing with its output unless it exits 0. */
export async function kubectlOk(bin: string, kubeconfig: string, args: string[]): Promise<string> {
  const r = await kubectl(bin, kubeconfig, args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
  return r.stdout;
}
