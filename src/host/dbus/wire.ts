/**
 * The D-Bus wire format, as much of it as agentd speaks: method calls whose arguments are strings,
 * and every message a bus may send back, decoded in full (any signature). Little-endian only on
 * the way out; both byte orders on the way in. The layout is the D-Bus specification's "Message
 * Protocol" section; docs/architecture.md says what agentd asks over D-Bus and why.
 */

export const MessageType = { MethodCall: 1, MethodReturn: 2, Error: 3, Signal: 4 } as const;
export type MessageType = (typeof MessageType)[keyof typeof MessageType];

/** Header field codes. */
const Field = {
  Path: 1,
  Interface: 2,
  Member: 3,
  ErrorName: 4,
  ReplySerial: 5,
  Destination: 6,
  Sender: 7,
  Signature: 8,
} as const;
type Field = (typeof Field)[keyof typeof Field];

/** Where each header field goes in a decoded `Message`. */
const FIELD_KEYS: Partial<Record<number, keyof Message>> = {
  [Field.Path]: 'path',
  [Field.Interface]: 'interface',
  [Field.Member]: 'member',
  [Field.ErrorName]: 'errorName',
  [Field.ReplySerial]: 'replySerial',
  [Field.Destination]: 'destination',
  [Field.Sender]: 'sender',
  [Field.Signature]: 'signature',
};

/** The largest message the specification allows (2^27 bytes); anything longer is a broken peer. */
export const MAX_MESSAGE_BYTES = 2 ** 27;
/** The fixed part of every header: endianness, type, flags, version, body length, serial, field array length. */
const FIXED_HEADER_BYTES = 16;

/** A value of type `v`: its signature and the value. */
export interface Variant {
  signature: string;
  value: unknown;
}

/** A decoded message. Integers of 64 bits are bigints; structs and arrays are arrays. */
export interface Message {
  type: MessageType;
  flags: number;
  serial: number;
  path?: string;
  interface?: string;
  member?: string;
  errorName?: string;
  replySerial?: number;
  destination?: string;
  sender?: string;
  signature: string;
  body: unknown[];
}

/** A method call agentd sends: every argument is a string (`s`). */
export interface MethodCall {
  destination?: string;
  path: string;
  interface?: string;
  member: string;
  args?: readonly string[];
}

/** A message that does not follow the format. */
export class WireError extends Error {
  constructor(message: string) {
    super(`malformed D-Bus message: ${message}`);
    this.name = 'WireError';
  }
}

const pad = (offset: number, alignment: number): number => (alignment - (offset % alignment)) % alignment;

/** Little-endian writer with offsets counted from the start of the message. */
class Writer {
  private buf = Buffer.alloc(256);
  length = 0;

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  align(alignment: number): void {
    const n = pad(this.length, alignment);
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  byte(v: number): void {
    this.room(1);
    this.buf[this.length++] = v;
  }
  uint32(v: number): void {
    this.align(4);
    this.room(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  /** `s` and `o`. */
  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.uint32(bytes.length);
    this.room(bytes.length + 1);
    bytes.copy(this.buf, this.length);
    this.buf[this.length + bytes.length] = 0;
    this.length += bytes.length + 1;
  }
  signature(s: string): void {
    if (s.length > 255) throw new WireError(`signature longer than 255 bytes: ${s.slice(0, 40)}…`);
    this.byte(s.length);
    this.room(s.length + 1);
    this.buf.write(s, this.length, 'latin1');
    this.buf[this.length + s.length] = 0;
    this.length += s.length + 1;
  }
  patchUint32(at: number, v: number): void {
    this.buf.writeUInt32LE(v, at);
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

/** Encode a method call; `serial` must be non-zero and unique on the connection. */
export function encodeMethodCall(call: MethodCall, serial: number): Buffer {
  const args = call.args ?? [];
  const body = new Writer();
  for (const arg of args) body.string(arg);
  const h = new Writer();
  h.byte(0x6c); // 'l': little-endian
  h.byte(MessageType.MethodCall);
  h.byte(0); // flags: a reply is expected; the destination may be started for it
  h.byte(1); // protocol version
  h.uint32(body.length);
  h.uint32(serial);
  h.uint32(0); // the length of the header field array, patched below
  const fieldsStart = h.length;
  const field = (code: Field, type: 's' | 'o' | 'g', value: string): void => {
    h.align(8);
    h.byte(code);
    h.signature(type);
    if (type === 'g') h.signature(value);
    else h.string(value);
  };
  field(Field.Path, 'o', call.path);
  if (call.interface !== undefined) field(Field.Interface, 's', call.interface);
  field(Field.Member, 's', call.member);
  if (call.destination !== undefined) field(Field.Destination, 's', call.destination);
  if (args.length > 0) field(Field.Signature, 'g', 's'.repeat(args.length));
  h.patchUint32(12, h.length - fieldsStart);
  h.align(8);
  return Buffer.concat([h.bytes(), body.bytes()]);
}

/**
 * The byte length of the message at the start of `buf`, or null when fewer than its fixed
 * header's 16 bytes have arrived. Throws `WireError` for a header no peer should send.
 */
export function messageLength(buf: Buffer): number | null {
  if (buf.length < FIXED_HEADER_BYTES) return null;
  const le = endianOf(buf);
  const bodyLength = le ? buf.readUInt32LE(4) : buf.readUInt32BE(4);
  const fieldsLength = le ? buf.readUInt32LE(12) : buf.readUInt32BE(12);
  const headerLength = FIXED_HEADER_BYTES + fieldsLength + pad(FIXED_HEADER_BYTES + fieldsLength, 8);
  const total = headerLength + bodyLength;
  if (total > MAX_MESSAGE_BYTES)
    throw new WireError(`${total} bytes, more than the ${MAX_MESSAGE_BYTES} allowed`);
  return total;
}

function endianOf(buf: Buffer): boolean {
  if (buf[0] === 0x6c) return true;
  if (buf[0] === 0x42) return false;
  throw new WireError(`unknown byte order mark 0x${(buf[0] ?? 0).toString(16)}`);
}

/** Decode one whole message (`messageLength(buf)` bytes). */
export function decodeMessage(buf: Buffer): Message {
  const le = endianOf(buf);
  const r = new Reader(buf, le);
  r.pos = 1;
  const type = r.byte() as MessageType;
  const flags = r.byte();
  const version = r.byte();
  if (version !== 1) throw new WireError(`protocol version ${version}`);
  const bodyLength = r.uint32();
  const serial = r.uint32();
  const fields = r.value('a(yv)') as [number, Variant][];
  r.align(8);
  const message: Message = { type, flags, serial, signature: '', body: [] };
  for (const [code, { value }] of fields) {
    // Unknown fields are ignored, as the specification requires.
    const key = FIELD_KEYS[code];
    if (key) Object.assign(message, { [key]: value });
  }
  const bodyEnd = r.pos + bodyLength;
  if (bodyEnd > buf.length) throw new WireError(`body of ${bodyLength} bytes runs past the message`);
  const body = new Reader(buf.subarray(0, bodyEnd), le);
  body.pos = r.pos;
  for (const type of splitSignature(message.signature)) message.body.push(body.value(type));
  if (body.pos !== bodyEnd) throw new WireError(`${bodyEnd - body.pos} bytes left after the body`);
  return message;
}

/** The single complete types of a signature: `sa{sv}u` → `s`, `a{sv}`, `u`. */
export function splitSignature(signature: string): string[] {
  const types: string[] = [];
  for (let i = 0; i < signature.length;) {
    const end = completeTypeEnd(signature, i);
    types.push(signature.slice(i, end));
    i = end;
  }
  return types;
}

function completeTypeEnd(sig: string, start: number): number {
  const c = sig[start];
  if (c === undefined) throw new WireError(`signature ${JSON.stringify(sig)} ends early`);
  if (c === 'a') return completeTypeEnd(sig, start + 1);
  if (c === '(' || c === '{') {
    const close = c === '(' ? ')' : '}';
    let i = start + 1;
    while (sig[i] !== close) {
      if (i >= sig.length) throw new WireError(`signature ${JSON.stringify(sig)} has an unclosed ${c}`);
      i = completeTypeEnd(sig, i);
    }
    return i + 1;
  }
  if (!(c in ALIGNMENT))
    throw new WireError(`unknown type ${JSON.stringify(c)} in signature ${JSON.stringify(sig)}`);
  return start + 1;
}

const ALIGNMENT: Record<string, number> = {
  y: 1,
  b: 4,
  n: 2,
  q: 2,
  i: 4,
  u: 4,
  x: 8,
  t: 8,
  d: 8,
  h: 4,
  s: 4,
  o: 4,
  g: 1,
  v: 1,
  a: 4,
  '(': 8,
  '{': 8,
};

class Reader {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly le: boolean,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new WireError(`needs ${n} more bytes at offset ${this.pos}`);
  }
  align(alignment: number): void {
    const n = pad(this.pos, alignment);
    this.need(n);
    this.pos += n;
  }
  byte(): number {
    this.need(1);
    return this.buf[this.pos++] ?? 0;
  }
  uint32(): number {
    this.align(4);
    this.need(4);
    const v = this.le ? this.buf.readUInt32LE(this.pos) : this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  private text(length: number): string {
    this.need(length + 1);
    const s = this.buf.toString('utf8', this.pos, this.pos + length);
    if (this.buf[this.pos + length] !== 0)
      throw new WireError(`string at offset ${this.pos} is not terminated`);
    this.pos += length + 1;
    return s;
  }

  /** One value of the single complete type `type`. */
  value(type: string): unknown {
    const c = type[0];
    switch (c) {
      case 'y':
        return this.byte();
      case 'b':
        return this.uint32() !== 0;
      case 'n':
      case 'q': {
        this.align(2);
        this.need(2);
        const v =
          c === 'n'
            ? this.le
              ? this.buf.readInt16LE(this.pos)
              : this.buf.readInt16BE(this.pos)
            : this.le
              ? this.buf.readUInt16LE(this.pos)
              : this.buf.readUInt16BE(this.pos);
        this.pos += 2;
        return v;
      }
      case 'i': {
        const v = this.uint32();
        return v | 0;
      }
      case 'u':
      case 'h':
        return this.uint32();
      case 'x':
      case 't':
      case 'd': {
        this.align(8);
        this.need(8);
        const at = this.pos;
        this.pos += 8;
        if (c === 'd') return this.le ? this.buf.readDoubleLE(at) : this.buf.readDoubleBE(at);
        if (c === 'x') return this.le ? this.buf.readBigInt64LE(at) : this.buf.readBigInt64BE(at);
        return this.le ? this.buf.readBigUInt64LE(at) : this.buf.readBigUInt64BE(at);
      }
      case 's':
      case 'o':
        return this.text(this.uint32());
      case 'g':
        return this.text(this.byte());
      case 'v': {
        const signature = this.text(this.byte());
        const types = splitSignature(signature);
        if (types.length !== 1)
          throw new WireError(`variant signature ${JSON.stringify(signature)} is not one type`);
        return { signature, value: this.value(signature) } satisfies Variant;
      }
      case 'a': {
        const length = this.uint32();
        const element = type.slice(1);
        this.align(ALIGNMENT[element[0] ?? ''] ?? 1);
        const end = this.pos + length;
        if (end > this.buf.length) throw new WireError(`array of ${length} bytes runs past the message`);
        const items: unknown[] = [];
        while (this.pos < end) items.push(this.value(element));
        if (this.pos !== end) throw new WireError(`array element runs past the array's end`);
        return items;
      }
      case '(':
      case '{': {
        this.align(8);
        return splitSignature(type.slice(1, -1)).map((t) => this.value(t));
      }
      default:
        throw new WireError(`unknown type ${JSON.stringify(type)}`);
    }
  }
}
