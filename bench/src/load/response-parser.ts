/**
 * Just enough of an HTTP/1.1 response parser for the raw load generator: the status of each response and
 * where its body ends (Content-Length, chunked, or the connection's close), nothing kept of the body.
 * Responses may arrive split across packets at any byte, or several in one packet.
 */

export interface ParsedResponse {
  status: number;
  /** The server will close the connection after this response (`Connection: close`, or HTTP/1.0 without keep-alive). */
  close: boolean;
}

enum State {
  Head,
  Body,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  UntilClose,
}

/** Longest head or chunk-size line kept while waiting for its end: a runaway means a broken response. */
const MAX_LINE_BYTES = 64 * 1024;

export class ResponseParser {
  private state = State.Head;
  /** Bytes of a head or line not yet complete, kept until the next packet. */
  private rest: Buffer | undefined;
  /** Body or chunk bytes still to skip (in ChunkEnd: the CRLF bytes still to check). */
  private remaining = 0;
  private current: ParsedResponse = { status: 0, close: false };

  /** Feeds one packet; returns the responses it completed, in order. Throws on a malformed response. */
  push(chunk: Buffer): ParsedResponse[] {
    const data = this.rest ? Buffer.concat([this.rest, chunk]) : chunk;
    this.rest = undefined;
    const done: ParsedResponse[] = [];
    let pos = 0;
    while (pos < data.length) {
      switch (this.state) {
        case State.Head: {
          const end = data.indexOf('\r\n\r\n', pos, 'latin1');
          if (end < 0) return this.keep(data, pos, done);
          const complete = this.head(data.toString('latin1', pos, end));
          pos = end + 4;
          if (complete) done.push(this.finish());
          break;
        }
        case State.Body: {
          const take = Math.min(this.remaining, data.length - pos);
          pos += take;
          this.remaining -= take;
          if (this.remaining === 0) done.push(this.finish());
          break;
        }
        case State.ChunkSize: {
          const end = data.indexOf('\r\n', pos, 'latin1');
          if (end < 0) return this.keep(data, pos, done);
          const line = data.toString('latin1', pos, end);
          const size = Number.parseInt(line, 16);
          if (!/^[0-9a-fA-F]+(;|$)/.test(line) || !Number.isFinite(size)) throw new Error(`bad chunk size: ${line}`);
          pos = end + 2;
          this.remaining = size;
          this.state = size === 0 ? State.Trailers : State.ChunkData;
          break;
        }
        case State.ChunkData: {
          const take = Math.min(this.remaining, data.length - pos);
          pos += take;
          this.remaining -= take;
          if (this.remaining === 0) {
            this.state = State.ChunkEnd;
            this.remaining = 2;
          }
          break;
        }
        case State.ChunkEnd: {
          const expected = this.remaining === 2 ? 13 : 10;
          if (data[pos] !== expected) throw new Error('chunk data not followed by CRLF');
          pos++;
          if (--this.remaining === 0) this.state = State.ChunkSize;
          break;
        }
        case State.Trailers: {
          const end = data.indexOf('\r\n', pos, 'latin1');
          if (end < 0) return this.keep(data, pos, done);
          // An empty line ends the trailers (and the response); any other line is a trailer, skipped.
          if (end === pos) done.push(this.finish());
          pos = end + 2;
          break;
        }
        case State.UntilClose:
          pos = data.length;
          break;
      }
    }
    return done;
  }

  /** The connection ended: completes a body delimited by the close; a response cut short is an error. */
  end(): ParsedResponse | undefined {
    if (this.state === State.UntilClose) return this.finish();
    const midway = this.state !== State.Head || this.rest !== undefined;
    this.reset();
    if (midway) throw new Error('connection closed in the middle of a response');
    return undefined;
  }

  reset(): void {
    this.state = State.Head;
    this.rest = undefined;
    this.remaining = 0;
  }

  private keep(data: Buffer, pos: number, done: ParsedResponse[]): ParsedResponse[] {
    if (data.length - pos > MAX_LINE_BYTES) throw new Error('response head or chunk line too long');
    // A copy, so the kept bytes do not pin the whole packet's buffer.
    this.rest = Buffer.from(data.subarray(pos));
    return done;
  }

  /** Parses a head; true when the response has no body (so it is complete). */
  private head(text: string): boolean {
    const lines = text.split('\r\n');
    const statusLine = lines[0] ?? '';
    const match = /^HTTP\/1\.([01]) (\d{3})/.exec(statusLine);
    if (!match) throw new Error(`bad status line: ${statusLine.slice(0, 80)}`);
    const status = Number(match[2]);
    let length: number | undefined;
    let chunked = false;
    let connection = '';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') length = Number(value);
      else if (name === 'transfer-encoding')
        chunked = value
          .toLowerCase()
          .split(/\s*,\s*/)
          .includes('chunked');
      else if (name === 'connection') connection = value.toLowerCase();
    }
    // 1xx heads (100 Continue) precede the real response: skip them.
    if (status < 200) return false;
    const http10 = match[1] === '0';
    this.current = { status, close: connection === 'close' || (http10 && connection !== 'keep-alive') };
    if (status === 204 || status === 304) return true;
    if (chunked) {
      this.state = State.ChunkSize;
      return false;
    }
    if (length !== undefined) {
      if (!Number.isInteger(length) || length < 0) throw new Error(`bad content-length: ${length}`);
      if (length === 0) return true;
      this.state = State.Body;
      this.remaining = length;
      return false;
    }
    this.state = State.UntilClose;
    this.current.close = true;
    return false;
  }

  private finish(): ParsedResponse {
    const response = this.current;
    this.current = { status: 0, close: false };
    this.state = State.Head;
    this.remaining = 0;
    return response;
  }
}

/** Every way to cut `bytes` in two, and byte by byte: each must parse to `expected`. */
function checkSplits(name: string, bytes: Buffer, expected: ParsedResponse[]): void {
  const feeds: Buffer[][] = [[bytes], Array.from(bytes, (b) => Buffer.from([b]))];
  for (let cut = 1; cut < bytes.length; cut++) feeds.push([bytes.subarray(0, cut), bytes.subarray(cut)]);
  for (const feed of feeds) {
    const parser = new ResponseParser();
    const got = feed.flatMap((packet) => parser.push(packet));
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      throw new Error(
        `response parser self-check "${name}" failed for packets of ${feed.map((p) => p.length).join('+')} bytes: ` +
          `got ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`,
      );
    }
  }
}

/**
 * Run at the bench's start (the bench has no test suite): a parser that miscounted would silently change
 * every throughput figure, so a wrong answer stops the run.
 */
export function selfCheckResponseParser(): void {
  const ok = { status: 200, close: false };
  const body = '{"result":{"data":{"ok":true,"note":"\\r\\n\\r\\n"}}}';
  const lengthed = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  checkSplits('content-length', Buffer.from(lengthed, 'latin1'), [ok]);
  const chunkedBody = `5\r\nhello\r\n1A;ext=1\r\n${'x'.repeat(26)}\r\n0\r\n`;
  const chunked = `HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n${chunkedBody}\r\n`;
  checkSplits('chunked', Buffer.from(chunked, 'latin1'), [{ status: 409, close: false }]);
  const trailers = `HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n${chunkedBody}X-Trailer: 1\r\n\r\n`;
  checkSplits('chunked with a trailer', Buffer.from(trailers, 'latin1'), [ok]);
  const closing = `HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`;
  const noBody = 'HTTP/1.1 204 No Content\r\n\r\n';
  const continued = `HTTP/1.1 100 Continue\r\n\r\n${lengthed}`;
  checkSplits('several in one packet', Buffer.from(lengthed + chunked + noBody + continued + closing, 'latin1'), [
    ok,
    { status: 409, close: false },
    { status: 204, close: false },
    ok,
    { status: 503, close: true },
  ]);
  const untilClose = new ResponseParser();
  const head = untilClose.push(Buffer.from('HTTP/1.0 200 OK\r\n\r\npartial body', 'latin1'));
  const last = untilClose.end();
  if (head.length !== 0 || last?.status !== 200 || !last.close) {
    throw new Error('response parser self-check "body until close" failed');
  }
  for (const broken of ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'HTTP/1.1 2xx\r\n\r\n']) {
    let threw = false;
    try {
      new ResponseParser().push(Buffer.from(broken, 'latin1'));
    } catch {
      threw = true;
    }
    if (!threw) throw new Error(`response parser self-check: accepted a malformed response ${JSON.stringify(broken)}`);
  }
  const cut = new ResponseParser();
  cut.push(Buffer.from(lengthed.slice(0, -3), 'latin1'));
  let cutThrew = false;
  try {
    cut.end();
  } catch {
    cutThrew = true;
  }
  if (!cutThrew) throw new Error('response parser self-check: a response cut short by the close was not an error');
}
