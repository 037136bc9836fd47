import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { markReplayed, setResponseHeader, setRetryAfter } from './response-headers.js';

/** Runs one request against a real server whose handler gets the ServerResponse; returns what the client saw. */
async function serve(handler: (res: ServerResponse) => void | Promise<void>): Promise<Response> {
  const server = createServer(async (_req, res) => {
    await handler(res);
    if (!res.writableEnded) res.end('ok');
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  await res.text();
  return res;
}
const servers: ReturnType<typeof createServer>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** The part of a FastifyReply the helpers use, with Fastify's behaviour (fastify itself is not a dependency). */
class FastifyLikeReply {
  sent = false;
  readonly headers = new Map<string, string>();
  header(name: string, value: string): this {
    if (this.sent) throw new Error('Reply already sent');
    this.headers.set(name.toLowerCase(), value);
    return this;
  }
  getHeader(name: string): string | undefined {
    return this.headers.get(name.toLowerCase());
  }
}

describe('setResponseHeader', () => {
  it('writes into ctx.resHeaders (fetch and Next.js adapters)', () => {
    const resHeaders = new Headers();
    expect(setResponseHeader({ resHeaders }, 'Retry-After', '3')).toBe(true);
    expect(resHeaders.get('retry-after')).toBe('3');
  });

  it('writes through a Node ServerResponse before it is sent', async () => {
    let written: boolean | undefined;
    const res = await serve((r) => {
      written = setResponseHeader({ res: r }, 'Idempotent-Replayed', 'true');
    });
    expect(written).toBe(true);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
  });

  it('returns false, without throwing, once a ServerResponse has sent its headers', async () => {
    let written: boolean | undefined;
    const res = await serve(async (r) => {
      r.writeHead(200);
      r.write('partial');
      written = setResponseHeader({ res: r }, 'Idempotent-Replayed', 'true');
    });
    expect(written).toBe(false);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
  });

  it('returns false once a ServerResponse has ended', async () => {
    let written: boolean | undefined;
    await serve((r) => {
      r.end('done');
      written = setResponseHeader({ res: r }, 'Retry-After', '1');
    });
    expect(written).toBe(false);
  });

  it("writes through a Fastify reply's header() until it is sent", () => {
    const reply = new FastifyLikeReply();
    expect(setResponseHeader({ res: reply }, 'Retry-After', '2')).toBe(true);
    expect(reply.getHeader('retry-after')).toBe('2');
    reply.sent = true;
    expect(setResponseHeader({ res: reply }, 'Retry-After', '5')).toBe(false);
    expect(reply.getHeader('retry-after')).toBe('2');
  });

  it('returns false when the context has nowhere to write', () => {
    for (const ctx of [undefined, {}, { res: {} }, { resHeaders: {} }, { res: null }]) {
      expect(setResponseHeader(ctx, 'Retry-After', '1')).toBe(false);
    }
  });

  it('prefers ctx.resHeaders over ctx.res', () => {
    const resHeaders = new Headers();
    const reply = new FastifyLikeReply();
    setResponseHeader({ resHeaders, res: reply }, 'Retry-After', '4');
    expect(resHeaders.get('retry-after')).toBe('4');
    expect(reply.getHeader('retry-after')).toBeUndefined();
  });
});

describe('markReplayed', () => {
  it('flags a single call with the literal true', () => {
    const resHeaders = new Headers();
    markReplayed({ resHeaders }, 'single', 0);
    expect(resHeaders.get('idempotent-replayed')).toBe('true');
  });

  it('lists the replayed calls of a batch as b<index> tokens in index order, whatever order they finish', () => {
    const resHeaders = new Headers();
    markReplayed({ resHeaders }, 'batch', 2);
    markReplayed({ resHeaders }, 'batch', 0);
    expect(resHeaders.get('idempotent-replayed')).toBe('b0, b2');
    markReplayed({ resHeaders }, 'batch', 10);
    expect(resHeaders.get('idempotent-replayed')).toBe('b0, b2, b10');
  });

  it('never lists a call twice', () => {
    const resHeaders = new Headers();
    markReplayed({ resHeaders }, 'batch', 1);
    markReplayed({ resHeaders }, 'batch', 1);
    expect(resHeaders.get('idempotent-replayed')).toBe('b1');
  });

  it('merges batch tokens through a Node ServerResponse and a Fastify reply too', async () => {
    const res = await serve((r) => {
      markReplayed({ res: r }, 'batch', 3);
      markReplayed({ res: r }, 'batch', 1);
    });
    expect(res.headers.get('idempotent-replayed')).toBe('b1, b3');

    const reply = new FastifyLikeReply();
    markReplayed({ res: reply }, 'batch', 4);
    markReplayed({ res: reply }, 'batch', 0);
    expect(reply.getHeader('idempotent-replayed')).toBe('b0, b4');
  });

  it('does nothing when headers cannot be written', () => {
    expect(() => markReplayed({}, 'batch', 0)).not.toThrow();
    expect(() => markReplayed(undefined, 'single', 0)).not.toThrow();
  });
});

describe('setRetryAfter', () => {
  it('rounds milliseconds up to whole seconds so the client never comes back early', () => {
    const cases: [number, string][] = [
      [1, '1'],
      [999, '1'],
      [1000, '1'],
      [1001, '2'],
      [5000, '5'],
      [0, '0'],
      [-5, '0'],
      [Number.NaN, '0'],
    ];
    for (const [ms, header] of cases) {
      const resHeaders = new Headers();
      setRetryAfter({ resHeaders }, ms);
      expect(resHeaders.get('retry-after'), String(ms)).toBe(header);
    }
  });
});
