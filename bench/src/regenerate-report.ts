/** `tsx src/regenerate-report.ts`: re-renders docs/benchmarks.md and the chart from bench/results/latest.json. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeReport } from './report/write-report.ts';
import type { BenchResults } from './results.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const results = JSON.parse(readFileSync(`${root}bench/results/latest.json`, 'utf8')) as BenchResults;
await writeReport(results, root, (line) => console.log(line), true);
