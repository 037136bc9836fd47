import type { Step } from '../dialects/dialect.js';
import { SAVEPOINT } from '../dialects/postgres/postgres-statements.js';
import { plain } from './step.js';

/**
 * The handler's savepoint, in SQL that MySQL and SQLite share with Postgres. Releasing it costs nothing here: the
 * COMMIT that always follows commits its work with the transaction's on both (Postgres releases it for the stored
 * row's xmin, which nothing reads on these dialects), so the release is a step without a statement, one round trip
 * fewer per call on MySQL.
 */
export const savepointSteps: Record<'savepoint' | 'releaseSavepoint' | 'rollbackToSavepoint', () => Step> = {
  savepoint: () => plain(`SAVEPOINT ${SAVEPOINT}`),
  releaseSavepoint: () => async () => [],
  rollbackToSavepoint: () => plain(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`),
};
