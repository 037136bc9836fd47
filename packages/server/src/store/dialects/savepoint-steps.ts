import { SAVEPOINT } from '../statements.js';
import { plain, type Step } from './step.js';

/** The handler's savepoint, in SQL that MySQL and SQLite share with Postgres. */
export const savepointSteps: Record<'savepoint' | 'releaseSavepoint' | 'rollbackToSavepoint', () => Step> = {
  savepoint: () => plain(`SAVEPOINT ${SAVEPOINT}`),
  releaseSavepoint: () => plain(`RELEASE SAVEPOINT ${SAVEPOINT}`),
  rollbackToSavepoint: () => plain(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`),
};
