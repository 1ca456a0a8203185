import { describe, expect, it } from 'vitest';
import {
  createOutput,
  firstLine,
  formatAge,
  formatBytes,
  formatElapsed,
  stripAnsiLength,
  table,
  toneOf,
} from '../../../src/cli/output.js';
import { ENVIRONMENT } from '../../../scripts/lib/cli-doc.js';
import { recordingStream } from '../../support/cli.js';

function output(o: { json?: boolean; colorFlag?: boolean; env?: NodeJS.ProcessEnv; tty?: boolean }) {
  const stdout = recordingStream(o.tty ?? true);
  const stderr = recordingStream(o.tty ?? true);
  const out = createOutput({
    json: o.json ?? false,
    colorFlag: o.colorFlag ?? true,
    env: o.env ?? {},
    stdout,
    stderr,
  });
  return { out, stdout, stderr };
}

describe('createOutput colors', () => {
  it('colors on a terminal by default', () => {
    const { out } = output({});
    expect(out.color).toBe(true);
    expect(out.paint('ok', 'good')).toBe('\u001b[32mok\u001b[39m');
    expect(out.paint('x', 'bold')).toBe('\u001b[1mx\u001b[22m');
  });

  it.each([
    ['NO_COLOR is set', { env: { NO_COLOR: '1' } }],
    ['--no-color is given', { colorFlag: false }],
    ['stdout is not a terminal', { tty: false }],
    ['--json is given', { json: true }],
  ])('no colors when %s', (_name, o) => {
    const { out } = output(o);
    expect(out.color).toBe(false);
    expect(out.paint('ok', 'good')).toBe('ok');
  });

  it('an empty NO_COLOR leaves colors on, as the ENVIRONMENT of docs/cli.md and agentctl(8) says', () => {
    const { out } = output({ env: { NO_COLOR: '' } });
    expect(out.color).toBe(true);
    expect(out.progress.color).toBe(true);
    expect(new Map(ENVIRONMENT).get('NO_COLOR')).toMatch(
      /^set to a non-empty value .*an empty NO_COLOR is ignored/,
    );
  });
});

describe('createOutput streams', () => {
  it('--json prints the value as exactly one JSON document on stdout', () => {
    const { out, stdout, stderr } = output({ json: true });
    out.result({ a: [1, 2] }, () => 'human');
    expect(JSON.parse(stdout.text())).toEqual({ a: [1, 2] });
    expect(stderr.text()).toBe('');
  });

  it('human output uses the renderer, with a trailing newline', () => {
    const { out, stdout } = output({});
    out.result({ a: 1 }, () => 'line one');
    expect(stdout.text()).toBe('line one\n');
  });

  it('info and error go to stderr only', () => {
    const { out, stdout, stderr } = output({});
    out.info('progress 50%');
    out.error('it broke');
    expect(stdout.text()).toBe('');
    expect(stderr.text()).toBe('progress 50%\nagentctl: it broke\n');
  });
});

describe('toneOf', () => {
  it.each([
    ['succeeded', 'good'],
    ['active', 'good'],
    ['running', 'good'],
    ['ready', 'good'],
    ['failed', 'bad'],
    ['rolled_back', 'bad'],
    ['interrupted', 'bad'],
    ['absent', 'dim'],
    ['stopped', 'dim'],
    ['unknown', 'dim'],
    ['pending', 'dim'],
    ['cancelled', 'dim'],
    ['draining', 'warn'],
    ['recovering', 'warn'],
    ['inactive', 'warn'],
  ])('%s is %s', (state, tone) => {
    expect(toneOf(state)).toBe(tone);
  });
});

describe('table', () => {
  it('aligns columns with two spaces and trims trailing blanks', () => {
    expect(
      table([
        ['NAME', 'STATE', 'NOTE'],
        ['kube1', 'running', '(active)'],
        ['kube2', 'absent', ''],
      ]),
    ).toBe(['NAME   STATE    NOTE', 'kube1  running  (active)', 'kube2  absent'].join('\n'));
  });

  it('ignores ANSI color codes when measuring', () => {
    const red = '\u001b[31mfailed\u001b[39m';
    const lines = table([
      ['A', 'B'],
      [red, 'x'],
      ['ok', 'y'],
    ]).split('\n');
    expect(lines[1]).toBe(`${red}  x`);
    expect(lines[2]).toBe('ok      y');
    expect(stripAnsiLength(red)).toBe(6);
  });

  it('handles rows of different lengths and an empty table', () => {
    expect(table([['a'], ['bb', 'c']])).toBe('a\nbb  c');
    expect(table([])).toBe('');
  });
});

describe('formatAge', () => {
  it.each([
    [0, '0s'],
    [-5000, '0s'],
    [59_000, '59s'],
    [61_000, '1m 1s'],
    [3_600_000, '1h 0m'],
    [47 * 3_600_000 + 60_000, '47h 1m'],
    [50 * 3_600_000, '2d 2h'],
  ])('%d ms is %j', (ms, text) => {
    expect(formatAge(ms)).toBe(text);
  });
});

describe('the progress side (stderr)', () => {
  function streams(stdoutTty: boolean, stderrTty: boolean) {
    return { stdout: recordingStream(stdoutTty), stderr: recordingStream(stderrTty) };
  }

  it('is live and colored when stderr is a terminal, even with --json or a piped stdout', () => {
    const s = streams(false, true);
    const out = createOutput({ json: true, colorFlag: true, env: {}, ...s });
    expect(out.progress).toMatchObject({ tty: true, color: true, columns: 80 });
    expect(out.progress.paint('ok', 'good')).toBe('\u001b[32mok\u001b[39m');
    out.progress.write('x');
    expect(s.stderr.text()).toBe('x');
    expect(s.stdout.text()).toBe('');
  });

  it.each([
    ['NO_COLOR', { env: { NO_COLOR: '1' }, colorFlag: true }],
    ['--no-color', { env: {}, colorFlag: false }],
  ])('is never colored with %s', (_name, o) => {
    const out = createOutput({ json: false, ...o, ...streams(true, true) });
    expect(out.progress.color).toBe(false);
    expect(out.progress.paint('ok', 'good')).toBe('ok');
    expect(out.paint('ok', 'good')).toBe('ok');
  });

  it('plain when stderr is not a terminal', () => {
    const out = createOutput({ json: false, colorFlag: true, env: {}, ...streams(true, false) });
    expect(out.progress).toMatchObject({ tty: false, color: false });
    expect(out.tty).toBe(true);
  });
});

describe('line', () => {
  it('streams human lines to stdout, and nothing with --json', () => {
    const human = output({});
    human.out.line('step 1');
    expect(human.stdout.text()).toBe('step 1\n');
    const json = output({ json: true });
    json.out.line('step 1');
    expect(json.stdout.text()).toBe('');
  });
});

describe('formatting helpers', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1536, '1.5 KiB'],
    [5 * 1024 * 1024, '5.0 MiB'],
    [3 * 1024 ** 3, '3.0 GiB'],
  ])('formatBytes(%d) is %j', (n, text) => {
    expect(formatBytes(n)).toBe(text);
  });

  it('formatElapsed: tenths of seconds below a minute, then like formatAge', () => {
    expect(formatElapsed(1234)).toBe('1.2s');
    expect(formatElapsed(-5)).toBe('0.0s');
    expect(formatElapsed(61_000)).toBe('1m 1s');
  });

  it('firstLine: the first line, cut to a length', () => {
    expect(firstLine('a\nb')).toBe('a');
    expect(firstLine('abcdef', 4)).toBe('abc…');
  });
});
