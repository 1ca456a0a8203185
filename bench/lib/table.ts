/** Plain-text tables for bench output (also pasteable into markdown). */

/** Render rows as a markdown table with padded columns; numbers (and `-`, for none) are right-aligned. */
export function renderTable(
  head: readonly string[],
  rows: readonly (readonly (string | number)[])[],
): string {
  const cells = [head.map(String), ...rows.map((r) => r.map((c) => (typeof c === 'number' ? fmt(c) : c)))];
  const numeric = head.map(
    (_h, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number' || r[i] === '-'),
  );
  const widths = head.map((_h, i) => Math.max(3, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string =>
    `| ${r.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (numeric[i] ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(cells[0]!), rule, ...cells.slice(1).map(line)].join('\n');
}

/** A number with precision that suits its size: 12345, 123.4, 1.23, 0.123. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toString();
  if (abs >= 100) return n.toFixed(1);
  if (abs >= 1) return n.toFixed(2);
  return n.toFixed(3);
}
