/**
 * A scripted D-Bus peer on a unix socket for unit tests: accepts SASL EXTERNAL, answers `Hello`,
 * and hands every other call to the test, which answers with a value, an error or nothing. Its
 * replies are encoded here, by hand, not by src/host/dbus/wire.ts (which only writes calls), so a
 * wrong layout on either side does not cancel out. It is still ours: the real buses are judged in
 * test/system/dbus.test.ts (dbus-daemon) and the real-host suite (machined, systemd).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { decodeMessage, messageLength } from '../../src/host/dbus/wire.js';
import type { Message } from '../../src/host/dbus/wire.js';

/** What a reply carries: strings (`s`), object paths (`o`) and variants of `s` or `u`. */
export type ReplyValue = { s: string } | { o: string } | { v: { s: string } } | { v: { u: number } };

/** A reply, an error reply, no reply, a hang-up, or bytes sent as they are (garbage, say). */
export type Answer =
  { values: ReplyValue[] } | { error: string; message: string } | 'none' | 'hangup' | { raw: Buffer };

export interface FakeBus {
  readonly calls: Message[];
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startFakeBus(socketPath: string, answer: (call: Message) => Answer): Promise<FakeBus> {
  const calls: Message[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  let uniqueName = 0;
  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let authed = false;
    let buf = Buffer.alloc(0);
    let serial = 1000;
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!authed) {
        const text = buf.toString('latin1');
        const begin = text.indexOf('BEGIN\r\n');
        if (begin < 0) {
          if (/AUTH EXTERNAL [0-9a-f]+\r\n$/.test(text))
            socket.write('OK 00112233445566778899aabbccddeeff\r\n');
          return;
        }
        authed = true;
        buf = buf.subarray(begin + 7);
      }
      for (;;) {
        const length = messageLength(buf);
        if (length === null || buf.length < length) return;
        const call = decodeMessage(buf.subarray(0, length));
        buf = buf.subarray(length);
        if (call.member === 'Hello') {
          socket.write(reply(++serial, call.serial, { values: [{ s: `:1.${++uniqueName}` }] }));
          continue;
        }
        calls.push(call);
        const a = answer(call);
        if (a === 'hangup') socket.destroy();
        else if (typeof a === 'object' && 'raw' in a) socket.write(a.raw);
        else if (a !== 'none') socket.write(reply(++serial, call.serial, a));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    calls,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A little-endian METHOD_RETURN or ERROR, laid out by hand. */
function reply(
  serial: number,
  replySerial: number,
  a: { values: ReplyValue[] } | { error: string; message: string },
): Buffer {
  const isError = 'error' in a;
  const values: ReplyValue[] = isError ? [{ s: a.message }] : a.values;
  const body = new Bytes();
  let signature = '';
  for (const v of values) {
    if ('s' in v) {
      signature += 's';
      body.str(v.s);
    } else if ('o' in v) {
      signature += 'o';
      body.str(v.o);
    } else if ('s' in v.v) {
      signature += 'v';
      body.sig('s');
      body.str(v.v.s);
    } else {
      signature += 'v';
      body.sig('u');
      body.u32(v.v.u);
    }
  }
  const head = new Bytes();
  head.bytes.push(0x6c, isError ? 3 : 2, 0, 1);
  head.u32(body.bytes.length);
  head.u32(serial);
  head.u32(0); // field array length, set below
  const start = head.bytes.length;
  head.field(5, 'u', () => head.u32(replySerial));
  if (isError) head.field(4, 's', () => head.str(a.error));
  if (signature) head.field(8, 'g', () => head.sig(signature));
  const fieldsLength = head.bytes.length - start;
  head.align(8);
  const out = Buffer.from([...head.bytes, ...body.bytes]);
  out.writeUInt32LE(fieldsLength, 12);
  return out;
}

class Bytes {
  bytes: number[] = [];
  align(n: number): void {
    while (this.bytes.length % n) this.bytes.push(0);
  }
  u32(v: number): void {
    this.align(4);
    this.bytes.push(v & 255, (v >>> 8) & 255, (v >>> 16) & 255, (v >>> 24) & 255);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u32(b.length);
    this.bytes.push(...b, 0);
  }
  sig(s: string): void {
    this.bytes.push(s.length, ...Buffer.from(s, 'latin1'), 0);
  }
  field(code: number, type: string, value: () => void): void {
    this.align(8);
    this.bytes.push(code);
    this.sig(type);
    value();
  }
}
