import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FaultMode } from '../src/network/faultModes';
import { flakyFetch, type NetworkAttempt, replayedKeys, requestKeys } from '../src/network/flakyFetch';

/** A real HTTP server that records what reached it. */
let server: Server;
let url: string;
let received: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    received.push(req.headers);
    if (req.headers['x-demo-fault'] === 'unavailable') {
      res.writeHead(503, { 'retry-after': '1' }).end('shed');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'idempotent-replayed': 'true' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/trpc/payments.create`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  received = [];
});

function keyed(key: string, signal?: AbortSignal): RequestInit {
  return { method: 'POST', body: '{}', headers: { 'Idempotency-Key': `"${key}"` }, signal };
}

function subject(mode: FaultMode, extra: { slowMs?: number } = {}) {
  const attempts: NetworkAttempt[] = [];
  return { attempts, fetch: flakyFetch({ mode: () => mode, onAttempt: (a) => attempts.push(a), ...extra }) };
}

describe('flakyFetch', () => {
  it('reads the key of a single call and the keys of a batch', () => {
    expect(requestKeys(new Headers({ 'Idempotency-Key': '"k-1"' }))).toEqual(['k-1']);
    expect(requestKeys(new Headers({ 'Idempotency-Keys': 'b0="a", b2="c"' }))).toEqual(['a', 'c']);
    expect(requestKeys(new Headers())).toEqual([]);
  });

  it('maps Idempotent-Replayed onto the keys of a single call or a batch', () => {
    const replayed = (value: string | null, keys: string[]) =>
      replayedKeys(keys, new Response(null, { headers: value === null ? {} : { 'Idempotent-Replayed': value } }));
    expect(replayed('true', ['a'])).toEqual(['a']);
    expect(replayed('b0, b2', ['a', 'b', 'c'])).toEqual(['a', 'c']);
    expect(replayed(null, ['a'])).toEqual([]);
  });

  it('lets a lost response reach the server, then rejects like a dropped connection', async () => {
    const { fetch, attempts } = subject('lose-response');
    await expect(fetch(url, keyed('k-lost'))).rejects.toThrow(TypeError);
    expect(received).toHaveLength(1);
    expect(attempts).toEqual([{ keys: ['k-lost'], fault: 'lose-response', outcome: 'lost', replayed: ['k-lost'] }]);
  });

  it('injects the fault into the first attempt of a key only', async () => {
    const { fetch } = subject('lose-response');
    await expect(fetch(url, keyed('k-once'))).rejects.toThrow();
    const retry = await fetch(url, keyed('k-once'));
    expect(retry.status).toBe(200);
    expect(received).toHaveLength(2);
  });

  it('never touches a request without a key', async () => {
    const { fetch, attempts } = subject('lose-response');
    const response = await fetch(url, { method: 'GET' });
    expect(response.status).toBe(200);
    expect(attempts[0]?.fault).toBeNull();
  });

  it('holds a slow response until the caller aborts, then rejects with the abort reason', async () => {
    const { fetch, attempts } = subject('slow-response', { slowMs: 10_000 });
    const controller = new AbortController();
    const pending = fetch(url, keyed('k-slow', controller.signal));
    setTimeout(() => controller.abort(new Error('attempt timeout')), 200);
    await expect(pending).rejects.toThrow('attempt timeout');
    expect(received).toHaveLength(1);
    expect(attempts[0]?.outcome).toBe('timed-out');
  });

  it('marks an attempt so the server sheds it with a real 503', async () => {
    const { fetch } = subject('unavailable');
    const response = await fetch(url, keyed('k-503'));
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(received[0]?.['x-demo-fault']).toBe('unavailable');
  });

  it('sends an earlier copy of the request ahead of the real one, both asking for a slow handler', async () => {
    const { fetch } = subject('in-flight-duplicate');
    const response = await fetch(url, keyed('k-dup'));
    expect(response.status).toBe(200);
    await expect.poll(() => received.length).toBe(2);
    expect(received.map((headers) => headers['idempotency-key'])).toEqual(['"k-dup"', '"k-dup"']);
    expect(received.every((headers) => Number(headers['x-demo-processing-ms']) > 0)).toBe(true);
  });
});
