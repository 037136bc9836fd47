import {
  parseStringDictionary,
  parseStringItem,
  StructuredFieldReader,
  StructuredFieldSyntaxError,
} from '@trpc-idempotency/wire';
import { IdempotencyError } from '../errors/idempotency-error.js';

export const MAX_KEY_LENGTH = 255;

const HOW_TO_FIX =
  'Send 1-255 visible ASCII characters (a UUID is ideal), as a Structured Field String ("…") or as the raw value.';

function invalid(message: string, cause?: unknown): IdempotencyError {
  return new IdempotencyError('key_invalid', `${message}. ${HOW_TO_FIX}`, { cause });
}

function describeChar(code: number): string {
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  return code > 0x20 && code < 0x7f ? `"${String.fromCharCode(code)}" (${hex})` : hex;
}

/** What is wrong with a key, or undefined when it is 1–255 characters of visible ASCII (0x21–0x7E). */
export function keyProblem(key: unknown): string | undefined {
  if (typeof key !== 'string') return `it must be a string, got ${typeof key}`;
  if (key.length === 0) return 'it is empty';
  if (key.length > MAX_KEY_LENGTH) return `it is ${key.length} characters long, longer than ${MAX_KEY_LENGTH}`;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return `it contains ${describeChar(c)} at position ${i + 1}, which is not visible ASCII`;
  }
  return undefined;
}

/**
 * Checks a key (from a header or from the `key` option): 1–255 characters of visible ASCII (0x21–0x7E).
 * Returns it unchanged, or throws `IdempotencyError('key_invalid')`.
 */
export function validateKey(key: string): string {
  const problem = keyProblem(key);
  if (problem !== undefined) throw invalid(`The idempotency key is invalid: ${problem}`);
  return key;
}

/**
 * Reads an `Idempotency-Key` value. Trimmed; one that then starts with `"` is an SF Item String (parameters
 * ignored), anything else is the key in raw form (a UUID starting with a digit is not an SF token).
 * Throws `IdempotencyError('key_invalid')`.
 */
export function parseIdempotencyKey(headerValue: string): string {
  const value = StructuredFieldReader.trimOWS(headerValue);
  if (value.charCodeAt(0) !== 0x22) return validateKey(value);
  let key: string;
  try {
    key = parseStringItem(value);
  } catch (error) {
    throw asInvalid('Idempotency-Key', error);
  }
  return validateKey(key);
}

const BATCH_MEMBER = /^b(0|[1-9][0-9]*)$/;

/**
 * Reads an `Idempotency-Keys` value: an SF Dictionary `b<batchIndex>="key"`, e.g. `b0="k1", b2="k2"`. Every
 * value must be a String holding a valid key and every member name `b<batchIndex>`; the last duplicate wins.
 * An empty value is an empty dictionary. Throws `IdempotencyError('key_invalid')`.
 */
export function parseIdempotencyKeys(headerValue: string): Map<number, string> {
  let members: Map<string, string | null>;
  try {
    members = parseStringDictionary(headerValue);
  } catch (error) {
    throw asInvalid('Idempotency-Keys', error);
  }
  const keys = new Map<number, string>();
  for (const [name, value] of members) {
    const index = Number(BATCH_MEMBER.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(index)) {
      throw invalid(`Idempotency-Keys member "${name}" is not named b<batchIndex>`);
    }
    if (value === null) throw invalid(`The value of Idempotency-Keys member ${name} is not a quoted String`);
    const problem = keyProblem(value);
    if (problem !== undefined) {
      throw invalid(`The idempotency key of Idempotency-Keys member ${name} is invalid: ${problem}`);
    }
    keys.set(index, value);
  }
  return keys;
}

function asInvalid(header: string, error: unknown): unknown {
  if (error instanceof StructuredFieldSyntaxError) {
    return invalid(`The ${header} header is not a valid Structured Field: ${error.message}`, error);
  }
  return error;
}
