import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Test-only loader for the wire conformance cases, kept in the repository (fixtures/wire-vectors.json) so a fresh
// clone runs them with nothing beside it; the client's tests read the same file.
function findRepoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'turbo.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('Cannot find the repository root (the folder holding turbo.json)');
    dir = parent;
  }
  return dir;
}

export const WIRE_VECTORS_PATH = path.join(findRepoRoot(), 'fixtures', 'wire-vectors.json');

export interface KeyVector {
  header?: string;
  repeat?: { char: string; count: number };
  quoted?: boolean;
  key?: string;
  key_length?: number;
  error?: string;
  note?: string;
}
export interface BatchVector {
  header: string;
  keys?: Record<string, string>;
  error?: string;
  note?: string;
}
export interface EncodeVector {
  key?: string;
  keys?: Record<string, string>;
  header: string;
}
export interface WireVectors {
  key: KeyVector[];
  batch: BatchVector[];
  encode: EncodeVector[];
}

export function loadWireVectors(): WireVectors {
  if (!existsSync(WIRE_VECTORS_PATH)) {
    throw new Error(`Wire conformance cases not found at ${WIRE_VECTORS_PATH}`);
  }
  return JSON.parse(readFileSync(WIRE_VECTORS_PATH, 'utf8')) as WireVectors;
}

/** The header value a key vector describes (`repeat` builds the long keys). */
export function headerOf(vector: KeyVector): string {
  if (vector.header !== undefined) return vector.header;
  if (!vector.repeat) throw new Error(`Key vector has neither header nor repeat: ${JSON.stringify(vector)}`);
  const raw = vector.repeat.char.repeat(vector.repeat.count);
  return vector.quoted ? `"${raw}"` : raw;
}
