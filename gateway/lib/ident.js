'use strict';
// An SQL identifier, quoted: what the gateway writes into a statement's
// text for a name it was configured with (a schema, a table), never a
// value a client sent (those are parameters).

/** "name" as an SQL identifier: double quotes, embedded ones doubled. */
function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

module.exports = { quoteIdent };
