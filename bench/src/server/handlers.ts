import type { Kysely, Transaction } from 'kysely';

/** The business tables every contender writes to: the same rows, the same statements. */
export interface BenchDB {
  accounts: { id: number; balance: string | number };
  payments: { id: number | undefined; account_id: number; amount: number; ref: string | null };
}

export interface PaymentInput {
  accountId: number;
  amount: number;
}

/** light: one autocommit insert (inside ours, it joins ours' transaction). */
export async function lightHandler(db: Kysely<BenchDB>, input: PaymentInput, ref: string | undefined) {
  const row = await db
    .insertInto('payments')
    .values({ id: undefined, account_id: input.accountId, amount: input.amount, ref: ref ?? null })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { id: Number(row.id) };
}

/**
 * payment: lock one of 1,000 accounts, insert the payment, debit the balance, in one transaction.
 * Behind ours the handler's `db` already is a transaction (ctx.idempotency.db), so it runs in it instead
 * of nesting (Kysely has no nested transactions; a savepoint would be one more round trip).
 */
export async function paymentHandler(db: Kysely<BenchDB>, input: PaymentInput, ref: string | undefined) {
  const run = async (trx: Kysely<BenchDB> | Transaction<BenchDB>) => {
    await trx
      .selectFrom('accounts')
      .select('balance')
      .where('id', '=', input.accountId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const payment = await trx
      .insertInto('payments')
      .values({ id: undefined, account_id: input.accountId, amount: input.amount, ref: ref ?? null })
      .returning('id')
      .executeTakeFirstOrThrow();
    const account = await trx
      .updateTable('accounts')
      .set((eb) => ({ balance: eb('balance', '-', input.amount) }))
      .where('id', '=', input.accountId)
      .returning('balance')
      .executeTakeFirstOrThrow();
    return { id: Number(payment.id), balance: Number(account.balance) };
  };
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}
