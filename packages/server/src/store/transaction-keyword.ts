/**
 * The handler sent a statement that starts with a transaction keyword: it would end the call's transaction, and its
 * writes would commit (or vanish) apart from the stored result. Refused before it reaches the database.
 */
export class TransactionControlError extends Error {
  constructor(text: string) {
    super(
      `ctx.idempotency.db cannot end the call's transaction (refused: ${JSON.stringify(text.slice(0, 80))}): ` +
        "the middleware commits the handler's writes together with their stored result",
    );
  }
}

/**
 * Whether a statement's first keyword is one of transaction control: BEGIN, START, COMMIT, END, ABORT, ROLLBACK (not
 * ROLLBACK TO a savepoint: the handler's savepoints are its own), PREPARE TRANSACTION, XA, `SET autocommit`, and USE
 * (MySQL's default database, where our unqualified table is found on the connection's next calls). It catches the
 * plain accident and nothing more, at the cost of one anchored match: the handler is the app's own code (README "Raw
 * SQL"). A text that ends the transaction anyway (a comment first, a procedure, DDL that commits implicitly) fails
 * its call loudly at completion, and its key never runs again (see modes/ended-transaction.ts).
 */
export function startsWithTransactionKeyword(text: string): boolean {
  return TRANSACTION_KEYWORD.test(text);
}

const TRANSACTION_KEYWORD = new RegExp(
  String.raw`^\s*(?:begin|start|commit|end|abort|rollback(?!\s+(?:work\s+|transaction\s+)?to\b)|` +
    String.raw`prepare\s+transaction|xa|use|set\s+(?:@@(?:session\.)?|session\s+|local\s+)?autocommit)\b`,
  'i',
);
