/**
 * What explains a machine's failure, captured before the failed machine is removed: the last
 * lines of kubelet's and containerd's journal inside it and the host's status of its nspawn
 * unit. Best effort: each command's failure is recorded next to its output, never thrown, so
 * capturing can never change the outcome of the operation that asked for it.
 */
import { describeError } from '../errors.js';
import type { CommandRunner, MachineName } from './types.js';

/** One captured command: what it shows, the command line and what it printed (or why not). */
export interface MachineDiagnostic {
  what: string;
  command: string;
  /** Exit code, or null when the command could not be run. */
  exitCode: number | null;
  /** stdout and stderr, the end kept when long. */
  output: string;
  /** Why there is no (useful) output: the command could not be run or failed. */
  error?: string;
}

/** Journal lines of each unit, and of the unit status. */
export const DIAGNOSTIC_JOURNAL_LINES = 50;
export const DIAGNOSTIC_STATUS_LINES = 20;
/** Each output is cut to its last this many characters (an operation record stays small). */
const MAX_OUTPUT_CHARS = 8_000;
/** Each command may take this long: a machine that hangs must not hold the rollback. */
const COMMAND_TIMEOUT_MS = 10_000;

/** The commands, in the order they are run. */
export function diagnosticCommands(m: MachineName): Array<{ what: string; file: string; args: string[] }> {
  const journal = (unit: string) => ({
    what: `${unit} journal in ${m}`,
    file: 'systemd-run',
    args: [
      `--machine=${m}`,
      '--pipe',
      '--wait',
      'journalctl',
      '-u',
      unit,
      '-n',
      String(DIAGNOSTIC_JOURNAL_LINES),
      '--no-pager',
    ],
  });
  return [
    journal('kubelet.service'),
    journal('containerd.service'),
    {
      what: `status of systemd-nspawn@${m}.service`,
      file: 'systemctl',
      args: ['status', `systemd-nspawn@${m}.service`, '--no-pager', '-n', String(DIAGNOSTIC_STATUS_LINES)],
    },
  ];
}

function tail(text: string): string {
  const t = text.trimEnd();
  return t.length > MAX_OUTPUT_CHARS ? `…${t.slice(-MAX_OUTPUT_CHARS)}` : t;
}

/** Run the diagnostic commands for machine `m`; never throws. */
export async function captureMachineDiagnostics(
  runner: CommandRunner,
  m: MachineName,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<MachineDiagnostic[]> {
  const out: MachineDiagnostic[] = [];
  for (const c of diagnosticCommands(m)) {
    const command = [c.file, ...c.args].join(' ');
    try {
      const res = await runner.run(c.file, c.args, {
        reject: false,
        timeoutMs: options.timeoutMs ?? COMMAND_TIMEOUT_MS,
        signal: options.signal,
      });
      const output = tail([res.stdout, res.stderr].filter((s) => s.trim()).join('\n'));
      // `systemctl status` exits 3 for a unit that is not running: its output is the answer.
      const failed = res.exitCode !== 0 && !(c.file === 'systemctl' && res.exitCode === 3);
      out.push({
        what: c.what,
        command,
        exitCode: res.exitCode,
        output,
        ...(failed ? { error: `exited with code ${res.exitCode}` } : {}),
      });
    } catch (err) {
      out.push({ what: c.what, command, exitCode: null, output: '', error: describeError(err) });
    }
  }
  return out;
}
