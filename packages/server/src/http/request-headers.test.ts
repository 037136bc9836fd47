import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRequestHeader } from './request-headers.js';

describe('readRequestHeader with a real Node IncomingMessage', () => {
  let lastRequest: IncomingMessage | undefined;
  const server = createServer((req, res) => {
    lastRequest = req;
    res.end();
  });
  let url: string;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  async function receive(headers: [string, string][]): Promise<IncomingMessage> {
    const res = await fetch(url, { method: 'POST', headers });
    await res.arrayBuffer();
    return lastRequest!;
  }

  it('reads a header from ctx.req whatever case the name is asked in', async () => {
    const req = await receive([['Idempotency-Key', '"abc"']]);
    expect(readRequestHeader({ req }, 'Idempotency-Key')).toBe('"abc"');
    expect(readRequestHeader({ req }, 'IDEMPOTENCY-KEY')).toBe('"abc"');
  });

  it('joins a repeated header with ", " as HTTP combines field lines', async () => {
    const req = await receive([
      ['Idempotency-Keys', 'b0="a"'],
      ['Idempotency-Keys', 'b1="b"'],
    ]);
    expect(readRequestHeader({ req }, 'idempotency-keys')).toBe('b0="a", b1="b"');
  });

  it('returns an empty value as empty, not as missing', async () => {
    const req = await receive([['Idempotency-Key', '']]);
    expect(readRequestHeader({ req }, 'idempotency-key')).toBe('');
  });

  it('returns undefined for a header the request does not have', async () => {
    const req = await receive([]);
    expect(readRequestHeader({ req }, 'idempotency-key')).toBeUndefined();
  });
});

describe('readRequestHeader with other context shapes', () => {
  it('reads a fetch Request in ctx.req (fetch and Next.js adapters)', () => {
    const req = new Request('http://x.test/', { headers: { 'Idempotency-Key': 'k1' } });
    expect(readRequestHeader({ req }, 'idempotency-key')).toBe('k1');
  });

  it('reads a Fastify-shaped request whose headers are a lower-cased record', () => {
    const req = { headers: { 'idempotency-key': 'k2', host: 'x' }, raw: {}, id: 'req-1' };
    expect(readRequestHeader({ req }, 'Idempotency-Key')).toBe('k2');
  });

  it('reads ctx.headers given as Headers', () => {
    expect(readRequestHeader({ headers: new Headers({ 'Idempotency-Key': 'k3' }) }, 'idempotency-key')).toBe('k3');
  });

  it('reads ctx.headers given as a record in any letter case', () => {
    expect(readRequestHeader({ headers: { 'IDEMPOTENCY-KEY': 'k4' } }, 'idempotency-key')).toBe('k4');
    expect(readRequestHeader({ headers: { 'Idempotency-Key': 'k5' } }, 'IDEMPOTENCY-key')).toBe('k5');
  });

  it('reads ctx.headers given as a Map, case-insensitively', () => {
    expect(readRequestHeader({ headers: new Map([['Idempotency-Key', 'k6']]) }, 'idempotency-key')).toBe('k6');
  });

  it('joins an array value from a record', () => {
    expect(readRequestHeader({ headers: { 'idempotency-keys': ['b0="a"', 'b1="b"'] } }, 'idempotency-keys')).toBe(
      'b0="a", b1="b"',
    );
  });

  it('prefers ctx.req and falls back to ctx.headers when the request lacks the header', () => {
    const req = new Request('http://x.test/', { headers: { 'Idempotency-Key': 'from-req' } });
    const headers = { 'idempotency-key': 'from-ctx', 'idempotency-keys': 'b1="x"' };
    expect(readRequestHeader({ req, headers }, 'idempotency-key')).toBe('from-req');
    expect(readRequestHeader({ req, headers }, 'idempotency-keys')).toBe('b1="x"');
  });

  it('returns undefined for contexts that carry no request', () => {
    for (const ctx of [undefined, null, 42, 'x', {}, { req: null }, { req: { headers: 'nope' } }, { headers: 7 }]) {
      expect(readRequestHeader(ctx, 'idempotency-key')).toBeUndefined();
    }
  });

  it('does not treat inherited properties of a record as headers', () => {
    const headers = Object.create({ 'idempotency-key': 'inherited' }) as Record<string, string>;
    expect(readRequestHeader({ headers }, 'idempotency-key')).toBeUndefined();
  });
});
