/**
 * agentctl output: exactly one JSON value on stdout with --json; human text otherwise, colored
 * only on a terminal and never with --no-color or NO_COLOR. Diagnostics go to stderr.
 */
export interface Output {
  json: boolean;
  color: boolean;
  /** stdout is a terminal. */
  tty: boolean;
  /** The command's result: JSON (--json) or the human rendering. */
  result(value: unknown, human: () => string): void;
  /** One line of human output as it happens (stdout); nothing with --json, where `result` says it all. */
  line(text: string): void;
  /** Progress and diagnostics (stderr). */
  info(line: string): void;
  error(line: string): void;
  paint(word: string, tone: Tone): string;
  /** Where progress goes (stderr): whether it is a terminal, and its own coloring. */
  progress: ProgressStream;
}

/** stderr as the progress display sees it. */
export interface ProgressStream {
  /** A terminal: live redrawing is possible. */
  tty: boolean;
  /** Colors allowed on stderr (a terminal, no --no-color, no NO_COLOR). */
  color: boolean;
  /** Terminal width (80 when unknown). */
  columns: number;
  write(text: string): void;
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
  const colorAllowed = options.colorFlag && !options.env.NO_COLOR;
  const color = colorAllowed && Boolean(options.stdout.isTTY) && !options.json;
  const stderrTty = Boolean(options.stderr.isTTY);
  const stderrColor = colorAllowed && stderrTty;
  return {
    json: options.json,
    color,
    tty: Boolean(options.stdout.isTTY),
    result(value, human) {
      options.stdout.write(options.json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    },
    line(text) {
      if (!options.json) options.stdout.write(`${text}\n`);
    },
    info(line) {
      options.stderr.write(`${line}\n`);
    },
    error(line) {
      options.stderr.write(`agentctl: ${line}\n`);
    },
    paint: (word, tone) => (color ? paintWord(word, tone) : word),
    progress: {
      tty: stderrTty,
      color: stderrColor,
      columns: options.stderr.columns > 0 ? options.stderr.columns : 80,
      write: (text) => void options.stderr.write(text),
      paint: (word, tone) => (stderrColor ? paintWord(word, tone) : word),
    },
  };
}

function paintWord(word: string, tone: Tone): string {
  const [open, close] = CODES[tone];
  return `\u001b[${open}m${word}\u001b[${close}m`;
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

/** "1.4s", "2m 3s" — how long a phase or operation took. */
export function formatElapsed(ms: number): string {
  if (ms < 60_000) return `${(Math.max(0, ms) / 1000).toFixed(1)}s`;
  return formatAge(ms);
}

/** "512 B", "1.5 KiB", "12.0 MiB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The first line of a message (multi-line command errors would break tables and progress lines). */
export function firstLine(text: string, max = 160): string {
  const line = text.split('\n', 1)[0] ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * Wrap text at word boundaries to `width` columns, each line after the first indented by
 * `indent` (long errors stay readable in a terminal). Existing line breaks are kept; a word
 * longer than a line stays whole.
 */
export function wrapText(text: string, width = 100, indent = '  '): string {
  const out: string[] = [];
  for (const paragraph of text.split('\n')) {
    // Split on single spaces so that runs of spaces (column alignment) survive.
    let line: string | null = null;
    for (const word of paragraph.split(' ')) {
      const limit = out.length === 0 ? width : width - indent.length;
      if (line === null) line = word;
      else if (word && stripAnsiLength(line) + 1 + stripAnsiLength(word) > limit) {
        out.push(line.trimEnd());
        line = word;
      } else line = `${line} ${word}`;
    }
    out.push(line ?? '');
  }
  return out.map((l, i) => (i === 0 ? l : `${indent}${l}`)).join('\n');
}
