/**
 * `agentd --help` (and so agentd(8), rendered from the same command) names the config file and
 * its default path, every environment variable the daemon reads, and gives examples. The list of
 * variables is checked against the sources, so a new AGENTD_* read cannot go undocumented.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildAgentdCommand, DAEMON_ENVIRONMENT } from '../../../src/bin/agentd.js';
import { DAEMON_OPTIONS, DEFAULT_CONFIG_FILE } from '../../../src/config/daemon-config.js';

const SRC = path.resolve(import.meta.dirname, '../../../src');
/** Read by other programs, not by agentd: agentctl's (docs/cli.md) and the sim executables'. */
const NOT_AGENTD = [path.join(SRC, 'cli'), path.join(SRC, 'sim', 'bin')];

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.join(e.parentPath, e.name));
}

const helpText = (): string => {
  const cmd = buildAgentdCommand();
  let out = '';
  cmd.configureOutput({ writeOut: (s) => (out += s) });
  cmd.outputHelp();
  return out;
};

describe('agentd --help', () => {
  it('names the config file, its default path and the precedence', () => {
    const text = helpText();
    expect(text).toContain(DEFAULT_CONFIG_FILE);
    expect(text).toContain('--config FILE');
    expect(text).toMatch(/flag > environment variable > config file > default/);
  });

  it('names every AGENTD_* variable of every option, and AGENTD_CONFIG', () => {
    const text = helpText();
    const names = ['AGENTD_CONFIG', ...Object.values(DAEMON_OPTIONS).map((o) => o.env)];
    expect(names.filter((n) => !text.includes(`  ${n}  `) && !text.includes(`  ${n} `))).toEqual([]);
  });

  it('names every AGENTD_* variable the daemon code reads from the environment', async () => {
    const read = new Set<string>();
    for (const file of await sourceFiles(SRC)) {
      if (NOT_AGENTD.some((dir) => file.startsWith(dir + path.sep))) continue;
      for (const m of (await readFile(file, 'utf8')).matchAll(/env\.(AGENTD_[A-Z_]+)/g)) read.add(m[1]!);
    }
    // The scan sees the reads it must (so an empty scan cannot pass).
    expect(read).toContain('AGENTD_SIM_FAULTS');
    const documented = new Set(DAEMON_ENVIRONMENT.map(([name]) => name));
    expect([...read].filter((n) => !documented.has(n))).toEqual([]);
    const text = helpText();
    expect([...documented].filter((n) => !text.includes(n))).toEqual([]);
  });

  it('gives examples', () => {
    expect(helpText()).toMatch(/Examples:\n(\s+\$ agentd .+\n){2,}/);
  });
});
