import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { ContenderSpec } from './contenders/contender-spec.ts';
import { type LoadGenerator, loadGenerators } from './load/http-load.ts';
import type { BenchServer } from './server/spawn-server.ts';

/** Sizes of one run: `--quick` keeps the whole run to a couple of minutes. */
export interface BenchParams {
  quick: boolean;
  /** The HTTP client driving the load (`--load raw|undici`); absent in results from before it was selectable: undici. */
  load: LoadGenerator;
  connections: number;
  rounds: number;
  durationMs: number;
  warmupMs: number;
  replayKeys: number;
  stormRequests: number;
  scalingSizes: number[];
  purgeRows: number;
  linkRounds: number;
  outageCalls: number;
  /** Sequential calls per ledger batch. */
  ledgerCalls: number;
  /** Sequential calls per dialect cell, and its rounds. */
  dialectCalls: number;
  dialectRounds: number;
}

export function paramsFromArgs(argv: string[]): BenchParams {
  const quick = argv.includes('--quick');
  const flag = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, fallback: number) => Number(flag(name) ?? fallback);
  const load = (flag('load') ?? 'raw') as LoadGenerator;
  if (!loadGenerators.includes(load)) throw new Error(`--load ${load}: expected one of ${loadGenerators.join(', ')}`);
  return {
    quick,
    load,
    connections: num('connections', 16),
    rounds: num('rounds', quick ? 3 : 5),
    durationMs: num('duration', quick ? 600 : 2000),
    warmupMs: num('warmup', quick ? 200 : 400),
    replayKeys: num('replay-keys', quick ? 300 : 1000),
    stormRequests: num('storm', 1000),
    scalingSizes: (flag('sizes') ?? (quick ? '1e4,1e5' : '1e4,1e5,1e6')).split(',').map(Number),
    purgeRows: num('purge-rows', quick ? 1e5 : 1e6),
    linkRounds: num('link-rounds', quick ? 3 : 5),
    outageCalls: num('outage-calls', quick ? 200 : 500),
    ledgerCalls: num('ledger-calls', quick ? 100 : 300),
    dialectCalls: num('dialect-calls', quick ? 100 : 300),
    dialectRounds: num('dialect-rounds', quick ? 3 : 5),
  };
}

/** What every scenario gets: the database, the running servers and the sizes. */
export interface BenchEnv {
  params: BenchParams;
  databaseUrl: string;
  redisUrl: string;
  db: Kysely<any>;
  pool: pg.Pool;
  contenders: ContenderSpec[];
  servers: Map<string, BenchServer>;
  oursAvailable: boolean;
  clientAvailable: boolean;
  /** Loaded lazily: `@trpc-idempotency/server`, when it builds. */
  log: (line: string) => void;
}

export function server(env: BenchEnv, name: string): BenchServer {
  const s = env.servers.get(name);
  if (!s) throw new Error(`no server for contender ${name}`);
  return s;
}

/** Rotates the order by `round`, so no contender always runs first (or right after a heavy one). */
export function rotate<T>(items: T[], round: number): T[] {
  const k = round % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
