/**
 * The `cause` of a replayed stored error: the original cause's `name`, `message` and own enumerable fields (and a
 * validation error's `issues`), stored through the `serializer` and restored as plain data. Its class is not kept:
 * an `errorFormatter` that reads fields (`error.cause?.declineCode`) answers a replay as it answered the first
 * call; one that tests the class (`error.cause instanceof ZodError`) must also accept a `StoredErrorCause` of that
 * `name` (see the server README, "Stored errors").
 */
export class StoredErrorCause extends Error {
  /** The original cause's fields, restored: `cause.declineCode`. */
  [field: string]: unknown;

  constructor(name: string, message: string, fields: Record<string, unknown>) {
    super(message);
    for (const key of Object.keys(fields)) {
      // defineProperty, not assignment: a field named "__proto__" must stay a field. Error's own members win.
      if (!(key in this)) {
        Object.defineProperty(this, key, { value: fields[key], enumerable: true, writable: true, configurable: true });
      }
    }
    this.name = name;
  }
}
