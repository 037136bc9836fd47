/**
 * `npm run bench [-- --quick] [--only overhead,replay,storm,round-trips,ledger,dialects,scaling,purge,client]
 *  [--contenders a,b] [--load raw|undici]`
 * Starts one HTTP server per contender (child processes), runs the scenarios, prints the tables and writes
 * bench/results/latest.json and docs/benchmarks.md (+ docs/benchmarks-ratios.svg).
 */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type BenchEnv, paramsFromArgs } from './bench-env.ts';
import type { ContenderSpec } from './contenders/contender-spec.ts';
import { closeLoadPools, useLoadGenerator } from './load/http-load.ts';
import { selfCheckResponseParser } from './load/response-parser.ts';
import { type MachineFacts, machineFacts } from './report/machine.ts';
import { writeReport } from './report/write-report.ts';
import type { BenchResults } from './results.ts';
import { overheadScenario } from './scenarios/overhead.ts';
import { replayScenario } from './scenarios/replay.ts';
import { roundTripScenario } from './scenarios/round-trips.ts';
import { stormScenario } from './scenarios/storm.ts';
import { createBenchSchema } from './server/schema.ts';
import { spawnServer } from './server/spawn-server.ts';
import { redisAnswers, setupDatabase } from './setup-database.ts';

const argv = process.argv.slice(2);
const params = paramsFromArgs(argv);
selfCheckResponseParser();
useLoadGenerator(params.load);
const onlyFlag = argv.indexOf('--only');
const only = onlyFlag >= 0 ? new Set(argv[onlyFlag + 1]?.split(',')) : undefined;
const wants = (name: string) => !only || only.has(name);
const log = (line: string) => console.log(line);
/** 1-minute load average when each scenario starts: how busy the machine was, for the report. */
const loadSamples: NonNullable<MachineFacts['loadSamples']> = [];
const section = (name: string) => {
  const load = loadavg()[0] ?? 0;
  loadSamples.push({ scenario: name, load, startedSecond: Math.round((Date.now() - started) / 1000) });
  log(`\n# ${name} (load ${load.toFixed(2)})`);
};

const root = fileURLToPath(new URL('../../', import.meta.url));
const oursAvailable = existsSync(`${root}packages/server/dist/index.js`);
const clientAvailable = existsSync(`${root}packages/client/dist/index.js`);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const { tdb, stopServer } = await setupDatabase();
const started = Date.now();
const env: BenchEnv = {
  params,
  databaseUrl: tdb.url,
  redisUrl,
  db: tdb.db,
  pool: tdb.pool,
  contenders: [],
  servers: new Map(),
  oursAvailable,
  clientAvailable,
  log,
};
const cleanup = async () => {
  await closeLoadPools();
  await Promise.all([...env.servers.values()].map((s) => s.stop()));
  await tdb.drop();
  await stopServer();
};
process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));

try {
  await createBenchSchema(tdb.db);
  const oursOptions = oursAvailable ? await import('./contenders/ours-setup.ts') : undefined;
  const supportsPool = oursOptions ? await oursOptions.supportsPoolOption() : false;
  const contenders: ContenderSpec[] = [{ name: 'plain', kind: 'plain' }];
  if (oursOptions) {
    await oursOptions.migrateOurs(tdb.db, undefined);
    contenders.push({ name: 'ours-tx', kind: 'ours', mode: 'transaction' });
    if (supportsPool) contenders.push({ name: 'ours-tx+pool', kind: 'ours', mode: 'transaction', pool: true });
    // BENCH_BEFORE_DIST=<another build's packages/server/dist>: that build too, as `-before` contenders, for an A/B
    // of two builds in one run (interleaved rounds, same machine state).
    if (process.env.BENCH_BEFORE_DIST) {
      contenders.push(
        { name: 'ours-tx+pool-before', kind: 'ours', mode: 'transaction', pool: true },
        { name: 'ours-tx-before', kind: 'ours', mode: 'transaction' },
      );
    }
    contenders.push({ name: 'ours-lease', kind: 'ours', mode: 'lease' });
    if (supportsPool) contenders.push({ name: 'ours-lease+pool', kind: 'ours', mode: 'lease', pool: true });
    contenders.push({
      name: supportsPool ? 'ours-tx+pool-nocache' : 'ours-tx-nocache',
      kind: 'ours',
      mode: 'transaction',
      pool: supportsPool,
      cache: false,
      replayOnly: true,
    });
  } else {
    log('! @trpc-idempotency/server is not built: benching the peers only');
  }
  contenders.push({ name: 'classic', kind: 'classic' }, { name: 'classic-kysely', kind: 'classic-kysely' });
  // The ceiling of a replay inside a tRPC middleware (a Map lookup, nothing else): goal 3's floor.
  contenders.push({ name: 'replay-floor', kind: 'replay-floor', replayOnly: true });
  // The same after one turn of the event loop, as a peer waits for its store: how much of a peer's replay rate
  // here comes from answering in bursts (see replay-floor.ts).
  contenders.push({ name: 'replay-floor-yield', kind: 'replay-floor', replayOnly: true });
  if (await redisAnswers(redisUrl)) {
    contenders.push({ name: 'powertools', kind: 'powertools' }, { name: 'node-idempotency', kind: 'node-idempotency' });
  } else {
    log(`! no Redis at ${redisUrl} (set REDIS_URL): skipping the Redis-backed peers`);
  }
  // `--contenders plain,ours-tx+pool` benches a subset (plain is always kept: every ratio divides by it).
  const pick = argv.indexOf('--contenders');
  if (pick >= 0) {
    const names = new Set(['plain', ...(argv[pick + 1]?.split(',') ?? [])]);
    contenders.splice(0, contenders.length, ...contenders.filter((c) => names.has(c.name)));
  }
  env.contenders = contenders;
  for (const spec of contenders) {
    env.servers.set(spec.name, await spawnServer({ spec, databaseUrl: tdb.url, redisUrl, poolMax: 16 }));
  }
  const machine = await machineFacts(tdb.db, redisUrl);
  log(`machine: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, Postgres ${machine.postgres}`);
  log(`contenders: ${contenders.map((c) => c.name).join(', ')}; load 1-min avg ${machine.loadStart.toFixed(2)}`);
  log(`load generator: ${params.load}, ${params.connections} connections`);

  const results: BenchResults = {
    params,
    machine,
    contenders,
    command: `npm run bench${params.quick ? ' -- --quick' : ''}`,
  };
  // A scenario that fails is reported and skipped; the run then counts as partial (docs left alone).
  const failed: string[] = [];
  const scenario = async (name: string, title: string, run: () => Promise<void>) => {
    if (!wants(name)) return;
    section(title);
    try {
      await run();
    } catch (error) {
      failed.push(name);
      log(`! ${name} failed: ${(error as Error).stack ?? error}`);
    }
  };
  // First, while the tables are small and no autovacuum is due: its WAL and CPU would land in the ledger.
  await scenario('ledger', 'per-call cost ledger (sequential)', async () => {
    results.ledger = await (await import('./scenarios/ledger.ts')).ledgerScenario(env);
  });
  await scenario('round-trips', 'round trips per request', async () => {
    results.roundTrips = await roundTripScenario(env);
  });
  await scenario('overhead', 'overhead (first executions, unique keys)', async () => {
    results.overhead = await overheadScenario(env);
  });
  await scenario('replay', 'replay (completed keys)', async () => {
    results.replay = await replayScenario(env);
  });
  await scenario('storm', 'duplicate storm', async () => {
    results.storm = await stormScenario(env);
  });
  if (oursOptions) {
    await scenario('scaling', 'scaling with table size', async () => {
      results.scaling = await (await import('./scenarios/scaling.ts')).scalingScenario(env);
    });
    await scenario('purge', 'purge under load', async () => {
      results.purge = await (await import('./scenarios/purge.ts')).purgeScenario(env);
    });
    await scenario('dialects', 'dialects (in process, sequential; then over HTTP)', async () => {
      const { dialectSetups, dialectsScenario } = await import('./scenarios/dialects.ts');
      results.dialects = await dialectsScenario({
        calls: params.dialectCalls,
        rounds: params.dialectRounds,
        setups: await dialectSetups(tdb.url),
        log,
        http: {
          databaseUrl: tdb.url,
          redisUrl,
          connections: params.connections,
          durationMs: params.durationMs,
          warmupMs: params.warmupMs,
          rounds: params.rounds,
        },
      });
    });
  }
  if (clientAvailable) {
    await scenario('client', 'client link', async () => {
      results.client = await (await import('./scenarios/client-link.ts')).clientLinkScenario(env);
    });
  }
  machine.loadEnd = loadavg()[0] ?? 0;
  machine.loadSamples = loadSamples;
  results.elapsedSeconds = Math.round((Date.now() - started) / 1000);
  // A partial run (--only, --contenders, a failed scenario) never overwrites the complete run's results and docs.
  const partial = only !== undefined || argv.includes('--contenders') || failed.length > 0;
  if (failed.length) log(`! failed: ${failed.join(', ')}; results in bench/results/partial.json, docs left alone`);
  await mkdir(`${root}bench/results`, { recursive: true });
  const file = partial ? 'partial.json' : 'latest.json';
  await writeFile(`${root}bench/results/${file}`, `${JSON.stringify(results, null, 2)}\n`);
  await writeReport(results, root, log, !partial);
} finally {
  await cleanup();
}
