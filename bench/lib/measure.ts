/** Small measurements for the benches: process wall time, resident memory, medians. */
import { execFile, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Wall time in ms of running `file args` to completion; rejects when it exits non-zero. */
export function wallTime(file: string, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    execFile(file, args, { env: env ?? process.env, timeout: 30_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')}: ${err.message}: ${stderr}`));
      else resolve(performance.now() - start);
    });
  });
}

/**
 * Wall times of several commands, `runs` rounds of them run interleaved (a, b, a, b, ...) after
 * one warm-up each, so that a machine that speeds up or slows down during the run affects all
 * alike: samples[command][round].
 */
export async function wallTimeSamples(
  commands: readonly { file: string; args: readonly string[] }[],
  runs: number,
): Promise<number[][]> {
  const samples = commands.map(() => [] as number[]);
  for (const c of commands) await wallTime(c.file, c.args);
  for (let i = 0; i < runs; i++) {
    for (const [j, c] of commands.entries()) samples[j]!.push(await wallTime(c.file, c.args));
  }
  return samples;
}

/** Median wall times of several commands, run as `wallTimeSamples` runs them. */
export async function medianWallTimes(
  commands: readonly { file: string; args: readonly string[] }[],
  runs: number,
): Promise<number[]> {
  return (await wallTimeSamples(commands, runs)).map(median);
}

/**
 * The median of the per-round ratios `of[i] / to[i]` of two commands' samples from the same
 * rounds, with the range of the middle half: each round's two runs are a few milliseconds
 * apart, so the drift of a VM's speed, which moved whole minutes by a third on some machines
 * (docs/benchmarks.md), cancels in each ratio, where a ratio of two medians keeps what drift
 * fell unevenly on the two.
 */
export function pairedRatio(
  of: readonly number[],
  to: readonly number[],
): { median: number; q1: number; q3: number } {
  const ratios = of.map((t, i) => t / (to[i] ?? Number.NaN)).sort((a, b) => a - b);
  const at = (q: number): number =>
    ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))] ?? Number.NaN;
  return { median: median(ratios), q1: at(0.25), q3: at(0.75) };
}

/** Resident set size of a process in MiB, from /proc/<pid>/status (VmRSS). */
export async function residentMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error(`/proc/${pid}/status has no VmRSS line`);
  return Number(m[1]) / 1024;
}

let clockTicks: number | null = null;

/** USER_HZ, the unit of the CPU times in /proc/<pid>/stat (100 on practically every Linux). */
function ticksPerSecond(): number {
  if (clockTicks === null) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(out.stdout?.trim());
    clockTicks = Number.isFinite(n) && n > 0 ? n : 100;
  }
  return clockTicks;
}

/** CPU time a process has used so far, user and system, in milliseconds (/proc/<pid>/stat). */
export async function cpuTimeMs(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces and parentheses: count fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tick = 1000 / ticksPerSecond();
  // utime and stime are fields 14 and 15 of the whole line, i.e. 11 and 12 after the name.
  return { user: Number(fields[11]) * tick, system: Number(fields[12]) * tick };
}
