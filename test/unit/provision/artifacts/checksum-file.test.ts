import { describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import { parseChecksumFile } from '../../../../src/provision/artifacts/checksum-file.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const SRC = 'https://example.test/file.sha256';

function parseError(text: string, entry: string, format: 'single' | 'list'): AgentError {
  try {
    parseChecksumFile(text, entry, format, SRC);
  } catch (err) {
    return err as AgentError;
  }
  throw new Error('expected parseChecksumFile to throw');
}

describe('parseChecksumFile', () => {
  it('reads bare hex, with or without a newline, and lowercases it', () => {
    expect(parseChecksumFile(A, 'kubelet', 'single', SRC)).toBe(A);
    expect(parseChecksumFile(`${A}\n`, 'kubelet', 'single', SRC)).toBe(A);
    expect(parseChecksumFile(`${'A'.repeat(64)}\r\n`, 'kubelet', 'single', SRC)).toBe(A);
  });

  it('reads sha256sum lines in text and binary mode', () => {
    expect(
      parseChecksumFile(
        `${A}  containerd-2.0.4-linux-amd64.tar.gz\n`,
        'containerd-2.0.4-linux-amd64.tar.gz',
        'single',
        SRC,
      ),
    ).toBe(A);
    expect(parseChecksumFile(`${B} *runc.amd64\n`, 'runc.amd64', 'list', SRC)).toBe(B);
  });

  it('accepts the one line of a per-file checksum even when the file name differs (mirrors rename files)', () => {
    expect(parseChecksumFile(`${A}  upstream-name.tgz\n`, 'renamed.tgz', 'single', SRC)).toBe(A);
  });

  it('picks the line of the entry from a release-wide list, matching base names', () => {
    const text = `${A}  runc.amd64\n${B}  ./dist/runc.arm64\n# comment\n\n`;
    expect(parseChecksumFile(text, 'runc.arm64', 'list', SRC)).toBe(B);
    expect(parseChecksumFile(text, 'runc.amd64', 'list', SRC)).toBe(A);
  });

  it('a list without the entry is DOWNLOAD_FAILED naming the file, the entry and what it lists', () => {
    const err = parseError(`${A}  runc.amd64\n${B}  runc.arm64\n`, 'runc.s390x', 'list');
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.message).toContain(SRC);
    expect(err.message).toContain('runc.s390x');
    expect(err.message).toContain('runc.arm64');
  });

  it('a single-format file with several lines must name the entry', () => {
    expect(parseError(`${A}  one\n${B}  two\n`, 'three', 'single').code).toBe('DOWNLOAD_FAILED');
    expect(parseChecksumFile(`${A}  one\n${B}  two\n`, 'two', 'single', SRC)).toBe(B);
  });

  it('a bare hex does not satisfy a list lookup', () => {
    expect(parseError(A, 'runc.amd64', 'list').code).toBe('DOWNLOAD_FAILED');
  });

  it('malformed and empty files are DOWNLOAD_FAILED', () => {
    const html = parseError('<html>Not Found</html>', 'kubelet', 'single');
    expect(html.code).toBe('DOWNLOAD_FAILED');
    expect(html.message).toContain('<html>');
    expect(parseError('abc123  kubelet', 'kubelet', 'single').code).toBe('DOWNLOAD_FAILED');
    expect(parseError('\n\n', 'kubelet', 'single').message).toContain('empty');
  });
});
