import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EdgeRuntime } from 'edge-runtime';
import { build, type Metafile, type Plugin } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import type { EdgeAssets, EdgeOutcome } from './edge-app.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const NODE_BUILTIN =
  /^node:|^(assert|buffer|child_process|crypto|dns|events|fs|http|https|module|net|os|path|perf_hooks|process|stream|timers|tls|url|util|worker_threads|zlib)(\/.*)?$/;

/**
 * Node builtins stay unresolved only for PGlite, which imports `node:module` behind a runtime check that is false
 * in the VM; anywhere else (our packages, tRPC, Kysely) a builtin fails the build.
 */
const onlyPGliteMayNameNode: Plugin = {
  name: 'only-pglite-may-name-node',
  setup(b) {
    b.onResolve({ filter: NODE_BUILTIN }, (args) =>
      args.importer.includes(`${join('node_modules', '@electric-sql', 'pglite')}`)
        ? { path: args.path, external: true }
        : { errors: [{ text: `${relative(repoRoot, args.importer)} imports the Node builtin ${args.path}` }] },
    );
  },
};

let outcome: EdgeOutcome;
let metafile: Metafile;
let runtime: EdgeRuntime;

beforeAll(async () => {
  // The app and both clients, bundled as a classic script: edge-runtime evaluates scripts, not ES modules. The
  // packages resolve through their `exports`, i.e. their built dist/*.js.
  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('./edge-app.ts', import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    conditions: ['edge-light', 'worker', 'browser'],
    define: { 'import.meta.url': JSON.stringify('https://edge.invalid/app.js') },
    plugins: [onlyPGliteMayNameNode],
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  metafile = bundle.metafile;
  const pgliteDist = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  const bytes = (file: string) => new Uint8Array(readFileSync(join(pgliteDist, file)));
  const assets: EdgeAssets = {
    pgliteWasm: bytes('pglite.wasm'),
    initdbWasm: bytes('initdb.wasm'),
    fsBundle: bytes('pglite.data'),
  };
  runtime = new EdgeRuntime({
    initialCode: bundle.outputFiles[0]!.text,
    extend: (context) => Object.assign(context, { __assets: assets }),
  });
  outcome = JSON.parse(await runtime.evaluate<Promise<string>>('edgeScenario(__assets)')) as EdgeOutcome;
});

describe('both packages inside edge-runtime (Web APIs only), server on PGlite through the fetch adapter', () => {
  it('runs in a VM that has no Node API', () => {
    expect(runtime.evaluate('[typeof process, typeof require, typeof Buffer, typeof setImmediate].join()')).toBe(
      'undefined,undefined,undefined,undefined',
    );
    expect(runtime.evaluate('typeof crypto.subtle.digest + typeof crypto.randomUUID')).toBe('functionfunction');
  });

  it("loads the server's, the client's and the wire format's built ESM, not their sources", () => {
    const inputs = Object.keys(metafile.inputs).map((input) => input.replaceAll('\\', '/'));
    for (const pkg of ['server', 'client', 'wire']) {
      expect(
        inputs.some((input) => input.includes(`packages/${pkg}/dist/`)),
        pkg,
      ).toBe(true);
      expect(
        inputs.some((input) => input.includes(`packages/${pkg}/src/`)),
        pkg,
      ).toBe(false);
    }
  });

  it('sends the key as an SF String and returns the first result', () => {
    expect(outcome.exchanges[0]).toMatchObject({ key: '"edge-key-1"', status: 200, replayed: null });
    expect(outcome.first).toEqual({ charge: 1, amount: 5 });
  });

  it('replays the same result for the same key and payload, flagged Idempotent-Replayed: true', () => {
    expect(outcome.replay).toEqual(outcome.first);
    expect(outcome.exchanges[1]).toMatchObject({ key: '"edge-key-1"', status: 200, replayed: 'true' });
    expect(outcome.settled.slice(0, 2)).toEqual([
      { key: 'edge-key-1', replayed: false },
      { key: 'edge-key-1', replayed: true },
    ]);
  });

  it('answers the same key with a different payload with 422 payload_mismatch, without running the handler', () => {
    expect(outcome.mismatch).toEqual({ reason: 'payload_mismatch', httpStatus: 422 });
    expect(outcome.exchanges[2]).toMatchObject({ key: '"edge-key-1"', status: 422 });
  });

  it("makes a key with the VM's crypto.randomUUID and runs a lease-mode call (its token is a randomUUID too)", () => {
    expect(outcome.exchanges[3]?.key).toMatch(
      /^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$/,
    );
    expect(outcome.generated).toEqual({ charge: 2, amount: 7 });
  });

  it('sends a batch as an Idempotency-Keys dictionary and replays it flagged b0, b1', () => {
    expect(outcome.exchanges[4]).toMatchObject({ keys: 'b0="edge-batch-1", b1="edge-batch-2"', status: 200 });
    // tRPC runs a batch's calls concurrently and the library does not promise their order, so which of the two
    // ran third is a race (on one PGlite connection with async Web Crypto fingerprints it goes either way): each
    // answer belongs to its own call (amount) and the two ran once each (charges 3 and 4, in either order).
    const first = outcome.batchFirst as { charge: number; amount: number }[];
    expect(first.map((r) => r.amount)).toEqual([8, 9]);
    expect(first.map((r) => r.charge).sort()).toEqual([3, 4]);
    expect(outcome.batchReplay).toEqual(outcome.batchFirst);
    expect(outcome.exchanges[5]).toMatchObject({ keys: 'b0="edge-batch-1", b1="edge-batch-2"', replayed: 'b0, b1' });
    expect(outcome.settled.slice(-2).map((s) => s.replayed)).toEqual([true, true]);
    expect(outcome.runs).toBe(4);
    expect(outcome.exchanges).toHaveLength(6 + Object.keys(outcome.raw).length); // one per raw request after these
  });
});

describe('every server outcome inside edge-runtime, in both modes', () => {
  for (const mode of ['transaction', 'lease'] as const) {
    it(`${mode}: a result over maxResponseBytes answers 500 response_too_large, every time`, () => {
      const refused = { status: 500, code: 'INTERNAL_SERVER_ERROR', reason: 'response_too_large' };
      expect(outcome.raw[`${mode}.large`]).toMatchObject(refused);
      expect(outcome.raw[`${mode}.largeAgain`]).toMatchObject(refused);
    });

    it(`${mode}: a stored error is replayed, flagged Idempotent-Replayed`, () => {
      expect(outcome.raw[`${mode}.declined`]).toMatchObject({ status: 402, code: 'PAYMENT_REQUIRED', replayed: null });
      expect(outcome.raw[`${mode}.declinedAgain`]).toMatchObject({
        status: 402,
        code: 'PAYMENT_REQUIRED',
        replayed: 'true',
      });
    });

    it(`${mode}: the same key with another input answers 422 payload_mismatch`, () => {
      expect(outcome.raw[`${mode}.mismatch`]).toMatchObject({ status: 422, reason: 'payload_mismatch' });
    });

    it(`${mode}: a duplicate of a running call answers 409 in_progress, then replays its result`, () => {
      expect(outcome.raw[`${mode}.conflict`]).toMatchObject({ status: 409, reason: 'in_progress' });
      expect(outcome.raw[`${mode}.slow`]).toMatchObject({ status: 200, replayed: null });
      expect(outcome.raw[`${mode}.slowAgain`]).toEqual({ ...outcome.raw[`${mode}.slow`], replayed: 'true' });
    });
  }
});
