/**
 * The README's "Try it out", followed in order as a new user would: every command of its `sh`
 * blocks, in one directory, with `npm start` (and its environment) starting `agentd --sim` there
 * as `npm start` does, and `npx agentctl` running this checkout's agentctl. Each command exits as
 * its comment says (`(exit N)`, else 0), and the rollback demo ends `rolled_back` with the old
 * machine serving. Needs `npm run build` (and bash; curl for the curl line).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { AGENTCTL_BIN } from '../support/cli.js';
import { REPO_ROOT, childEnv, makeTempDir, startTestDaemon, type TestDaemon } from '../support/daemon.js';
import { hasTool } from '../support/system-tools.js';

interface Step {
  command: string;
  /** The exit code its comment gives, else 0. */
  exit: number;
  comment: string;
}

/** The commands of the `sh` blocks of the README's "Try it out", in order. */
async function tryItOut(): Promise<Step[]> {
  const readme = await readFile(`${REPO_ROOT}/README.md`, 'utf8');
  const section = /\n## Try it out\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  const steps: Step[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.replace(/\\\n\s*/g, ' ').split('\n')) {
      if (line.trim() === '') continue;
      const hash = line.indexOf('  #');
      const command = (hash >= 0 ? line.slice(0, hash) : line).trim();
      const comment = hash >= 0 ? line.slice(hash + 3).trim() : '';
      const exit = Number(/\(exit (\d+)\)/.exec(comment)?.[1] ?? 0);
      steps.push({ command, exit, comment });
    }
  }
  return steps;
}

/** Run one shell line in `cwd`, `npx agentctl` being this checkout's agentctl. */
function sh(line: string, cwd: string): Promise<{ code: number | null; out: string }> {
  const prelude = `npx() { [ "$1" = agentctl ] || exit 127; shift; '${process.execPath}' '${AGENTCTL_BIN}' "$@"; }\n`;
  return new Promise((resolve, reject) => {
    const proc = spawn('bash', ['-c', prelude + line], {
      cwd,
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    proc.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    proc.on('error', reject);
    proc.on('close', (code) => resolve({ code, out }));
  });
}

describe.skipIf(!hasTool('bash'))('README: Try it out, in order', () => {
  it(
    'runs every command as the README says, and its rollback demo rolls back',
    { timeout: 120_000 },
    async () => {
      const steps = await tryItOut();
      // What the demo shows: a join, a switch to 1.35.0, a restart with a fault and a rollback.
      expect(steps.map((s) => s.command)).toEqual(
        expect.arrayContaining([
          'npx agentctl update',
          'npx agentctl update --kubernetes-version 1.35.0',
          "AGENTD_SIM_FAULTS='kubelet-inactive:*' npm start",
        ]),
      );
      const dir = await makeTempDir('agentd-readme-');
      const start = (env: Record<string, string>): Promise<TestDaemon> =>
        startTestDaemon({ simDefaults: true, dir, env });
      // "With `npm start` running, in a second terminal in the same directory".
      let daemon: TestDaemon | null = await start({});
      let rolledBack = false;
      try {
        for (const step of steps) {
          const npmStart = /^((?:[A-Z_]+=\S+\s+)*)npm start$/.exec(step.command);
          if (npmStart) {
            expect(daemon, 'npm start while the daemon runs').toBeNull();
            const env: Record<string, string> = {};
            for (const m of (npmStart[1] ?? '').matchAll(/([A-Z_]+)=(\S+)/g))
              env[m[1]!] = m[2]!.replace(/^'(.*)'$/, '$1');
            daemon = await start(env);
            continue;
          }
          if (step.command.startsWith('curl ') && !hasTool('curl')) continue;
          const r = await sh(step.command, dir);
          expect(r.code, `${step.command}\n${r.out}`).toBe(step.exit);
          if (/^npx agentctl stop\b/.test(step.command)) {
            await daemon?.waitExit();
            daemon = null;
          }
          if (/rolled_back/.test(step.comment)) {
            const status = JSON.parse((await sh('npx agentctl --json status', dir)).out) as {
              node: { activeMachine: string; serving: boolean };
              lastOperation: { state: string; to: string; from: string };
            };
            expect(status.lastOperation).toMatchObject({ state: 'rolled_back', from: 'kube2', to: 'kube1' });
            expect(status.node).toMatchObject({ activeMachine: 'kube2', serving: true });
            rolledBack = true;
          }
        }
      } finally {
        await daemon?.dispose();
      }
      expect(rolledBack, 'the demo has a command that rolls back').toBe(true);
    },
  );
});
