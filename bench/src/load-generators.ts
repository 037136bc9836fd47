/**
 * The load generators' own cost, apart from any contender: `npx tsx src/load-generators.ts` (ROUNDS, DURATION ms,
 * CONNECTIONS, DELAY ms) drives a bare `node:http` server in a child process (fixed JSON answer, no tRPC, no
 * database) with each generator in turn, order alternating per round, and prints req/s and the generator's CPU
 * per request. Against this server the generator is the larger share of the work, so the gap between the two
 * shows fully. DELAY holds each answer that long (a timer, no CPU), so the rate is about CONNECTIONS / DELAY:
 * the generators' cost at the bench's rates (16 connections: 5 ms ≈ 3 000 req/s, 16 ms ≈ 1 000 req/s), where
 * fewer responses arrive per wake-up than at full speed.
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { closeLoadPools, type LoadGenerator, loadGenerators, runLoad, useLoadGenerator } from './load/http-load.ts';
import { selfCheckResponseParser } from './load/response-parser.ts';

const SERVER = `
const { createServer } = require('node:http');
const body = '{"result":{"data":{"ok":true}}}';
const delay = Number(process.env.DELAY ?? 0);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    if (delay > 0) setTimeout(() => res.end(body), delay); else res.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('disconnect', () => process.exit(0));
`;

selfCheckResponseParser();
const rounds = Number(process.env.ROUNDS ?? 3);
const durationMs = Number(process.env.DURATION ?? 2000);
const connections = Number(process.env.CONNECTIONS ?? 16);
const child = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
try {
  const port = await new Promise<number>((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  // Round 0 is printed but not a measurement: on a busy machine both generators (and the server) ran at a
  // tenth of their later rate in their first seconds here, their code not yet optimised.
  for (let round = 0; round <= rounds; round++) {
    const order: LoadGenerator[] = round % 2 ? [...loadGenerators].reverse() : [...loadGenerators];
    for (const generator of order) {
      useLoadGenerator(generator);
      const r = await runLoad({
        url: `http://127.0.0.1:${port}`,
        path: 'light',
        connections,
        durationMs,
        warmupMs: 300,
        key: (i) => `k-${i}`,
      });
      const failed = r.requests - (r.statuses['200'] ?? 0) + r.errors;
      console.log(
        `${round ? `round ${round}` : 'warm-up'} ${generator.padEnd(6)} ${r.rps.toFixed(0).padStart(6)} req/s, load generator CPU ${r.loadCpuMicros.toFixed(1)} µs/req, non-200 ${failed}, load ${loadavg()[0]?.toFixed(1)}`,
      );
    }
  }
} finally {
  await closeLoadPools();
  child.kill();
}
