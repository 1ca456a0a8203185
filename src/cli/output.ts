/**
 * agentctl output: exactly one JSON value on stdout with --json; human text otherwise, colored
 * only on a terminal and never with --no-color or NO_COLOR. Diagnostics go to stderr.
 */
export interface Output {
  json: boolean;
  color: boolean;
  /** The command's result: JSON (--json) or the human rendering. */
  result(value: unknown, human: () => string): void;
  /** Progress and diagnostics (stderr). */
  info(line: string): void;
  error(line: string): void;
  paint(word: string, tone: Tone): string;
}

export type Tone = 'good' | 'bad' | 'warn' | 'dim' | 'bold';
const CODES: Record<Tone, [number, number]> = {
  good: [32, 39],
  bad: [31, 39],
  warn: [33, 39],
  dim: [2, 22],
  bold: [1, 22],
};

export function createOutput(options: {
  json: boolean;
  colorFlag: boolean;
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}): Output {
  const color = options.colorFlag && !options.env.NO_COLOR && Boolean(options.stdout.isTTY) && !options.json;
  return {
    json: options.json,
    color,
    result(value, human) {
      options.stdout.write(options.json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    },
    info(line) {
      options.stderr.write(`${line}\n`);
    },
    error(line) {
      options.stderr.write(`agentctl: ${line}\n`);
    },
    paint(word, tone) {
      if (!color) return word;
      const [open, close] = CODES[tone];
      return `\u001b[${open}m${word}\u001b[${close}m`;
    },
  };
}

/** The tone of a state word (operation, phase, machine, kubelet). */
export function toneOf(state: string): Tone {
  if (['succeeded', 'active', 'running', 'ready', 'ok', 'true'].includes(state)) return 'good';
  if (['failed', 'rolled_back', 'interrupted', 'error', 'false'].includes(state)) return 'bad';
  if (['absent', 'stopped', 'unknown', 'skipped', 'pending', 'cancelled'].includes(state)) return 'dim';
  return 'warn';
}

/** Align rows of cells into columns separated by two spaces. */
export function table(rows: string[][], visibleLength: (s: string) => number = stripAnsiLength): string {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, visibleLength(cell))));
  return rows
    .map((row) =>
      row
        .map((cell, i) =>
          i === row.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleLength(cell)),
        )
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function stripAnsiLength(s: string): number {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u001b\[[0-9;]*m/g, '').length;
}

/** "3m ago", "2h 5m" — compact relative times for human output. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
