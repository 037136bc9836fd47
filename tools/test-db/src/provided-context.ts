// Types `inject('pgAdminUrl')` in every test file that imports this package.
import type {} from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the run's Postgres server (see resolveTestServer). */
    pgAdminUrl: string;
  }
}
