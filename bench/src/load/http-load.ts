import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { quantile } from './stats.ts';

export interface LoadOptions {
  url: string;
  /** tRPC procedure path, e.g. `light`. */
  path: string;
  /** Concurrent connections, each a closed loop (one request in flight per connection). */
  connections: number;
  /** Measured seconds. */
  durationMs: number;
  /** Unmeasured seconds first (JIT, pool connections). */
  warmupMs?: number;
  /** Key for the n-th request; undefined sends none. */
  key: (n: number) => string | undefined;
  /** Request body for the n-th request. */
  body?: (n: number) => string;
  /** Ends the run early (checked before each request), e.g. when a concurrent purge has finished. */
  stopWhen?: () => boolean;
}

export interface LoadResult {
  /** Requests answered in the measured part. */
  requests: number;
  /** Requests sent in all, warm-up included (for per-request server counters). */
  sent: number;
  rps: number;
  p50: number;
  p99: number;
  mean: number;
  /** Responses by HTTP status. */
  statuses: Record<string, number>;
  /** Client-side errors (connection reset, …). */
  errors: number;
}

/** Random account, small amount: spreads the payment handler's row locks over 1,000 accounts. */
export const randomPaymentBody = () =>
  `{"accountId":${1 + Math.floor(Math.random() * 1000)},"amount":${1 + Math.floor(Math.random() * 100)}}`;

const pools = new Map<string, Pool>();

/** One keep-alive undici pool per server, reused across runs so every run starts on warm sockets. */
function poolFor(url: string, connections: number): Pool {
  const id = `${url}#${connections}`;
  let pool = pools.get(id);
  if (!pool) {
    pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
    pools.set(id, pool);
  }
  return pool;
}

export async function closeLoadPools(): Promise<void> {
  await Promise.all([...pools.values()].map((p) => p.close()));
  pools.clear();
}

/** Closed-loop load: `connections` workers each send a request as soon as the previous one is answered. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const pool = poolFor(opts.url, opts.connections);
  const body = opts.body ?? randomPaymentBody;
  const path = `/${opts.path}`;
  let n = 0;
  let measuring = false;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const warmupEnd = performance.now() + (opts.warmupMs ?? 0);
  const end = warmupEnd + opts.durationMs;
  let measuredStart = warmupEnd;

  const worker = async () => {
    for (;;) {
      const now = performance.now();
      if (now >= end || opts.stopWhen?.()) return;
      if (!measuring && now >= warmupEnd) {
        measuring = true;
        measuredStart = now;
      }
      const i = n++;
      const key = opts.key(i);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (key !== undefined) headers['idempotency-key'] = key;
      const started = performance.now();
      try {
        const res = await pool.request({ path, method: 'POST', headers, body: body(i) });
        await res.body.dump();
        if (started >= warmupEnd) {
          latencies.push(performance.now() - started);
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        }
      } catch {
        if (started >= warmupEnd) errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, worker));
  const elapsed = (performance.now() - measuredStart) / 1000;
  latencies.sort((a, b) => a - b);
  const sum = latencies.reduce((a, b) => a + b, 0);
  return {
    requests: latencies.length,
    sent: n,
    rps: latencies.length / elapsed,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    mean: latencies.length ? sum / latencies.length : Number.NaN,
    statuses,
    errors,
  };
}

/** Sends `count` requests with the given keys (setup for replays), `connections` at a time. */
export async function sendKeys(url: string, path: string, keys: string[], connections: number): Promise<number> {
  const pool = poolFor(url, connections);
  let next = 0;
  let ok = 0;
  const worker = async () => {
    while (next < keys.length) {
      const key = keys[next++]!;
      const res = await pool.request({
        path: `/${path}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: '{"accountId":1,"amount":1}',
      });
      await res.body.dump();
      if (res.statusCode === 200) ok++;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return ok;
}
