import { describe, expect, it } from 'vitest';
import { createSseParser } from '../../../../src/cli/follow/sse-parser.js';

describe('createSseParser', () => {
  it('parses events with event, data and id fields, and drops comments', () => {
    const p = createSseParser();
    expect(
      p.push(': agentd event stream\n\nid: 3\nevent: phase\ndata: {"a":1}\n\n: keep-alive\n\ndata: x\n\n'),
    ).toEqual([
      { event: 'phase', data: '{"a":1}', id: '3' },
      { event: 'message', data: 'x', id: '3' },
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

  it('does not dispatch an event without data (its id still counts: see below)', () => {
    const p = createSseParser();
    expect(p.push('event: phase\nid: 4\n\n')).toEqual([]);
    expect(p.push('data: y\n\n')).toEqual([{ event: 'message', data: 'y', id: '4' }]);
  });

  // HTML standard, "Interpreting an event stream": the last event ID buffer is set by an id
  // field and is not reset when an event is dispatched; an empty id field resets it.
  it('keeps the last event id across events until an id field changes it', () => {
    const p = createSseParser();
    expect(p.push('id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\ndata: d\n\nid\ndata: e\n\n')).toEqual([
      { event: 'message', data: 'a', id: '7' },
      { event: 'message', data: 'b', id: '7' },
      { event: 'message', data: 'c', id: '8' },
      { event: 'message', data: 'd', id: '8' },
      { event: 'message', data: 'e', id: '' },
    ]);
  });

  it('ignores an id field that holds a NUL', () => {
    const p = createSseParser();
    expect(p.push('id: 3\ndata: a\n\nid: 4\u0000x\ndata: b\n\n')).toEqual([
      { event: 'message', data: 'a', id: '3' },
      { event: 'message', data: 'b', id: '3' },
    ]);
  });
});
