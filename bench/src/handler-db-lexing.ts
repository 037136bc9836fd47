/**
 * What `ctx.idempotency.db`'s refusal of transaction-ending statements costs per query, in process:
 * `npx tsx src/handler-db-lexing.ts` (after `npm run build`). For each flavor and text, the check as sent
 * (`endsTransaction`: only the readings that can differ on the text) beside every reading the flavor has, interleaved
 * over rounds, with the median ratio. Not a test: CPU only, no database.
 *
 * `LEXING_BEFORE=<another build's packages/server/dist>` also times that build's check on the same texts, interleaved
 * with this one's: an A/B of two builds in one run.
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
  'quotes and strings': `SELECT "name", E'a\\n' || 'b' FROM t WHERE x = 'y;z'; -- c\nSELECT 2`,
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

type Check = (text: string, flavor: SqlFlavor) => boolean;

/**
 * One table: per flavor and text, `base` and `other` timed in interleaved rounds (which runs first alternates, so
 * neither always gets the warmer caches), with the median of other ÷ base over rounds.
 */
function table(heading: string, base: Check, other: Check): void {
  console.log(heading);
  const [, baseWidth, otherWidth] = heading.split(/ {3}/).map((column) => column.length);
  for (const flavor of FLAVORS) {
    for (const [name, text] of Object.entries(TEXTS)) {
      if (base(text, flavor) !== other(text, flavor)) throw new Error(`the two checks disagree: ${name}`);
      const baseNs: number[] = [];
      const otherNs: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        if (round % 2) otherNs.push(nsPerCall(other, text, flavor));
        baseNs.push(nsPerCall(base, text, flavor));
        if (!(round % 2)) otherNs.push(nsPerCall(other, text, flavor));
      }
      const ratios = otherNs.map((o, i) => o / baseNs[i]!);
      const spread = `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`;
      console.log(
        `${flavor.padEnd(9)} ${name.padEnd(20)} ${median(baseNs)
          .toFixed(0)
          .padStart(baseWidth! - 1)}   ${median(otherNs).toFixed(0).padStart(otherWidth!)}   ${spread}`,
      );
    }
  }
}

table(
  'flavor    text                 sent ns/call   every reading ns/call   every ÷ sent, median (min–max)',
  endsTransaction,
  everyReading,
);
if (process.env.LEXING_BEFORE) {
  const before = (await import(`${process.env.LEXING_BEFORE}/store/transaction-control.js`)) as {
    endsTransaction: Check;
  };
  table(
    '\nflavor    text                 this build ns/call   before ns/call   before ÷ this, median (min–max)',
    endsTransaction,
    before.endsTransaction,
  );
}
