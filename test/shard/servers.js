'use strict';
// test/shard/servers.js: throwaway PostgreSQL servers for the sharding runs
// (test/shard/run), each its own cluster on 127.0.0.1 at a free port, in a
// directory under the run's, owned by "postgres" (the servers refuse to
// run as root; as root the commands run through runuser).  What the runs
// need of them: initdb with settings, start, a clean or an immediate stop,
// kill -9 of the postmaster and its children, a standby by pg_basebackup
// from another server, promotion, pg_rewind, and SQL.
const fs = require('node:fs');
const path = require('node:path');
const net = require('node:net');
const { spawn, spawnSync } = require('node:child_process');
const pg = require('pg');

const asRoot = process.getuid && process.getuid() === 0;

/** Run a program (as postgres when root); resolves {code, out}. */
function run(cmd, args, opts = {}) {
  const [c, a] = asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  return new Promise((resolve) => {
    const p = spawn(c, a, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...(opts.env || {}) } });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('close', (code) => resolve({ code, out }));
  });
}

async function must(cmd, args, opts) {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${path.basename(cmd)} ${args.join(' ')}: exit ${r.code}\n${r.out.slice(-2000)}`);
  return r.out;
}

/** n free TCP ports on 127.0.0.1 */
async function freePorts(n) {
  const servers = [];
  for (let i = 0; i < n; i++) {
    const s = net.createServer();
    await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
    servers.push(s);
  }
  const ports = servers.map((s) => s.address().port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** A directory the servers' user owns. */
function makeDir(dir) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (asRoot) spawnSync('chown', ['-R', 'postgres:', dir]);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// What this process started is stopped when it exits, however it exits
// (a signal included): the servers by pg_ctl, process groups by kill -9.
const running = new Set();   // Servers started and not stopped
const groups = new Set();    // process group ids
process.on('exit', () => {
  for (const s of running) {
    const [c, a] = asRoot ? ['runuser', ['-u', 'postgres', '--', s.bin('pg_ctl')]] : [s.bin('pg_ctl'), []];
    spawnSync(c, [...a, '-D', s.data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
  }
  for (const g of groups) {
    try { process.kill(-g, 'SIGKILL'); } catch (err) { /* gone */ }
  }
});
for (const [sig, n] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]]) process.on(sig, () => process.exit(128 + n));

class Server {
  /**
   * @param {string} bindir the server's bin directory
   * @param {string} dir where its data directory and log go
   * @param {number} port
   * @param {string} name
   */
  constructor(bindir, dir, port, name) {
    this.bindir = bindir;
    this.dir = dir;
    this.data = path.join(dir, 'data');
    this.log = path.join(dir, 'server.log');
    this.port = port;
    this.name = name;
  }

  bin(p) { return path.join(this.bindir, p); }

  /** pg.Client config of a database here. */
  config(database = 'postgres', extra = {}) {
    return { host: '127.0.0.1', port: this.port, user: 'postgres', database, ...extra };
  }

  /** A libpq connection string; user null: none (PL/Proxy then connects as its caller). */
  conninfo(database = 'postgres', user = 'postgres') {
    return `host=127.0.0.1 port=${this.port} dbname=${database}${user ? ` user=${user}` : ''}`;
  }

  /** Settings (name=value) appended to postgresql.conf. */
  configure(settings) {
    const lines = Object.entries(settings).map(([k, v]) => `${k} = '${String(v).replace(/'/g, "''")}'`);
    fs.appendFileSync(path.join(this.data, 'postgresql.conf'), `${lines.join('\n')}\n`);
  }

  async init(settings = {}) {
    makeDir(this.dir);
    const plugins = pluginSettings(this.bindir);
    await must(this.bin('initdb'), ['-D', this.data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8',
      '--locale=C.UTF-8', '--no-sync', '--data-checksums']);
    this.configure({
      listen_addresses: '127.0.0.1',
      port: this.port,
      unix_socket_directories: this.dir,
      max_connections: 200,
      wal_level: 'logical',
      max_wal_senders: 20,
      max_replication_slots: 20,
      hot_standby: 'on',
      hot_standby_feedback: 'on',
      wal_keep_size: '256MB',
      shared_buffers: '64MB',
      log_line_prefix: '%m [%p] %q%a ',
      lc_messages: 'C',
      ...plugins,
      ...settings,
    });
  }

  async start() {
    running.add(this);
    await must(this.bin('pg_ctl'), ['-D', this.data, '-l', this.log, '-w', '-t', '120', 'start']);
  }

  async stop(mode = 'fast') {
    await run(this.bin('pg_ctl'), ['-D', this.data, '-m', mode, '-w', '-t', '120', 'stop']);
    running.delete(this);
  }

  pid() {
    try {
      return Number(fs.readFileSync(path.join(this.data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch (err) {
      return null;
    }
  }

  /** kill -9 of the postmaster and every process it started: a power cut of this server. */
  async kill() {
    const pid = this.pid();
    if (!pid) return;
    const kids = spawnSync('pgrep', ['-P', String(pid)]).stdout.toString().split('\n').filter(Boolean).map(Number);
    for (const p of [pid, ...kids]) {
      try { process.kill(p, 'SIGKILL'); } catch (err) { /* gone */ }
    }
    for (let i = 0; i < 100; i++) {
      const alive = [pid, ...kids].some((p) => { try { process.kill(p, 0); return true; } catch (err) { return false; } });
      if (!alive) break;
      await sleep(50);
    }
    try { fs.unlinkSync(path.join(this.data, 'postmaster.pid')); } catch (err) { /* gone */ }
  }

  /** A standby of primary (pg_basebackup), streaming from slot, not started. */
  async initStandby(primary, slot, settings = {}) {
    makeDir(this.dir);
    await must(this.bin('pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres',
      '-D', this.data, '-X', 'stream', '-c', 'fast', '--no-sync']);
    fs.writeFileSync(path.join(this.data, 'standby.signal'), '');
    if (asRoot) spawnSync('chown', ['postgres:', path.join(this.data, 'standby.signal')]);
    this.configure({
      port: this.port,
      unix_socket_directories: this.dir,
      primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres application_name=${this.name}`,
      primary_slot_name: slot,
      ...settings,
    });
  }

  /**
   * This stopped former primary as a standby of primary: pg_rewind, then
   * the standby's settings.  pg_rewind copies the source's configuration
   * files too: this server's own settings (port, socket, and settings)
   * are appended again after it, and win.
   */
  async rewindTo(primary, slot, settings = {}) {
    await must(this.bin('pg_rewind'), ['-D', this.data, `--source-server=${primary.conninfo()}`, '--no-sync']);
    fs.writeFileSync(path.join(this.data, 'standby.signal'), '');
    if (asRoot) spawnSync('chown', ['postgres:', path.join(this.data, 'standby.signal')]);
    this.configure({
      port: this.port,
      unix_socket_directories: this.dir,
      primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres application_name=${this.name}`,
      primary_slot_name: slot,
      ...settings,
    });
  }

  async promote() {
    await must(this.bin('pg_ctl'), ['-D', this.data, '-w', '-t', '120', 'promote']);
  }

  async reload() {
    await must(this.bin('pg_ctl'), ['-D', this.data, 'reload']);
  }

  /** Run SQL in a fresh connection; the rows. */
  async sql(text, values, database = 'postgres') {
    const c = new pg.Client(this.config(database));
    c.on('error', () => {});
    await c.connect();
    try {
      return (await c.query(text, values)).rows;
    } finally {
      await c.end().catch(() => {});
    }
  }

  /** The server log's crashes, failed assertions and PANICs. */
  problems() {
    let text = '';
    try { text = fs.readFileSync(this.log, 'utf8'); } catch (err) { return []; }
    return text.split('\n').filter((l) => /TRAP:|PANIC:|was terminated by exception/.test(l)
      || (/terminated by signal/.test(l) && !/signal 9/.test(l)));
  }
}

/**
 * hxstate's output plugin trusted (output_plugin_libraries), where the
 * server has that setting (15.20, 18.6 and later), as the README's set-up
 * says: {} elsewhere.
 */
function pluginSettings(bindir) {
  const r = spawnSync(path.join(bindir, 'postgres'), ['--describe-config']);
  const known = r.status === 0 && /^output_plugin_libraries\t/m.test(r.stdout.toString());
  return known ? { output_plugin_libraries: 'pgoutput, test_decoding, hxstate' } : {};
}

module.exports = { Server, freePorts, makeDir, run, must, sleep, groups, pluginSettings };
