/** Test helper: parse systemd unit / nspawn / simple TOML text into sections of key=value pairs. */
export type Sections = Map<string, [string, string][]>;

export function parseSections(text: string): Sections {
  const sections: Sections = new Map();
  let current: [string, string][] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = [];
      sections.set(header[1]!, current);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0 || current === undefined) throw new Error(`not a key=value line inside a section: ${raw}`);
    current.push([line.slice(0, eq).trim(), line.slice(eq + 1).trim()]);
  }
  return sections;
}

/** Every value of `key` in `section`, in order. */
export function values(sections: Sections, section: string, key: string): string[] {
  return (sections.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);
}
