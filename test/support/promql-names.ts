/**
 * The metric names a PromQL expression selects, for the tests that hold the dashboard and the
 * alert rules to what agentd exports. A small scan, not a parser: string literals, label
 * matchers, ranges and the label lists of `by`/`on`/… are dropped; what is left that is neither
 * a function, an aggregation nor a keyword is a metric name. Prometheus itself parses the
 * expressions (the live test sends each one).
 */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
]);

export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (call !== undefined || KEYWORDS.has(name!.toLowerCase())) continue;
    names.add(name!);
  }
  return [...names];
}
