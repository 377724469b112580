'use strict';
// libpq's keyword/value connection strings ("host=10.0.0.1 port=5432
// dbname=app"), as PL/Proxy's cluster and the router's hxshard.shards()
// give them, read into a pg.Client config.  A URI ("postgres://...") is
// handed to pg as its connectionString.
//
// The rules (libpq's "Keyword/Value Connection Strings"): keyword = value
// pairs separated by whitespace, spaces around "=" allowed; a value is a
// run of non-blank characters, or single-quoted, where \' and \\ stand
// for ' and \.  Keywords that pg.Client has no option for are refused
// (rather than dropped, which would connect somewhere else than meant).

const KEYS = {
  host: 'host',
  hostaddr: 'host',
  port: 'port',
  dbname: 'database',
  user: 'user',
  password: 'password',
  application_name: 'application_name',
  fallback_application_name: 'fallback_application_name',
  connect_timeout: 'connectionTimeoutMillis',
  options: 'options',
  sslmode: 'sslmode',
  keepalives: 'keepAlive',
  target_session_attrs: null, // pg has none: accepted only as 'any'
};

/**
 * @param {string} text
 * @returns {object} a pg.Client config
 */
function parseConninfo(text) {
  const s = String(text).trim();
  if (/^postgres(?:ql)?:\/\//.test(s)) return { connectionString: s };
  const out = {};
  let i = 0;
  const n = s.length;
  const blank = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
  while (i < n) {
    while (i < n && blank(s[i])) i++;
    if (i >= n) break;
    let key = '';
    while (i < n && s[i] !== '=' && !blank(s[i])) key += s[i++];
    while (i < n && blank(s[i])) i++;
    if (s[i] !== '=' || key === '') throw new TypeError(`conninfo: missing "=" after "${key}"`);
    i++;
    while (i < n && blank(s[i])) i++;
    let value = '';
    if (s[i] === "'") {
      i++;
      let closed = false;
      while (i < n) {
        const c = s[i++];
        if (c === '\\' && i < n) {
          value += s[i++];
        } else if (c === "'") {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) throw new TypeError('conninfo: unterminated quoted value');
    } else {
      while (i < n && !blank(s[i])) {
        const c = s[i++];
        if (c === '\\' && i < n) value += s[i++];
        else value += c;
      }
    }
    if (!Object.prototype.hasOwnProperty.call(KEYS, key)) {
      throw new TypeError(`conninfo: keyword "${key}" is not supported here`);
    }
    const name = KEYS[key];
    if (name === null) {
      if (value !== 'any') throw new TypeError(`conninfo: ${key}=${value} is not supported here`);
      continue;
    }
    if (name === 'port' || name === 'connectionTimeoutMillis') {
      const v = Number(value);
      if (!Number.isInteger(v) || v < 0) throw new TypeError(`conninfo: ${key} is not a number: ${value}`);
      out[name] = name === 'port' ? v : v * 1000;
    } else if (name === 'keepAlive') {
      out.keepAlive = value !== '0';
    } else if (name === 'sslmode') {
      if (value === 'disable') out.ssl = false;
      else if (value === 'require' || value === 'prefer' || value === 'allow') out.ssl = { rejectUnauthorized: false };
      else if (value === 'verify-ca' || value === 'verify-full') out.ssl = { rejectUnauthorized: true };
      else throw new TypeError(`conninfo: unknown sslmode ${value}`);
    } else {
      out[name] = value;
    }
  }
  return out;
}

module.exports = { parseConninfo };
