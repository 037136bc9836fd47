/**
 * What `ctx.idempotency.db`'s refusal of transaction-ending statements costs per query, in process:
 * `npx tsx src/handler-db-lexing.ts` (after `npm run build`). For each flavor and text, the check as sent
 * (`endsTransaction`: only the readings that can differ on the text) beside every reading the flavor has, interleaved
 * over rounds, with the median ratio. Not a test: CPU only, no database.
 */
import {
  endsStatement,
  endsTransaction,
  LEXINGS,
  NEEDS_LEXING,
  type SqlFlavor,
  statementsOf,
} from '../../packages/server/dist/store/transaction-control.js';

const TEXTS: Record<string, string> = {
  'Kysely-compiled': 'insert into "payments" ("user_id", "amount") values ($1, $2) returning "id"',
  'two statements': 'SELECT 1; -- ok\nSELECT 2',
  'commented, 0.6 kB':
    `/* report */ SELECT a.id, a.balance, p.amount FROM accounts a JOIN payments p ON p.account_id = a.id WHERE a.id = 42 AND p.ref = 'x;y' -- trailing\n`.repeat(
      4,
    ),
  'with a backslash': "SELECT 'a\\'b'; -- c\nSELECT 2",
};
const FLAVORS: SqlFlavor[] = ['postgres', 'mysql'];
const CALLS = Number(process.env.CALLS ?? 50_000);
const ROUNDS = Number(process.env.ROUNDS ?? 9);

/** Every reading, as the check did before it skipped those that cannot differ. */
function everyReading(text: string, flavor: SqlFlavor): boolean {
  if (!NEEDS_LEXING.test(text)) return endsStatement(text, flavor, text);
  return LEXINGS[flavor].some((rules) => statementsOf(text, rules).some((s) => endsStatement(s, flavor, text)));
}

function nsPerCall(check: (text: string, flavor: SqlFlavor) => boolean, text: string, flavor: SqlFlavor): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) check(text, flavor);
  return Number(process.hrtime.bigint() - start) / CALLS;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

console.log(`flavor    text                 sent ns/call   every reading ns/call   every ÷ sent, median (min–max)`);
for (const flavor of FLAVORS) {
  for (const [name, text] of Object.entries(TEXTS)) {
    if (everyReading(text, flavor) !== endsTransaction(text, flavor)) throw new Error(`readings disagree: ${name}`);
    const sent: number[] = [];
    const every: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which runs first, so neither always gets the warmer caches.
      if (round % 2) every.push(nsPerCall(everyReading, text, flavor));
      sent.push(nsPerCall(endsTransaction, text, flavor));
      if (!(round % 2)) every.push(nsPerCall(everyReading, text, flavor));
    }
    const ratios = every.map((e, i) => e / sent[i]!);
    console.log(
      `${flavor.padEnd(9)} ${name.padEnd(20)} ${median(sent).toFixed(0).padStart(13)} ${median(every)
        .toFixed(0)
        .padStart(
          23,
        )}   ${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`,
    );
  }
}
