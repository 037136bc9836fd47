export { parseStringDictionary, parseStringItem, parseTokenList } from './parse.js';
export { serializeKeyHeader, serializeKeysDictionary, serializeString } from './serialize.js';
export { StructuredFieldReader, StructuredFieldSyntaxError } from './structured-field-reader.js';
