import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { RawConnection } from './raw-connection.ts';
import { quantile } from './stats.ts';

/**
 * Which client drives the load: `raw` (src/load/raw-connection.ts, a `node:net` socket per connection) or
 * `undici` (a keep-alive `Pool`). Both are closed loops with one request in flight per connection; they differ
 * in the load generator's own CPU per request, which on 2 shared cores the servers do not get.
 */
export type LoadGenerator = 'raw' | 'undici';
export const loadGenerators: readonly LoadGenerator[] = ['raw', 'undici'];
let generator: LoadGenerator = 'raw';

export function useLoadGenerator(kind: LoadGenerator): void {
  generator = kind;
}

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
  /** This process's CPU (the load generator's) per request sent, warm-up included, µs. */
  loadCpuMicros: number;
}

/** Random account, small amount: spreads the payment handler's row locks over 1,000 accounts. */
export const randomPaymentBody = () =>
  `{"accountId":${1 + Math.floor(Math.random() * 1000)},"amount":${1 + Math.floor(Math.random() * 100)}}`;

const pools = new Map<string, Pool>();
const rawConnections = new Map<string, RawConnection[]>();

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

/** POSTs a body with an optional key; resolves with the status once the body is read. */
type Lane = (path: string, key: string | undefined, body: string) => Promise<number>;

/**
 * One lane per closed-loop worker. Raw: a connection of its own, kept per server across runs (warm sockets,
 * like the undici pool). Undici: the pool, `connections` wide, shared by the workers.
 */
function lanesFor(url: string, connections: number): Lane[] {
  if (generator === 'raw') {
    const list = rawConnections.get(url) ?? [];
    rawConnections.set(url, list);
    while (list.length < connections) list.push(new RawConnection(url));
    return list.slice(0, connections).map((c) => c.post.bind(c));
  }
  const pool = poolFor(url, connections);
  const lane: Lane = async (path, key, body) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key !== undefined) headers['idempotency-key'] = key;
    const res = await pool.request({ path, method: 'POST', headers, body });
    await res.body.dump();
    return res.statusCode;
  };
  return Array.from({ length: connections }, () => lane);
}

export async function closeLoadPools(): Promise<void> {
  await Promise.all([...pools.values()].map((p) => p.close()));
  pools.clear();
  for (const list of rawConnections.values()) for (const c of list) c.close();
  rawConnections.clear();
}

/** Closed-loop load: `connections` workers each send a request as soon as the previous one is answered. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const lanes = lanesFor(opts.url, opts.connections);
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
  const cpuBefore = process.cpuUsage();

  const worker = async (lane: Lane) => {
    for (;;) {
      const now = performance.now();
      if (now >= end || opts.stopWhen?.()) return;
      if (!measuring && now >= warmupEnd) {
        measuring = true;
        measuredStart = now;
      }
      const i = n++;
      const started = performance.now();
      try {
        const status = await lane(path, opts.key(i), body(i));
        if (started >= warmupEnd) {
          latencies.push(performance.now() - started);
          statuses[status] = (statuses[status] ?? 0) + 1;
        }
      } catch {
        if (started >= warmupEnd) errors++;
      }
    }
  };
  await Promise.all(lanes.map(worker));
  const elapsed = (performance.now() - measuredStart) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
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
    loadCpuMicros: (cpu.user + cpu.system) / n,
  };
}

/** Sends `count` requests with the given keys (setup for replays), `connections` at a time. */
export async function sendKeys(url: string, path: string, keys: string[], connections: number): Promise<number> {
  let next = 0;
  let ok = 0;
  const worker = async (lane: Lane) => {
    while (next < keys.length) {
      const status = await lane(`/${path}`, keys[next++]!, '{"accountId":1,"amount":1}');
      if (status === 200) ok++;
    }
  };
  await Promise.all(lanesFor(url, connections).map(worker));
  return ok;
}
