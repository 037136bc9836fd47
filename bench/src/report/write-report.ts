import type { BenchResults } from '../results.ts';
import { printTables } from './tables.ts';

export async function writeReport(results: BenchResults, _root: string, log: (line: string) => void): Promise<void> {
  for (const line of printTables(results)) log(line);
}
