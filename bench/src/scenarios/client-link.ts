import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createTRPCClient, httpLink, type TRPCLink } from '@trpc/client';
import * as current from '@trpc-idempotency/client';
import { idempotencyFetch, idempotencyHeaders, idempotencyLink } from '@trpc-idempotency/client';
import { type BenchEnv, rotate, server } from '../bench-env.ts';
import { median, quantile, type Spread, spread } from '../load/stats.ts';
import type { buildRouter } from '../server/router.ts';

type BenchRouter = Awaited<ReturnType<typeof buildRouter>>;

export interface LinkOverheadRow {
  client: string;
  opsPerSecond: number;
  p50: number;
  p99: number;
  /** Client process CPU per operation (user + system), µs: what the link itself costs. */
  cpuMicrosPerOp: number;
  /** Per-round throughput ratio to the bare httpLink. */
  ratio: Spread;
}

export interface OutageRow {
  budget: 'default retryBudget()' | 'budget: false';
  calls: number;
  httpRequests: number;
  /** HTTP requests per logical call. */
  amplification: number;
  seconds: number;
}

export interface ClientLinkResult {
  overhead: LinkOverheadRow[];
  outage: OutageRow[];
}

interface Run {
  ops: number;
  seconds: number;
  latencies: number[];
  cpuMicros: number;
}

async function loop(call: () => Promise<unknown>, connections: number, durationMs: number): Promise<Run> {
  const latencies: number[] = [];
  const warmEnd = performance.now() + 200;
  while (performance.now() < warmEnd) await call();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + durationMs;
  const worker = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await call();
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  return { ops: latencies.length, seconds, latencies, cpuMicros: used.user + used.system };
}

/**
 * Per-operation cost of idempotencyLink over a bare httpLink (no faults, an unguarded no-op mutation on the
 * plain server), and retry amplification in a full outage (every request answered 503 by a proxy-like page).
 */
export async function clientLinkScenario(env: BenchEnv): Promise<ClientLinkResult> {
  const { params } = env;
  const url = server(env, 'plain').url;
  const bare = createTRPCClient<BenchRouter>({ links: [httpLink({ url })] });
  const linked = createTRPCClient<BenchRouter>({
    links: [
      idempotencyLink<BenchRouter>({ procedures: ['noop'] }) as TRPCLink<BenchRouter>,
      httpLink({ url, headers: idempotencyHeaders, fetch: idempotencyFetch() }),
    ],
  });
  const clients: Record<string, typeof bare> = {
    httpLink: bare,
    'idempotencyLink + httpLink': linked,
    'pendingCallsLink (store) + idempotencyLink + httpLink': withStore(current, url),
  };
  // BENCH_BEFORE_CLIENT_DIST=<another build's packages/client/dist>: its links too, as `(before)` rows, for an A/B of
  // two client builds in one run (interleaved rounds, same server, same machine state).
  if (process.env.BENCH_BEFORE_CLIENT_DIST) {
    const before = (await import(`${process.env.BENCH_BEFORE_CLIENT_DIST}/index.js`)) as typeof current;
    clients['idempotencyLink + httpLink (before)'] = createTRPCClient<BenchRouter>({
      links: [
        before.idempotencyLink<BenchRouter>({ procedures: ['noop'] }) as TRPCLink<BenchRouter>,
        httpLink({ url, headers: before.idempotencyHeaders, fetch: before.idempotencyFetch() }),
      ],
    });
    clients['pendingCallsLink (store) + idempotencyLink + httpLink (before)'] = withStore(before, url);
  }
  const names = Object.keys(clients);
  const runs = new Map<string, Run[]>();
  for (let round = 0; round < params.linkRounds; round++) {
    for (const name of rotate(names, round)) {
      const client = clients[name]!;
      const run = await loop(() => client.noop.mutate(), params.connections, params.durationMs);
      runs.set(name, [...(runs.get(name) ?? []), run]);
      env.log(`  round ${round + 1} ${name.padEnd(28)} ${(run.ops / run.seconds).toFixed(0)} ops/s`);
    }
  }
  const bareRuns = runs.get('httpLink')!;
  const overhead = names.map((name): LinkOverheadRow => {
    const rs = runs.get(name)!;
    return {
      client: name,
      opsPerSecond: median(rs.map((r) => r.ops / r.seconds)),
      p50: median(rs.map((r) => quantile(r.latencies, 0.5))),
      p99: median(rs.map((r) => quantile(r.latencies, 0.99))),
      cpuMicrosPerOp: median(rs.map((r) => r.cpuMicros / r.ops)),
      ratio: spread(rs.map((r, i) => r.ops / r.seconds / (bareRuns[i]!.ops / bareRuns[i]!.seconds))),
    };
  });
  return { overhead, outage: [await outage(params.outageCalls, true), await outage(params.outageCalls, false)] };
}

/** The links as an app keeping calls across reloads chains them, over an in-memory Web Storage. */
function withStore(links: typeof current, url: string) {
  const data = new Map<string, string>();
  const storage = {
    get length() {
      return data.size;
    },
    key: (index: number) => [...data.keys()][index] ?? null,
    getItem: (name: string) => data.get(name) ?? null,
    setItem: (name: string, value: string) => void data.set(name, value),
    removeItem: (name: string) => void data.delete(name),
  };
  const { pendingCallsLink, localStorageStore } = links;
  return createTRPCClient<BenchRouter>({
    links: [
      pendingCallsLink<BenchRouter>({
        procedures: ['noop'],
        store: localStorageStore({ storage }),
      }) as TRPCLink<BenchRouter>,
      links.idempotencyLink<BenchRouter>({ procedures: ['noop'] }) as TRPCLink<BenchRouter>,
      httpLink({ url, headers: links.idempotencyHeaders, fetch: links.idempotencyFetch() }),
    ],
  });
}

/** Every request answered 503 with an HTML page, as a load balancer does when nothing is behind it. */
async function outage(calls: number, withBudget: boolean): Promise<OutageRow> {
  let httpRequests = 0;
  const down = createServer((req, res) => {
    httpRequests++;
    req.resume();
    res.writeHead(503, { 'content-type': 'text/html' }).end('<html><body>503 Service Unavailable</body></html>');
  });
  await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve));
  const address = down.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const client = createTRPCClient<BenchRouter>({
    links: [
      idempotencyLink<BenchRouter>({
        procedures: ['noop'],
        // Short backoff so the run takes seconds; the count of requests is what is measured.
        baseDelayMs: 5,
        maxDelayMs: 50,
        ...(withBudget ? {} : { budget: false as const }),
      }) as TRPCLink<BenchRouter>,
      httpLink({ url, headers: idempotencyHeaders, fetch: idempotencyFetch() }),
    ],
  });
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < calls) {
      next++;
      await client.noop.mutate().catch(() => {});
    }
  };
  await Promise.all(Array.from({ length: 50 }, worker));
  const seconds = (performance.now() - started) / 1000;
  await new Promise((resolve) => down.close(resolve));
  return {
    budget: withBudget ? 'default retryBudget()' : 'budget: false',
    calls,
    httpRequests,
    amplification: httpRequests / calls,
    seconds,
  };
}
