import { StructuredFieldReader } from './structured-field-reader.js';

/**
 * Reads an SF Item that must be a String, e.g. an `Idempotency-Key` value `"8e03…"`; parameters are ignored.
 * Throws `StructuredFieldSyntaxError`.
 */
export function parseStringItem(value: string): string {
  const reader = new StructuredFieldReader(StructuredFieldReader.trimOWS(value));
  const text = reader.parseString();
  reader.skipParameters();
  reader.expectEnd('item');
  return text;
}

/**
 * Reads an SF Dictionary such as `Idempotency-Keys: b0="k1", b2="k2"`: each member's String, or null when the
 * member holds anything else (a token, number, inner list, or no value). Parameters are ignored; a later member
 * with the same name replaces the earlier one (RFC 8941). Throws `StructuredFieldSyntaxError`.
 */
export function parseStringDictionary(value: string): Map<string, string | null> {
  const members = new Map<string, string | null>();
  const reader = new StructuredFieldReader(StructuredFieldReader.trimOWS(value));
  while (!reader.atEnd()) {
    const name = reader.parseKey();
    let member: string | null = null; // a member without "=" is the Boolean true
    if (reader.peek() === 0x3d) {
      reader.pos++;
      if (reader.peek() === 0x22) member = reader.parseString();
      else if (reader.peek() === 0x28) reader.skipInnerList();
      else reader.skipBareItem();
    }
    reader.skipParameters();
    members.set(name, member);
    if (endOfMember(reader)) break;
  }
  return members;
}

/**
 * Reads an SF List of Tokens such as `Idempotent-Replayed: b0, b2`; parameters are ignored. Throws
 * `StructuredFieldSyntaxError`, also for a member that is not a Token.
 */
export function parseTokenList(value: string): string[] {
  const tokens: string[] = [];
  const reader = new StructuredFieldReader(StructuredFieldReader.trimOWS(value));
  while (!reader.atEnd()) {
    tokens.push(reader.parseToken());
    reader.skipParameters();
    if (endOfMember(reader)) break;
  }
  return tokens;
}

/** After a List or Dictionary member: true at the end of the field, else consumes the separating comma. */
function endOfMember(reader: StructuredFieldReader): boolean {
  reader.skipOWS();
  if (reader.atEnd()) return true;
  if (reader.peek() !== 0x2c) reader.fail('members must be separated by commas');
  reader.pos++;
  reader.skipOWS();
  if (reader.atEnd()) reader.fail('a trailing comma must be followed by another member');
  return false;
}
