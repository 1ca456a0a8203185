import { describe, expect, it } from 'vitest';
import {
  decodeMessage,
  encodeMethodCall,
  messageLength,
  MessageType,
  splitSignature,
  WireError,
} from '../../../src/host/dbus/wire.js';

/** A message written by hand, big-endian, the way the specification lays it out. */
function bigEndianReply(): Buffer {
  const parts: number[] = [];
  const u32 = (v: number): void => {
    while (parts.length % 4) parts.push(0);
    parts.push((v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255);
  };
  const str = (s: string): void => {
    u32(s.length);
    for (const c of Buffer.from(s)) parts.push(c);
    parts.push(0);
  };
  const sig = (s: string): void => {
    parts.push(s.length);
    for (const c of Buffer.from(s)) parts.push(c);
    parts.push(0);
  };
  parts.push(0x42, MessageType.MethodReturn, 0, 1);
  u32(0); // body length, patched
  u32(7); // serial
  u32(0); // field array length, patched
  const fieldsStart = parts.length;
  // REPLY_SERIAL (5) = u 3
  parts.push(5);
  sig('u');
  u32(3);
  // SIGNATURE (8) = g "sv"
  while (parts.length % 8) parts.push(0);
  parts.push(8);
  sig('g');
  sig('sv');
  const fieldsLength = parts.length - fieldsStart;
  while (parts.length % 8) parts.push(0);
  const bodyStart = parts.length;
  str('active');
  sig('u'); // the variant's signature
  u32(4242);
  const buf = Buffer.from(parts);
  buf.writeUInt32BE(parts.length - bodyStart, 4);
  buf.writeUInt32BE(fieldsLength, 12);
  return buf;
}

describe('D-Bus wire format', () => {
  it('encodes a method call that decodes to the same fields and string arguments', () => {
    const bytes = encodeMethodCall(
      {
        destination: 'org.freedesktop.machine1',
        path: '/org/freedesktop/machine1',
        interface: 'org.freedesktop.machine1.Manager',
        member: 'GetMachine',
        args: ['kube1'],
      },
      9,
    );
    expect(bytes[0]).toBe(0x6c);
    expect(messageLength(bytes)).toBe(bytes.length);
    expect(decodeMessage(bytes)).toEqual({
      type: MessageType.MethodCall,
      flags: 0,
      serial: 9,
      destination: 'org.freedesktop.machine1',
      path: '/org/freedesktop/machine1',
      interface: 'org.freedesktop.machine1.Manager',
      member: 'GetMachine',
      signature: 's',
      body: ['kube1'],
    });
  });

  it('lays the header out as the specification does: 16 fixed bytes, fields, padding to 8, body', () => {
    const bytes = encodeMethodCall({ path: '/', member: 'Ping', args: ['ab'] }, 1);
    // body: u32 length 2, "ab", NUL
    expect(bytes.readUInt32LE(4)).toBe(7);
    expect(bytes.subarray(bytes.length - 7)).toEqual(Buffer.from([2, 0, 0, 0, 0x61, 0x62, 0]));
    expect((bytes.length - 7) % 8).toBe(0);
    // the first field: code 1 (PATH), signature "o", the path "/"
    expect([...bytes.subarray(16, 28)]).toEqual([1, 1, 0x6f, 0, 1, 0, 0, 0, 0x2f, 0, 0, 0]);
  });

  it('encodes a call with no arguments with no body and no signature field', () => {
    const msg = decodeMessage(encodeMethodCall({ path: '/org/freedesktop/DBus', member: 'Hello' }, 1));
    expect(msg.signature).toBe('');
    expect(msg.body).toEqual([]);
  });

  it('decodes a big-endian reply with a variant', () => {
    const buf = bigEndianReply();
    expect(messageLength(buf)).toBe(buf.length);
    expect(decodeMessage(buf)).toMatchObject({
      type: MessageType.MethodReturn,
      serial: 7,
      replySerial: 3,
      signature: 'sv',
      body: ['active', { signature: 'u', value: 4242 }],
    });
  });

  it('waits for the fixed header before it can tell a length', () => {
    expect(messageLength(Buffer.alloc(15))).toBeNull();
  });

  it('refuses what no peer should send, naming what is wrong', () => {
    const good = bigEndianReply();
    const badOrder = Buffer.from(good);
    badOrder[0] = 0x58;
    expect(() => messageLength(badOrder)).toThrow(/unknown byte order mark 0x58/);
    expect(() => decodeMessage(good.subarray(0, good.length - 3))).toThrow(WireError);
    const unterminated = Buffer.from(good);
    unterminated[unterminated.length - 10] = 0x41; // the NUL after "active"
    expect(() => decodeMessage(unterminated)).toThrow(/not terminated/);
    const huge = Buffer.from(good);
    huge.writeUInt32BE(2 ** 27, 4);
    expect(() => messageLength(huge)).toThrow(/more than the 134217728 allowed/);
  });

  it('splits signatures into single complete types', () => {
    expect(splitSignature('sa{sv}u(iay)')).toEqual(['s', 'a{sv}', 'u', '(iay)']);
    expect(() => splitSignature('a')).toThrow(/ends early/);
    expect(() => splitSignature('(su')).toThrow(/unclosed/);
    expect(() => splitSignature('z')).toThrow(/unknown type "z"/);
  });
});
