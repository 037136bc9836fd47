// The test-db global setup provides this; the declaration lives in its global-setup.ts, which the test
// workspace's typecheck does not load, so it is repeated here (identical declarations merge).
import 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
  }
}
