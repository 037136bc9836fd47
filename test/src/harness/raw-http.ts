import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

/**
 * Sends one HTTP/1.1 request as raw bytes, so header values fetch would refuse (control characters,
 * non-ASCII, 1 MB) reach the server, or Node's own parser, exactly as written.
 */
export function rawRequest(opts: {
  port: number;
  method?: string;
  path: string;
  headers?: [string, string | Buffer][];
  body?: string;
}): Promise<RawResponse> {
  const body = Buffer.from(opts.body ?? '', 'utf8');
  const head: Buffer[] = [
    Buffer.from(`${opts.method ?? 'POST'} ${opts.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 'latin1'),
  ];
  head.push(Buffer.from(`Connection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n`));
  for (const [name, value] of opts.headers ?? []) {
    head.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'utf8') : value);
    head.push(Buffer.from('\r\n', 'latin1'));
  }
  head.push(Buffer.from('\r\n', 'latin1'), body);
  return new Promise((resolve, reject) => {
    const socket = connect({ port: opts.port, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    // The server may answer and close before reading a huge header: a reset after an answer is still an answer.
    socket.on('error', (err) => (chunks.length ? finish() : reject(err)));
    socket.on('end', () => finish());
    socket.on('close', () => finish());
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      try {
        resolve(parse(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    };
    socket.write(Buffer.concat(head));
  });
}

function parse(raw: Buffer): RawResponse {
  const split = raw.indexOf('\r\n\r\n');
  if (split < 0) throw new Error(`no HTTP response: ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`);
  const [statusLine = '', ...lines] = raw.subarray(0, split).toString('latin1').split('\r\n');
  const status = Number(statusLine.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let bodyBytes = raw.subarray(split + 4);
  if (headers['transfer-encoding'] === 'chunked') bodyBytes = dechunk(bodyBytes);
  const body = bodyBytes.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    json = undefined;
  }
  return { status, headers, body, json };
}

/** Chunk sizes count bytes, so chunked bodies are decoded before any text decoding. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let rest = body;
  for (;;) {
    const nl = rest.indexOf('\r\n');
    if (nl < 0) return Buffer.concat(parts);
    const size = Number.parseInt(rest.subarray(0, nl).toString('latin1'), 16);
    if (!size) return Buffer.concat(parts);
    parts.push(rest.subarray(nl + 2, nl + 2 + size));
    rest = rest.subarray(nl + 2 + size + 2);
  }
}
