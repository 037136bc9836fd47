import { writeFile } from 'node:fs/promises';
import type { Spread } from '../load/stats.ts';
import type { BenchResults } from '../results.ts';
import { checkGoals } from './goals.ts';
import { type ChartGroup, ratioChart } from './svg-chart.ts';
import { goalsTable, ledgerTable, otherRatiosTable, printTables, table } from './tables.ts';
import { tablesMarkdown } from './tables-page.ts';
import { checkTargets } from './targets.ts';

/** Prints the tables; on a complete run also writes docs/benchmarks.md and its SVG chart. */
export async function writeReport(
  results: BenchResults,
  root: string,
  log: (line: string) => void,
  writeDocs: boolean,
): Promise<void> {
  for (const line of printTables(results)) log(line);
  const targets = checkTargets(results);
  log('');
  for (const line of goalsTable(results)) log(line);
  log('');
  for (const line of otherRatiosTable(results)) log(line);
  log('');
  for (const line of table(
    ['target', 'measured', 'met'],
    targets.map((t) => [t.target, t.measured, metMark(t.met)]),
  ))
    log(line);
  if (!writeDocs) return;
  await writeFile(`${root}docs/benchmarks-ratios.svg`, chart(results));
  await writeFile(`${root}docs/benchmarks.md`, markdown(results));
  await writeFile(`${root}docs/benchmarks-tables.md`, tablesMarkdown(results));
  log(`\nwrote docs/benchmarks.md, docs/benchmarks-tables.md, docs/benchmarks-ratios.svg, bench/results/latest.json`);
}

/** How long each scenario took, from the second each started at (the last one ends with the run). */
function scenarioSeconds(r: BenchResults): string {
  const samples = r.machine.loadSamples ?? [];
  const setup = samples[0]?.startedSecond;
  const parts = samples.map((x, i) => {
    const end = samples[i + 1]?.startedSecond ?? r.elapsedSeconds;
    const took = x.startedSecond !== undefined && end !== undefined ? end - x.startedSecond : undefined;
    return `${x.scenario.split(' (')[0]} ${took ?? '?'}`;
  });
  return [...(setup !== undefined ? [`servers and setup ${setup}`] : []), ...parts].join(', ');
}

/** The 1-minute load average sampled as each scenario started. */
function scenarioLoads(r: BenchResults): string {
  return (r.machine.loadSamples ?? []).map((x) => `${x.scenario.split(' (')[0]} ${x.load.toFixed(1)}`).join(', ');
}

/** What drove the load; results from before `--load` existed were all undici. */
function loadGeneratorText(load: BenchResults['params']['load'] | undefined): string {
  return load === 'raw'
    ? 'raw `node:net` keep-alive sockets, requests written as bytes, responses parsed for status and length'
    : 'undici `Pool`, keep-alive';
}

const metMark = (met: boolean | undefined) => (met === undefined ? '–' : met ? 'yes' : 'no');

function chart(r: BenchResults): string {
  const names = r.contenders.filter((c) => !c.replayOnly).map((c) => c.name);
  const ratio = (name: string, handler: string): Spread | undefined =>
    r.overhead?.find((o) => o.contender === name && o.handler === handler)?.ratio;
  const groups: ChartGroup[] = [
    {
      title: 'First executions (unique keys), throughput ÷ plain',
      rows: names.map((n) => ({ contender: n, values: [ratio(n, 'light'), ratio(n, 'payment')] })),
    },
  ];
  if (r.replay?.length) {
    groups.push({
      title: 'Replays (completed keys), throughput ÷ plain first executions',
      rows: r.replay.map((x) => ({ contender: x.contender, values: [x.ratioLight, x.ratioPayment] })),
    });
  }
  const goals = checkGoals(r).filter((g) => g.ratioSpread && !g.notSlower);
  if (goals.length) {
    // A goal measured on the light handler (or light replays) takes the first slot, payment the second.
    const slot = (g: (typeof goals)[number]) => (/payment/.test(g.goal + g.ratio) ? 1 : 0);
    groups.push({
      title: 'Goals (issue 29): each ratio to its own reference',
      rows: goals.map((g) => {
        const values: (Spread | undefined)[] = [undefined, undefined];
        values[slot(g)] = g.ratioSpread;
        return { contender: `${g.goal.split(' (')[0]} (≥${g.target})`, values };
      }),
    });
  }
  if (r.dialects?.length) {
    const dialects = [...new Set(r.dialects.map((d) => d.dialect))];
    for (const via of ['in process', 'HTTP'] as const) {
      // Rows from before the HTTP cells existed have no `via`: they were in process.
      const cells = r.dialects.filter((x) => (x.via ?? 'in process') === via);
      if (!cells.length) continue;
      groups.push({
        title: `Dialects, ${via === 'HTTP' ? 'over HTTP' : 'in process'}: ours ÷ plain handler on the same database`,
        rows: dialects
          .filter((d) => cells.some((x) => x.dialect === d))
          .map((d) => ({
            contender: d.replace(/ \(.*/, '').replace('Postgres', `Postgres ${/general/.test(d) ? 'general' : 'pool'}`),
            values: ['light', 'payment'].map((h) => cells.find((x) => x.dialect === d && x.handler === h)?.ratio),
          })),
      });
    }
  }
  return ratioChart(
    `tRPC idempotency: throughput relative to plain (${r.params.connections} connections)`,
    [
      { label: 'light handler (÷ plain light)', color: '#4e79a7' },
      { label: 'payment handler (÷ plain payment)', color: '#f28e2b' },
    ],
    groups,
  );
}

function markdown(r: BenchResults): string {
  const m = r.machine;
  const plainLight = r.overhead?.find((o) => o.contender === 'plain' && o.handler === 'light');
  const plainSpread = plainLight
    ? `plain (light) ran at ${Math.round(Math.min(...plainLight.rounds.map((x) => x.rps)))}–${Math.round(Math.max(...plainLight.rounds.map((x) => x.rps)))} req/s across rounds`
    : '';
  const p = r.params;
  const lines = [
    '# Benchmarks',
    '',
    'What idempotency costs a tRPC mutation, side by side with the plain mutation and the alternatives a user',
    'would pick instead, measured in one run. These are measurements, not tests: rerun them on your machine.',
    '',
    '```sh',
    `npm run bench              # full run (${r.params.quick ? 'about 15 minutes' : `${Math.round((r.elapsedSeconds ?? 0) / 60)} minutes here`})`,
    'npm run bench -- --quick   # CI-sized run (a few minutes)',
    '```',
    '',
    `This page was generated by \`${r.command}\` on ${m.date.slice(0, 16).replace('T', ' ')} UTC (${r.elapsedSeconds ?? '?'} s).`,
    'Raw numbers: [`bench/results/latest.json`](../bench/results/latest.json).',
    '',
    '## Machine',
    '',
    ...table(
      ['fact', 'value'],
      [
        ['CPU', `${m.cpu}, ${m.cores} cores`],
        ['memory', `${m.memoryGiB} GiB`],
        ['Node', m.node],
        ['Postgres', m.postgres],
        ['Redis', m.redis],
        [
          '1-min load average',
          `${m.loadStart.toFixed(2)} at start, ${m.loadEnd?.toFixed(2) ?? '?'} at end (per scenario below)`,
        ],
      ],
    ),
    '',
    `Load per scenario: ${scenarioLoads(r)}.`,
    '',
    `Wall time per scenario (s): ${scenarioSeconds(r)}.`,
    '',
    `Noise: ${plainSpread}. A load average above the core count means other work shared the CPU during the run;`,
    'that is why every ratio is taken inside a round (both sides suffer the same noise) and reported as the',
    'median over rounds with its min–max spread.',
    '',
    '## Method',
    '',
    '- One tRPC router, two mutations, the same handlers for every contender: **light** (one autocommit',
    '  `INSERT` of a payment row) and **payment** (`SELECT … FOR UPDATE` on one of 1,000 accounts picked at random,',
    '  `INSERT` the payment, debit the balance, in one transaction). Behind ours, the handler runs on',
    "  `ctx.idempotency.db` (ours' transaction) instead of opening its own.",
    '- Each contender is its own tRPC standalone HTTP server in a **child process**, with its own `pg` pool (16',
    `  connections). The load generator (${loadGeneratorText(p.load)}, closed loop: each of the`,
    `  ${p.connections} connections sends its next request when the previous one is answered, every request with a fresh`,
    '  key) runs in the parent process. With 2 cores, an in-process server would share its event loop with the',
    "  load generator and each would slow the other in proportion to the *other's* work; separate processes let",
    '  the OS schedule the server, Postgres and the load generator on both cores, as in production. The load',
    "  generator's own CPU per request (`process.cpuUsage()` around each cell) is in the tables: it is CPU the",
    '  server and Postgres did not get, the same for every contender, so it pulls every ratio toward 1.',
    `- Contenders interleaved: ${p.rounds} rounds of ${p.durationMs / 1000} s per cell (after ${p.warmupMs} ms of unmeasured warm-up), the`,
    '  order rotated each round. Ratio = contender req/s ÷ plain req/s in the same round; tables show the median',
    '  ratio and (min–max) across rounds.',
    '- Contenders: **plain** (no idempotency, the floor); **ours** in transaction and lease mode, with and without',
    '  the raw `pg` pool fast path (`+pool`); **classic** (claim with `INSERT … ON CONFLICT DO NOTHING`, run,',
    "  separate `UPDATE … status = 'done'`, no shared transaction; its statements on the raw `pg` pool);",
    '  **classic-kysely** (the same pattern with every statement built and run through Kysely, as a Kysely app',
    '  would write it, and as ours and the handler run: the like-for-like reference of goal 2);',
    '  **powertools** (`@aws-lambda-powertools/idempotency` 2.35, Redis persistence via `@redis/client`);',
    '  **node-idempotency** (`@node-idempotency/core` 1.0.11 + its Redis adapter). The peers are wrapped as tRPC',
    '  middlewares in `bench/src/contenders/`. The Redis peers are not atomic with the business write: a crash',
    '  between the handler and their final `SET` leaves the effect applied and the key stuck in progress.',
    '',
    '![throughput ratios to plain](benchmarks-ratios.svg)',
    '',
    '## Goals',
    '',
    "Issue 29's goals, each a ratio taken round by round between two cells of the same interleaved run (so both",
    'sides share the noise of that round), reported as the median over rounds with its min–max spread. Ours is',
    "`ours-tx+pool` (transaction mode with the raw `pg` pool, the README's configuration); every handler runs",
    'through Kysely (`plain` is the same handler without idempotency). The MariaDB and SQLite rows come from the',
    '[dialects table](benchmarks-tables.md#dialects), over HTTP. The `-before` contenders are the build given by',
    '`BENCH_BEFORE_DIST` (the commit is named in [the analysis](../bench/analysis.md)), run in the same rounds: a',
    'cell fails that row only when it is slower',
    'than that build in every round.',
    '',
    ...goalsTable(r),
    '',
    "Ratios kept from issue 15's goals, for comparison with earlier runs (not goals of issue 29):",
    '',
    ...otherRatiosTable(r),
    '',
    '## Other targets',
    '',
    ...table(
      ['target', 'measured', 'met'],
      checkTargets(r).map((t) => [t.target, t.measured, metMark(t.met)]),
    ),
    '',
  ];
  if (r.ledger) {
    lines.push(
      '## Per-call cost ledger',
      '',
      `Each contender alone, one call at a time (${p.ledgerCalls} calls per row after a warm-up), so every figure is a`,
      'count divided by the calls, independent of the rate. *Round trips*: `pg` `Client.query` calls of the',
      'server process; *statements*: the SQL statements in them (a multi-statement string counts each);',
      '*transactions*: commits + rollbacks the bench database counted (`pg_stat_database`; it includes one or two',
      "of the ledger's own statements per batch, the +0.01–0.02 on every row); *key rows*: inserted,",
      "updated (of which HOT) and deleted rows of the key table (ours' or classic's, `pg_stat_user_tables`); *WAL*:",
      "the WAL records of the bench database's relations and of the same transactions (`pg_walinspect`), and the",
      "whole server's WAL advance (`pg_wal_lsn_diff`, which counts other databases' work on a shared server too);",
      "*Postgres CPU*: the contender's backends (`/proc/<pid>/schedstat`); *Node CPU*: the server process",
      '(`process.cpuUsage()`, HTTP handling included). A *replay* sends the light keys again after they completed.',
      '',
      ...ledgerTable(r),
      '',
    );
  }
  lines.push(
    '## More',
    '',
    '- [Every other table of this run](benchmarks-tables.md): CPU per request, round trips, first-execution overhead,',
    '  replays, dialects, the duplicate storm, scaling with table size, purge under load, the client link.',
    '- [The analysis, run by run](../bench/analysis.md): what each change measured, the candidate designs, and why',
    '  each goal is or is not reached.',
    '- [Overhead per dialect, by hand](benchmarks-dialects.md): an earlier in-process run and its reasoning.',
    '',
  );
  return `${lines.join('\n')}\n`;
}
