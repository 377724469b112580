'use strict';
// test/shard/formation.js: a pg_auto_failover formation on 127.0.0.1 for
// the sharding runs: a monitor and two nodes, each a pg_autoctl service in
// a process group of its own (so that kill -9 of a node's service kills
// its keeper, its postgres and every backend at once, as a machine that
// dies would).  Its configuration, state and pid files live under the
// run's directory (XDG_* variables).  With two nodes pg_auto_failover
// keeps commits synchronous while both are healthy (the primary's
// synchronous_standby_names names the secondary), so a commit that
// returned is on both.  The monitor's health checks are shortened so
// that an unplanned failover takes seconds.
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const pg = require('pg');
const { run, must, makeDir, sleep, groups, pluginSettings } = require('./servers');

const asRoot = process.getuid && process.getuid() === 0;

class Formation {
  /**
   * @param {string} pgConfig the servers' pg_config
   * @param {string} dir
   * @param {number[]} ports [monitor, node1, node2]
   * @param {string} database the nodes' database
   */
  constructor(pgConfig, dir, ports, database) {
    this.pgConfig = pgConfig;
    this.bindir = spawnSync(pgConfig, ['--bindir']).stdout.toString().trim();
    this.dir = dir;
    this.ports = ports;
    this.database = database;
    this.services = new Map(); // name -> ChildProcess (its process group)
    this.env = {
      XDG_CONFIG_HOME: path.join(dir, 'xdg', 'config'),
      XDG_DATA_HOME: path.join(dir, 'xdg', 'data'),
      XDG_RUNTIME_DIR: path.join(dir, 'xdg', 'run'),
      TMPDIR: path.join(dir, 'tmp'),
      PATH: `${this.bindir}:${process.env.PATH}`,
      PG_CONFIG: pgConfig,
      PGHOST: dir,
    };
    this.monitorUri = `postgres://autoctl_node@127.0.0.1:${ports[0]}/pg_auto_failover`;
  }

  autoctl(args) {
    return must('pg_autoctl', args, { env: this.env });
  }

  /** A pg_autoctl service in a process group of its own. */
  service(name, args) {
    const log = fs.openSync(path.join(this.dir, `${name}.log`), 'a');
    const [c, a] = asRoot ? ['runuser', ['-u', 'postgres', '--', 'pg_autoctl', ...args]] : ['pg_autoctl', args];
    const p = spawn(c, a, { detached: true, stdio: ['ignore', log, log], env: { ...process.env, ...this.env } });
    p.on('error', () => {});
    this.services.set(name, p);
    groups.add(p.pid); // killed at exit, whatever happens
    return p;
  }

  /** kill -9 of a service's whole process group. */
  kill(name) {
    const p = this.services.get(name);
    if (!p) return;
    try { process.kill(-p.pid, 'SIGKILL'); } catch (err) { /* gone */ }
    this.services.delete(name);
    groups.delete(p.pid);
  }

  async states() {
    const c = new pg.Client({ connectionString: this.monitorUri });
    c.on('error', () => {});
    try {
      await c.connect();
      const { rows } = await c.query(`SELECT string_agg(nodename || '=' || current_group_state || '/' ||
          assigned_group_state, ' ' ORDER BY nodename) AS s FROM pgautofailover.current_state('default')`);
      return rows[0].s || '';
    } catch (err) {
      return '';
    } finally {
      await c.end().catch(() => {});
    }
  }

  async waitStates(re, ms) {
    const deadline = Date.now() + ms;
    let s = '';
    while (Date.now() < deadline) {
      s = await this.states();
      if (re.test(s)) return s;
      await sleep(300);
    }
    throw new Error(`the formation did not reach ${re} (states: ${s})`);
  }

  /**
   * libpq's multi-host connection string of the formation: the primary,
   * whichever it is.  user null: none (PL/Proxy then connects as its caller).
   */
  conninfo(user = 'postgres') {
    return `host=127.0.0.1,127.0.0.1 port=${this.ports[1]},${this.ports[2]} dbname=${this.database}${user ? ` user=${user}` : ''} target_session_attrs=read-write`;
  }

  /** initdb of PGDATA dir/name, our settings appended (pg_autoctl then takes the cluster over). */
  async initdb(name, settings) {
    const data = path.join(this.dir, name);
    await must(path.join(this.bindir, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    const plugins = Object.entries(pluginSettings(this.bindir)).map(([k, v]) => `${k} = '${v}'`);
    const lines = [`unix_socket_directories = '${this.dir}'`, "lc_messages = 'C'", "log_line_prefix = '%m [%p] %q%a '",
      ...plugins, ...settings];
    fs.appendFileSync(path.join(data, 'postgresql.conf'), `${lines.join('\n')}\n`);
  }

  async start() {
    makeDir(this.dir);
    for (const d of ['xdg/config', 'xdg/data', 'xdg/run', 'tmp']) makeDir(path.join(this.dir, d));
    const pgctl = path.join(this.bindir, 'pg_ctl');
    await this.initdb('monitor', ["shared_buffers = '32MB'",
      'pgautofailover.health_check_period = 1000', 'pgautofailover.health_check_timeout = 1000',
      'pgautofailover.health_check_max_retries = 1', 'pgautofailover.health_check_retry_delay = 500',
      'pgautofailover.node_considered_unhealthy_timeout = 4000', 'pgautofailover.primary_demote_timeout = 5000',
      'pgautofailover.startup_grace_period = 1000']);
    await this.autoctl(['create', 'monitor', '--pgdata', path.join(this.dir, 'monitor'), '--pgport', String(this.ports[0]),
      '--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', pgctl]);
    await this.autoctl(['config', 'set', '--pgdata', path.join(this.dir, 'monitor'), 'postgresql.listen_addresses', '127.0.0.1']);
    this.service('monitor', ['run', '--pgdata', path.join(this.dir, 'monitor')]);
    for (let i = 0; i < 150; i++) {
      if (await this.states() !== '' || await this.monitorUp()) break;
      await sleep(200);
    }
    const nodeArgs = ['--pghost', this.dir, '--listen', '127.0.0.1', '--hostname', '127.0.0.1', '--dbname', this.database,
      '--auth', 'trust', '--no-ssl', '--monitor', this.monitorUri, '--pgctl', pgctl];
    await this.initdb('node1', ["shared_buffers = '64MB'", 'max_connections = 200', 'max_wal_senders = 20', 'max_replication_slots = 20',
      "wal_level = 'logical'"]);
    await this.autoctl(['create', 'postgres', '--pgdata', path.join(this.dir, 'node1'), '--pgport', String(this.ports[1]),
      '--name', 'node1', ...nodeArgs]);
    this.service('node1', ['run', '--pgdata', path.join(this.dir, 'node1')]);
    await this.waitStates(/node1=single\/single/, 60000);
    this.service('node2', ['create', 'postgres', '--pgdata', path.join(this.dir, 'node2'), '--pgport', String(this.ports[2]),
      '--name', 'node2', ...nodeArgs, '--run']);
    return this.waitStates(/node1=primary\/primary node2=secondary\/secondary/, 120000);
  }

  async monitorUp() {
    const c = new pg.Client({ connectionString: this.monitorUri });
    c.on('error', () => {});
    try {
      await c.connect();
      return true;
    } catch (err) {
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  }

  /** Stop every service (immediate), then kill what is left of their groups. */
  async stop() {
    for (const name of [...this.services.keys()]) {
      await run('pg_autoctl', ['stop', '--pgdata', path.join(this.dir, name), '--immediate'], { env: this.env });
    }
    await sleep(500);
    for (const name of [...this.services.keys()]) this.kill(name);
  }
}

module.exports = { Formation };
