/**
 * agentd's log says what happened to what (docs/operations.md, "Logs"): over a join and a
 * blue/green update of a `--sim` daemon at debug level, every line's `level` is a name, no `msg`
 * is a bare event (`phase ended`, `rpc`, `artifact installed`), and a line about a phase, an
 * artifact, a call, a machine, a unit, an image, a URL, a task or a clean-up step names it in its
 * `msg`, so `jq -r '"\(.time) \(.msg)"'` reads on its own. Needs `npm run build`.
 */
import { describe, expect, it } from 'vitest';
import { startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];

/** Messages that said what happened but not to what. */
const BARE = [
  'phase started',
  'phase ended',
  'operation started',
  'operation finished',
  'rpc',
  'http',
  'artifact installed',
  'task started',
  'task done',
  'registry request',
  'clean-up step done',
  'starting machine',
  'starting service',
  'machine is running',
  'stopping machine',
  'machine stopped',
  'machine removed',
  'kubelet is active and healthy',
  'pulling image',
  'image pulled',
  'layer applied',
  'sim host command finished',
];

/** The fields that name what a line is about: its `msg` must name one of them. */
const SUBJECTS = [
  'phase',
  'artifact',
  'rpc',
  'url',
  'step',
  'unit',
  'image',
  'layer',
  'command',
  'machine',
  'task',
];

describe('the log of an update', () => {
  it('names the subject of every line in its msg, with level names', { timeout: 60_000 }, async () => {
    const d = await startSimDaemon({ args: ['--log-level', 'debug'] });
    expect((await updateAndWait(d)).state).toBe('succeeded');
    const op = await updateAndWait(d, { set: { kubernetesVersion: '1.35.0' } });
    expect(op.state).toBe('succeeded');
    await d.rpc('status');
    expect(await d.stop('SIGTERM')).toBe(0);
    const lines = d
      .logs()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string; level: unknown });
    expect(lines.length).toBeGreaterThan(100);
    const problems: string[] = [];
    for (const l of lines) {
      if (!LEVELS.includes(String(l.level))) problems.push(`level ${JSON.stringify(l.level)}: ${l.msg}`);
      if (BARE.includes(l.msg)) problems.push(`bare msg: ${JSON.stringify(l)}`);
      const subjects = SUBJECTS.filter((k) => typeof l[k] === 'string').map((k) => String(l[k]));
      if (subjects.length > 0 && !subjects.some((v) => l.msg.includes(v)))
        problems.push(`msg names none of ${subjects.join(', ')}: ${l.msg}`);
    }
    expect(problems).toEqual([]);
    const msgs = lines.map((l) => l.msg);
    // The examples of docs/operations.md, "Logs".
    expect(msgs).toContain(`phase verify ended: succeeded (${op.id})`);
    expect(msgs).toContain(`update ${op.id} finished: succeeded`);
    expect(msgs).toContain('artifact kubelet 1.35.0 installed');
    expect(msgs).toContain('kubelet in kube2 is active and healthy');
    expect(msgs.some((m) => /^rpc status answered ok in [\d.]+ ms$/.test(m))).toBe(true);
  });
});
