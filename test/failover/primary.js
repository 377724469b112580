'use strict';
// test/failover/primary.js: connect node-postgres to the primary of a
// replicated group, given a multi-host connection string.
//
// libpq accepts several hosts in one connection string and, with
// target_session_attrs=read-write, keeps the first one that accepts
// writes; that is how an application follows a failover without knowing
// which node is the primary (pg_autoctl show uri prints such a string).
// node-postgres takes one host only, so this module does what libpq does:
//
//   const { connectPrimary } = require('./primary');
//   const { client, host, port } = await connectPrimary(
//     'host=127.0.0.1,127.0.0.1 port=5501,5502 dbname=app user=app ' +
//     'target_session_attrs=read-write');
//
// Both spellings of a connection string are understood: key=value pairs
// ("host=a,b port=1,2 ...", values optionally in single quotes) and URIs
// ("postgres://user@a:1,b:2/app?target_session_attrs=read-write").
//
// The rules, as libpq's:
//   - hosts are tried in the order given; one port applies to every host,
//     otherwise there is one port per host;
//   - with target_session_attrs=read-write (or primary) a host is kept only
//     when SELECT pg_is_in_recovery() says false, and its connection is
//     closed otherwise; with "any" (the default) the first host that
//     accepts the connection is kept;
//   - unlike libpq, when no host qualifies it does not give up at once: it
//     tries the whole list again, with a backoff, until timeoutMs has
//     passed (a failover leaves no primary for a while).
// The answer holds at connect time only: a node that is demoted later
// makes the connection fail (or refuse writes), and the caller connects
// again.
const pg = require('pg');

/** Parse a key=value conninfo or a postgres:// URI into an object. */
function parseConninfo(str) {
  const s = String(str).trim();
  return /^postgres(ql)?:\/\//.test(s) ? parseUri(s) : parseKeyValue(s);
}

function parseKeyValue(s) {
  const out = {};
  let i = 0;
  const skipSpace = () => { while (i < s.length && /\s/.test(s[i])) i++; };
  for (;;) {
    skipSpace();
    if (i >= s.length) break;
    const eq = s.indexOf('=', i);
    if (eq < 0) throw new Error(`conninfo: missing "=" after "${s.slice(i)}"`);
    const key = s.slice(i, eq).trim();
    i = eq + 1;
    skipSpace();
    let value = '';
    if (s[i] === "'") {
      i++;
      while (i < s.length && s[i] !== "'") {
        if (s[i] === '\\' && i + 1 < s.length) i++;
        value += s[i++];
      }
      if (s[i] !== "'") throw new Error('conninfo: unterminated quoted value');
      i++;
    } else {
      while (i < s.length && !/\s/.test(s[i])) {
        if (s[i] === '\\' && i + 1 < s.length) i++;
        value += s[i++];
      }
    }
    out[key] = value;
  }
  return out;
}

function parseUri(s) {
  const m = /^postgres(?:ql)?:\/\/(?:([^@/]*)@)?([^/?]*)(?:\/([^?]*))?(?:\?(.*))?$/.exec(s);
  if (!m) throw new Error(`conninfo: cannot parse URI ${s}`);
  const out = {};
  if (m[1] !== undefined) {
    const [user, password] = m[1].split(':');
    if (user) out.user = decodeURIComponent(user);
    if (password !== undefined) out.password = decodeURIComponent(password);
  }
  const hosts = [];
  const ports = [];
  for (const hp of m[2].split(',').filter((x) => x !== '')) {
    const b = /^\[([^\]]*)\](?::(\d*))?$/.exec(hp) || /^([^:]*)(?::(\d*))?$/.exec(hp);
    hosts.push(decodeURIComponent(b[1]));
    ports.push(b[2] || '');
  }
  if (hosts.length > 0) out.host = hosts.join(',');
  if (ports.some((p) => p !== '')) out.port = ports.join(',');
  if (m[3]) out.dbname = decodeURIComponent(m[3]);
  for (const kv of (m[4] || '').split('&').filter((x) => x !== '')) {
    const eq = kv.indexOf('=');
    out[decodeURIComponent(eq < 0 ? kv : kv.slice(0, eq))] = eq < 0 ? '' : decodeURIComponent(kv.slice(eq + 1));
  }
  return out;
}

/** The list of {host, port} a parsed conninfo names, in order. */
function targets(info) {
  const hosts = (info.host || process.env.PGHOST || 'localhost').split(',');
  const ports = String(info.port || process.env.PGPORT || '5432').split(',');
  if (ports.length !== 1 && ports.length !== hosts.length) {
    throw new Error(`conninfo: ${hosts.length} hosts but ${ports.length} ports`);
  }
  return hosts.map((host, k) => ({ host, port: Number(ports.length === 1 ? ports[0] : ports[k]) || 5432 }));
}

/** A pg.Client config for one of the hosts. */
function clientConfig(info, target, extra) {
  return {
    host: target.host,
    port: target.port,
    user: info.user || process.env.PGUSER,
    password: info.password || process.env.PGPASSWORD,
    database: info.dbname || process.env.PGDATABASE,
    application_name: info.application_name,
    connectionTimeoutMillis: 1000 * (Number(info.connect_timeout) || 2),
    keepAlive: true,
    ...extra,
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Connect to the first host of the conninfo that qualifies (see the
 * header).  Resolves to {client, host, port}; rejects after timeoutMs
 * with every host's last error.  options.config is merged into each
 * pg.Client config (application_name, say); options.client, a function
 * called with each new client before it connects, lets the caller attach
 * its listeners ('error', 'notice') first.
 */
async function connectPrimary(conninfo, options = {}) {
  const info = typeof conninfo === 'string' ? parseConninfo(conninfo) : conninfo;
  const list = targets(info);
  const mode = info.target_session_attrs || 'any';
  if (!['any', 'read-write', 'primary'].includes(mode)) {
    throw new Error(`connectPrimary: target_session_attrs=${mode} is not supported`);
  }
  const deadline = Date.now() + (options.timeoutMs === undefined ? 60000 : options.timeoutMs);
  const errors = new Map();
  let delay = 50;
  for (;;) {
    for (const target of list) {
      const client = new pg.Client(clientConfig(info, target, options.config));
      // an 'error' without a listener would crash the process
      client.on('error', () => {});
      if (options.client) options.client(client);
      try {
        await client.connect();
        if (mode !== 'any') {
          const { rows } = await client.query('SELECT pg_is_in_recovery() AS standby');
          if (rows[0].standby) throw new Error('in recovery (a standby)');
        }
        return { client, host: target.host, port: target.port };
      } catch (err) {
        errors.set(`${target.host}:${target.port}`, err.message);
        client.end().catch(() => {});
      }
    }
    if (Date.now() >= deadline) {
      const why = [...errors].map(([t, m]) => `${t}: ${m}`).join('; ');
      throw new Error(`no ${mode === 'any' ? 'reachable' : 'read-write'} host: ${why}`);
    }
    await sleep(Math.min(delay, Math.max(0, deadline - Date.now())));
    delay = Math.min(delay * 2, 1000);
  }
}

module.exports = { parseConninfo, targets, connectPrimary };
