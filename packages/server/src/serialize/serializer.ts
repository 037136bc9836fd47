import { DeferredValueError, isDeferred } from './deferred-values.js';

/**
 * How a result is turned into JSON-safe data for storage and back. `superjson` itself satisfies this interface
 * (`serializer: superjson`); the default below covers what most mutations return without any dependency.
 */
export interface Serializer {
  /** Returns data that `JSON.stringify` keeps intact. */
  serialize(value: unknown): unknown;
  /** The inverse of `serialize`, given the same data after a JSON round trip. */
  deserialize(payload: any): unknown;
}

/*
 * The default format is a JSON tree in which values JSON cannot hold become one-key objects:
 *   {"$date":"2020-01-01T00:00:00.000Z"} (null for an invalid Date)   {"$bigint":"123"}   {"$undefined":true}
 *   {"$map":[[key, value], …]}   {"$set":[member, …]}   {"$number":"NaN" | "Infinity" | "-Infinity" | "-0"}
 * A real object key that starts with "$" is written with one more "$" ("$date" → "$$date") and read back without
 * it, so an object's own keys can never be mistaken for a tag. Everything else follows JSON.stringify, so a replay
 * sends what the first answer sent: toJSON() is honoured on any object but Date's own (a Map or Set with its own
 * toJSON is sent by it), and what it returns is read as JSON reads it; boxed numbers, strings and booleans become the
 * primitive; functions and symbols are dropped from objects and become null in arrays; class instances keep their
 * own enumerable properties.
 */

const DOLLAR = 0x24;

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  // Assigning "__proto__" would change the prototype instead of creating the key JSON.parse gave us.
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

function serializeNumber(value: number): unknown {
  if (Number.isFinite(value)) return Object.is(value, -0) ? { $number: '-0' } : value;
  return { $number: String(value) };
}

function serializeValue(value: unknown, ancestors: Set<object>, fromToJSON = false): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return serializeNumber(value);
    case 'bigint':
      return { $bigint: value.toString() };
    case 'undefined':
    case 'function':
    case 'symbol':
      return { $undefined: true };
  }
  if (value === null) return null;
  const object = value as object;
  if (isDeferred(object)) throw new DeferredValueError();
  // JSON.stringify asks every object for its toJSON first (a Map or an array may have one), but reads what toJSON
  // returned as it is. Date's own toJSON is the one exception: a Date is kept as a Date.
  if (!fromToJSON) {
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function' && !(object instanceof Date && toJSON === Date.prototype.toJSON)) {
      return serializeValue(toJSON.call(object), ancestors, true);
    }
  }
  // Boxed primitives are sent as the primitive, so they are stored as one.
  if (object instanceof Number) return serializeNumber(Number(object));
  if (object instanceof String) return String(object);
  if (object instanceof Boolean) return object.valueOf();
  if (object instanceof BigInt) return { $bigint: object.valueOf().toString() };
  if (ancestors.has(object)) throw new TypeError('Cannot store a result that contains a cycle');
  ancestors.add(object);
  try {
    return serializeObject(object, ancestors, fromToJSON);
  } finally {
    ancestors.delete(object);
  }
}

function serializeObject(object: object, ancestors: Set<object>, fromToJSON: boolean): unknown {
  if (Array.isArray(object)) {
    const out: unknown[] = new Array(object.length);
    for (let i = 0; i < object.length; i++) {
      const item = object[i];
      out[i] = typeof item === 'function' || typeof item === 'symbol' ? null : serializeValue(item, ancestors);
    }
    return out;
  }
  // What a toJSON returned is sent as JSON sends it: a Date, a Map or a Set there is an object of its own keys.
  if (!fromToJSON) {
    if (object instanceof Date) {
      return { $date: Number.isNaN(object.getTime()) ? null : object.toISOString() };
    }
    if (object instanceof Map) {
      const entries: unknown[] = [];
      for (const [k, v] of object) entries.push([serializeValue(k, ancestors), serializeValue(v, ancestors)]);
      return { $map: entries };
    }
    if (object instanceof Set) {
      const members: unknown[] = [];
      for (const member of object) members.push(serializeValue(member, ancestors));
      return { $set: members };
    }
  }
  const out: Record<string, unknown> = {};
  const record = object as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const v = record[key];
    if (typeof v === 'function' || typeof v === 'symbol') continue;
    setOwn(out, key.charCodeAt(0) === DOLLAR ? `$${key}` : key, serializeValue(v, ancestors));
  }
  return out;
}

function corrupt(detail: string): Error {
  return new Error(`Stored result is not in the default serializer's format: ${detail}`);
}

function deserializeTag(tag: string, body: unknown): unknown {
  switch (tag) {
    case '$date':
      if (body === null) return new Date(Number.NaN);
      if (typeof body !== 'string') throw corrupt('$date must hold a string');
      return new Date(body);
    case '$bigint':
      if (typeof body !== 'string') throw corrupt('$bigint must hold a string');
      return BigInt(body);
    case '$undefined':
      return undefined;
    case '$number':
      if (body === '-0') return -0;
      if (body === 'NaN' || body === 'Infinity' || body === '-Infinity') return Number(body);
      throw corrupt(`unknown $number ${JSON.stringify(body)}`);
    case '$map': {
      if (!Array.isArray(body)) throw corrupt('$map must hold an array');
      const map = new Map<unknown, unknown>();
      for (const entry of body) {
        if (!Array.isArray(entry) || entry.length !== 2) throw corrupt('$map entries must be [key, value] pairs');
        map.set(deserializeValue(entry[0]), deserializeValue(entry[1]));
      }
      return map;
    }
    case '$set': {
      if (!Array.isArray(body)) throw corrupt('$set must hold an array');
      const set = new Set<unknown>();
      for (const member of body) set.add(deserializeValue(member));
      return set;
    }
    default:
      throw corrupt(`unknown tag ${JSON.stringify(tag)}`);
  }
}

function deserializeValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(deserializeValue);
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (key.charCodeAt(0) === DOLLAR) {
      if (key.charCodeAt(1) !== DOLLAR) {
        if (keys.length !== 1) throw corrupt(`tag ${JSON.stringify(key)} must be the only key of its object`);
        return deserializeTag(key, record[key]);
      }
      setOwn(out, key.slice(1), deserializeValue(record[key]));
    } else {
      setOwn(out, key, deserializeValue(record[key]));
    }
  }
  return out;
}

/** Keeps Date, Map, Set, BigInt, undefined (nested and top-level), NaN, ±Infinity and -0 through JSON. */
export const defaultSerializer: Serializer = Object.freeze({
  serialize: (value: unknown): unknown => serializeValue(value, new Set()),
  deserialize: (payload: unknown): unknown => deserializeValue(payload),
});
