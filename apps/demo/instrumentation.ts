/**
 * Opens the database and applies the migrations when `next start` boots, so the first page view does not wait for
 * PGlite to initialise its data folder (seconds on a busy machine). Never during `next build`: PGlite's folder must
 * not be opened by the build's worker processes.
 */
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== 'nodejs' || process.env.NEXT_PHASE === 'phase-production-build') return;
  const { ensureReady } = await import('./src/server/backend');
  // Not awaited: the server starts listening at once; requests that come early wait on the same promise.
  ensureReady().catch((error: unknown) =>
    console.error('[demo] database not ready yet, retrying on the first request:', error),
  );
}
