import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from './fault-proxy.ts';

/** A plain HTTP server that counts the requests it answered and names itself in the body. */
async function upstream(name: string) {
  const state = { answered: 0 };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.answered++;
      res.end(name);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, state, port: (server.address() as AddressInfo).port };
}

const ups: Awaited<ReturnType<typeof upstream>>[] = [];
beforeAll(async () => {
  ups.push(await upstream('a'), await upstream('b'));
});
afterAll(async () => {
  for (const u of ups) {
    u.server.closeAllConnections();
    await new Promise<void>((resolve) => u.server.close(() => resolve()));
  }
});

const post = (url: string, timeoutMs = 2_000) =>
  fetch(url, { method: 'POST', body: 'x', signal: AbortSignal.timeout(timeoutMs) }).then(
    async (r) => ({ ok: true as const, body: await r.text() }),
    (err: Error) => ({ ok: false as const, body: err.name }),
  );

describe('FaultProxy', () => {
  it('passes every request through, round-robin per request over one keep-alive connection', async () => {
    const proxy = await new FaultProxy({ upstreams: ups.map((u) => u.port) }).listen();
    const bodies: string[] = [];
    for (let i = 0; i < 6; i++) bodies.push((await post(proxy.url)).body);
    await proxy.close();
    expect(bodies).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(proxy.stats.passed).toBe(6);
    expect(proxy.stats.perUpstream).toEqual([3, 3]);
  });

  it('drops answers only after the server answered, and resets before the server sees anything', async () => {
    const first = ups[0];
    if (!first) throw new Error('no upstream');
    const before = first.state.answered;
    const proxy = await new FaultProxy({ upstreams: [first.port], faults: { drop: 1 } }).listen();
    const dropped = await post(proxy.url);
    proxy.setFaults({ reset: 1 });
    const reset = await post(proxy.url);
    await proxy.close();
    expect(dropped.ok).toBe(false);
    expect(reset.ok).toBe(false);
    // The dropped request reached the server and was answered; the reset one never arrived.
    expect(first.state.answered - before).toBe(1);
    expect(proxy.stats).toMatchObject({ requests: 2, drops: 1, resets: 1, passed: 0 });
  });

  it('holds a delayed answer past the client timeout', async () => {
    const proxy = await new FaultProxy({ upstreams: [ups[0]?.port ?? 0], faults: { delay: 1, delayMs: 600 } }).listen();
    const timedOut = await post(proxy.url, 200);
    const patient = await post(proxy.url, 2_000);
    await proxy.close();
    expect(timedOut).toEqual({ ok: false, body: 'TimeoutError' });
    expect(patient).toEqual({ ok: true, body: 'a' });
    expect(proxy.stats.delays).toBe(2);
  });

  it('draws the same fault schedule from the same seed', async () => {
    const schedule = async () => {
      const proxy = await new FaultProxy({
        upstreams: [ups[0]?.port ?? 0],
        seed: 42,
        faults: { drop: 0.3, reset: 0.3 },
      }).listen();
      const out: boolean[] = [];
      for (let i = 0; i < 20; i++) out.push((await post(proxy.url)).ok);
      await proxy.close();
      return out;
    };
    const a = await schedule();
    expect(await schedule()).toEqual(a);
    expect(a.filter(Boolean).length).toBeGreaterThan(0);
    expect(a.filter((ok) => !ok).length).toBeGreaterThan(0);
  });
});
