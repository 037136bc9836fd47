import { StoredErrorCause } from '../errors/stored-error-cause.js';
import { defaultSerializer, type Serializer } from './serializer.js';

/** A stored error's cause as the envelope holds it: `data` is the serializer's output for its fields. */
export interface StoredCause {
  name: string;
  message: string;
  data: unknown;
}

// Kept apart from the fields: name and message are the Error's own, stack and cause are not replayed.
const NOT_FIELDS = new Set(['name', 'message', 'stack', 'cause']);

/**
 * What an `errorFormatter` may read of a stored error's cause, ready for the envelope; undefined when there is none
 * or it cannot be stored (a cycle, a value the serializer refuses or cannot read back). A cause never makes an
 * error unstorable: the error is then stored without it.
 */
export function causeToStore(cause: unknown, serializer: Serializer): StoredCause | undefined {
  if (typeof cause !== 'object' || cause === null) return undefined;
  try {
    const fields: Record<string, unknown> = {};
    for (const key of Object.keys(cause)) {
      if (!NOT_FIELDS.has(key)) {
        Object.defineProperty(fields, key, { value: (cause as Record<string, unknown>)[key], enumerable: true });
      }
    }
    // A validation error's issues (zod 4 makes them non-enumerable): what tRPC's zodError formatter reads.
    const issues = Object.getOwnPropertyDescriptor(cause, 'issues')?.value;
    if (Array.isArray(issues) && !('issues' in fields)) fields.issues = issues;
    const data = serializer.serialize(fields);
    // Written and read back now, so a replay can rely on it (another serializer might not read all it wrote).
    const text = JSON.stringify(data);
    if (serializer !== defaultSerializer) serializer.deserialize(JSON.parse(text));
    const { name, message } = cause as { name?: unknown; message?: unknown };
    return {
      name: typeof name === 'string' ? name : 'Error',
      message: typeof message === 'string' ? message : '',
      data,
    };
  } catch {
    return undefined;
  }
}

/** The replayed error's cause, or undefined when the stored one cannot be read (the error replays without it). */
export function restoreCause(stored: unknown, serializer: Serializer): StoredErrorCause | undefined {
  const { name, message, data } = (stored ?? {}) as Partial<StoredCause>;
  if (typeof name !== 'string' || typeof message !== 'string') return undefined;
  try {
    const fields = serializer.deserialize(data);
    return new StoredErrorCause(name, message, typeof fields === 'object' && fields !== null ? (fields as never) : {});
  } catch {
    return undefined;
  }
}
