/**
 * Reading agentd's JSON log lines in tests: each line's top-level keys, in order, with repeats
 * (JSON.parse would silently keep the last of a repeated key, which is what must be caught).
 */

/** The top-level keys of one JSON object text, in order, repeats included. */
export function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) keys.push(JSON.parse(line.slice(i, j + 1)) as string);
      expectKey = false;
      i = j;
    } else if (c === '{' || c === '[') {
      depth++;
      expectKey = depth === 1;
    } else if (c === '}' || c === ']') {
      depth--;
    } else if (c === ',' && depth === 1) {
      expectKey = true;
    }
  }
  return keys;
}

/** The log lines (of `text`) that bind a key twice, each with the repeated keys. */
export function linesWithDuplicateKeys(text: string): Array<{ line: string; keys: string[] }> {
  const out: Array<{ line: string; keys: string[] }> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    const keys = topLevelKeys(line);
    const repeated = keys.filter((k, i) => keys.indexOf(k) !== i);
    if (repeated.length > 0) out.push({ line, keys: [...new Set(repeated)] });
  }
  return out;
}
