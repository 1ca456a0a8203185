import { describe, expect, it } from 'vitest';
import { createSseParser } from '../../../../src/cli/follow/sse-parser.js';

describe('createSseParser', () => {
  it('parses events with event, data and id fields, and drops comments', () => {
    const p = createSseParser();
    expect(
      p.push(': agentd event stream\n\nid: 3\nevent: phase\ndata: {"a":1}\n\n: keep-alive\n\ndata: x\n\n'),
    ).toEqual([
      { event: 'phase', data: '{"a":1}', id: '3' },
      { event: 'message', data: 'x', id: null },
    ]);
  });

  it('keeps a partial event for the next chunk, split anywhere', () => {
    const text = 'id: 1\nevent: operation\ndata: {"type":"operation"}\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      const p = createSseParser();
      const events = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(events, `cut at ${cut}`).toEqual([
        { event: 'operation', data: '{"type":"operation"}', id: '1' },
      ]);
    }
  });

  it('joins multi-line data and accepts CRLF and CR line ends', () => {
    const p = createSseParser();
    expect(p.push('data: a\r\ndata: b\r\n\r\n')).toEqual([{ event: 'message', data: 'a\nb', id: null }]);
    // A CR at the end of a chunk may be half of a CRLF: it waits for the next chunk.
    expect(p.push('data:c\r')).toEqual([]);
    expect(p.push('\rdata: d\n\n')).toEqual([
      { event: 'message', data: 'c', id: null },
      { event: 'message', data: 'd', id: null },
    ]);
  });

  it('does not dispatch an event without data', () => {
    const p = createSseParser();
    expect(p.push('event: phase\nid: 4\n\n')).toEqual([]);
    expect(p.push('data: y\n\n')).toEqual([{ event: 'message', data: 'y', id: null }]);
  });
});
