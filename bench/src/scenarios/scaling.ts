import { sql } from 'kysely';
import { type BenchEnv, rotate } from '../bench-env.ts';
import { type ContenderSpec, runTag } from '../contenders/contender-spec.ts';
import { migrateOurs, supportsPoolOption } from '../contenders/ours-setup.ts';
import { type LoadResult, runLoad, sendKeys } from '../load/http-load.ts';
import { median } from '../load/stats.ts';
import { type BenchServer, spawnServer } from '../server/spawn-server.ts';
import { fillTable } from './fill-table.ts';

export interface ScalingRow {
  rows: number;
  loadSeconds: number;
  tableMiB: number;
  claim: { rps: number; p50: number; p99: number };
  replay: { rps: number; p50: number; p99: number };
  /** p50 relative to the smallest table's (same run, same rounds). */
  claimP50VsSmallest: number;
  replayP50VsSmallest: number;
}

const REPLAY_KEYS = 1000;

/**
 * Claim and replay latency of ours (transaction mode, replay cache off so replays read the table) with
 * 10^4…10^6 rows already stored: one server per table size, sizes interleaved in rotated order per round.
 */
export async function scalingScenario(env: BenchEnv): Promise<ScalingRow[]> {
  const { params } = env;
  const pool = await supportsPoolOption();
  const sizes = params.scalingSizes;
  const servers = new Map<number, BenchServer>();
  const loads = new Map<number, { seconds: number; mib: number }>();
  const replayKeys = new Map<number, string[]>();
  try {
    for (const size of sizes) {
      const table = `idem_scale_${size}`;
      await migrateOurs(env.db, table);
      const ms = await fillTable(env.db, table, size, false);
      const { rows } = await sql<{ bytes: string }>`SELECT pg_total_relation_size(${table}) AS bytes`.execute(env.db);
      const mib = Number(rows[0]?.bytes ?? 0) / 2 ** 20;
      loads.set(size, { seconds: ms / 1000, mib });
      env.log(
        `  loaded ${size} rows into ${table} in ${(ms / 1000).toFixed(1)} s (${mib.toFixed(0)} MiB with indexes)`,
      );
      const spec: ContenderSpec = {
        name: `ours-scale-${size}`,
        kind: 'ours',
        mode: 'transaction',
        pool,
        table,
        cache: false,
      };
      const s = await spawnServer({ spec, databaseUrl: env.databaseUrl, redisUrl: env.redisUrl, poolMax: 16 });
      servers.set(size, s);
      const keys = Array.from({ length: REPLAY_KEYS }, (_, i) => `${runTag}-sr-${size}-${i}`);
      await sendKeys(s.url, 'light', keys, params.connections);
      replayKeys.set(size, keys);
    }
    const claims = new Map<number, LoadResult[]>();
    const replays = new Map<number, LoadResult[]>();
    // Three rounds at most: the sizes differ by 10× and 100×, so the signal is large next to the noise.
    for (let round = 0; round < Math.min(3, params.rounds); round++) {
      for (const size of rotate(sizes, round)) {
        const s = servers.get(size)!;
        const keys = replayKeys.get(size)!;
        const claim = await runLoad({
          url: s.url,
          path: 'light',
          connections: params.connections,
          durationMs: params.durationMs,
          warmupMs: params.warmupMs,
          key: (i) => `${runTag}-sc-${size}-${round}-${i}`,
        });
        const replay = await runLoad({
          url: s.url,
          path: 'light',
          connections: params.connections,
          durationMs: params.durationMs,
          warmupMs: params.warmupMs,
          key: (i) => keys[i % keys.length],
          body: () => '{"accountId":1,"amount":1}',
        });
        claims.set(size, [...(claims.get(size) ?? []), claim]);
        replays.set(size, [...(replays.get(size) ?? []), replay]);
        env.log(
          `  round ${round + 1} ${String(size).padStart(8)} rows: claim p50 ${claim.p50.toFixed(2)} ms, replay p50 ${replay.p50.toFixed(2)} ms`,
        );
      }
    }
    const summary = (runs: LoadResult[]) => ({
      rps: median(runs.map((r) => r.rps)),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
    });
    const smallest = sizes[0]!;
    const base = { claim: summary(claims.get(smallest)!), replay: summary(replays.get(smallest)!) };
    return sizes.map((size) => {
      const claim = summary(claims.get(size)!);
      const replay = summary(replays.get(size)!);
      return {
        rows: size,
        loadSeconds: loads.get(size)!.seconds,
        tableMiB: loads.get(size)!.mib,
        claim,
        replay,
        claimP50VsSmallest: claim.p50 / base.claim.p50,
        replayP50VsSmallest: replay.p50 / base.replay.p50,
      };
    });
  } finally {
    await Promise.all([...servers.values()].map((s) => s.stop()));
    for (const size of sizes) await sql`DROP TABLE IF EXISTS ${sql.table(`idem_scale_${size}`)}`.execute(env.db);
  }
}
