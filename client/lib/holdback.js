'use strict';
// The holdback: a logical slot's walsender sends a commit only once the
// standbys that a failover may promote have flushed it, so a follower
// never shows a commit that a failover then loses.  PostgreSQL 17 and
// later do it for failover slots with synchronized_standby_slots (a list
// of the standbys' physical slots); on older servers pg_failover_slots
// does it for every logical walsender with
// pg_failover_slots.standby_slot_names.
//
// The hub also reads the log (snapshots, catch-ups after a reconnect or a
// poll) through a plain connection, which sees a commit as soon as it is
// visible: before the standbys have it, unless the primary's commits wait
// for them (synchronous replication, which the holdback does not check:
// docs/sharding.md says what each needs).
//
// Misconfigured, it fails quietly: a named slot that does not exist, or
// that no standby streams from, holds every logical slot back for good
// (the walsender waits, the hub hears nothing); a slot that is not a
// failover slot is not held back at all.  The hub reads what the server
// has (sql.holdback()) every few seconds and this says what is wrong, as
// one sentence, or null.  Pure rules over that row.

/** The names of a GUC_LIST_INPUT setting ("a, \"B\"" -> ['a', 'B']). */
function slotNames(text) {
  if (text === null || text === undefined) return [];
  const out = [];
  const re = /\s*(?:"((?:[^"]|"")*)"|([^,\s]+))\s*(?:,|$)/gy;
  let m;
  while (re.lastIndex < text.length && (m = re.exec(text)) !== null) {
    if (m[0] === '') break;
    out.push(m[1] !== undefined ? m[1].replace(/""/g, '"') : m[2].toLowerCase());
  }
  return out;
}

/**
 * What is wrong with the holdback, or null.
 * @param {{version: number, standby: boolean, synchronized: string|null,
 *   failover_slots: string|null, sync_names: string, slots: object[]}} row
 *   sql.holdback()'s
 * @param {string|null} slot the hub's own slot (a failover slot on 17+)
 */
function holdbackProblem(row, slot) {
  if (row.standby) return null; // decoding on a standby: it has only what it replayed
  const version = Number(row.version);
  const core = version >= 170000;
  const setting = core ? 'synchronized_standby_slots' : 'pg_failover_slots.standby_slot_names';
  const text = core ? row.synchronized : row.failover_slots;
  if (!core && (text === null || text === undefined)) {
    return 'no holdback: PostgreSQL before 17 holds logical slots back for standbys only with pg_failover_slots ' +
      '(shared_preload_libraries), which this server has not loaded';
  }
  const names = slotNames(text);
  if (names.length === 0) {
    return `no holdback: ${setting} is empty, so a follower may show a commit that a failover then loses`;
  }
  const slots = new Map((row.slots || []).map((s) => [s.slot_name, s]));
  for (const name of names) {
    const s = slots.get(name);
    if (!s) return `${setting} names slot "${name}", which does not exist: logical decoding waits for it for good`;
    if (s.slot_type !== 'physical') return `${setting} names slot "${name}", which is not a physical slot`;
    if (!s.active) return `${setting} names slot "${name}", which no standby streams from: logical decoding waits for it`;
  }
  if (core && slot !== null) {
    const mine = slots.get(slot);
    if (!mine) return `the hub's slot "${slot}" does not exist`;
    if (mine.failover !== true) return `the hub's slot "${slot}" is not a failover slot: ${setting} does not hold it back`;
  }
  return null;
}

module.exports = { holdbackProblem, slotNames };
