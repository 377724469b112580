'use strict';
// Idempotent producers (Producer-Id, Producer-Epoch, Producer-Seq): what
// an append with them means, given the producer's last accepted (epoch,
// seq) on the stream, or null for a producer the stream has not seen.
//
//   accept        append, and keep (epoch, seq)
//   duplicate     already appended: 204, nothing appended (lastSeq: the highest accepted)
//   stale         an epoch below the producer's: 403 with the current epoch (a zombie)
//   badEpochSeq   a new epoch whose first seq is not 0: 400
//   gap           a seq past the next one: 409 with the expected and received seqs
//
// The caller holds the stream's row lock from the decision to the commit
// that stores the append and the new (epoch, seq) together, so two
// requests of one producer are decided one after the other, and a retry
// after a crash or a restart finds what the first one committed.
function decide(state, epoch, seq) {
  if (state === null) {
    if (seq !== 0) return { status: 'gap', expectedSeq: 0, receivedSeq: seq };
    return { status: 'accept' };
  }
  if (epoch < state.epoch) return { status: 'stale', currentEpoch: state.epoch };
  if (epoch > state.epoch) {
    if (seq !== 0) return { status: 'badEpochSeq' };
    return { status: 'accept' };
  }
  if (seq <= state.seq) return { status: 'duplicate', lastSeq: state.seq };
  if (seq === state.seq + 1) return { status: 'accept' };
  return { status: 'gap', expectedSeq: state.seq + 1, receivedSeq: seq };
}

/** The closing request's tuple, as the stream's closed_by keeps it. */
function tupleOf(p) {
  return p ? `${p.epoch}\n${p.seq}\n${p.id}` : null;
}

module.exports = { decide, tupleOf };
