import type { Row, Session, Statement, Store } from '../dialects/dialect.js';

/**
 * What the MySQL and SQLite stores share: each statement list runs on a connection held from the app's own Kysely,
 * one statement per round trip, with no fast path and no renewal connection of their own (a renewal is one more
 * autocommit list on the app's pool). Neither is single-connection: other instances and processes reach the same
 * database, so lease mode renews and a claim's wait is bounded in the database.
 *
 * A renewal that cannot get a connection comes late and costs nothing: on MySQL the holder's named lock keeps its
 * claim (see MysqlStatements.holdLease), on SQLite its transaction holds the write lock no other connection can
 * take a claim over without.
 */
export abstract class ConnectionStore implements Store {
  readonly pipelined = false;
  readonly commitsThenBegins: boolean = false;
  readonly singleConnection = false;

  abstract ready(): Promise<void> | undefined;
  abstract begin(statements: readonly Statement[]): Promise<{ session: Session; rows: Row[][] }>;
  abstract autocommit(statements: readonly Statement[]): Promise<Row[][]>;

  async renew(statement: Statement): Promise<Row[]> {
    return (await this.autocommit([statement]))[0] ?? [];
  }

  warmRenewals(): void {}

  renewalsIdle(): void {}

  commitThenBegin(_statement: Statement, _after?: readonly Statement[]): Promise<{ session: Session; rows: Row[][] }> {
    throw new Error('idempotency: commitThenBegin needs the pg fast path or MySQL');
  }
}
