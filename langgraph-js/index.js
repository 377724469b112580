'use strict';
// @hxstate/langgraph: a LangGraph.js checkpointer on hxstate, over the
// tables, functions and log streams of the Python package's HxSaver.
//
//   const { HxSaver } = require('@hxstate/langgraph');
//   const saver = HxSaver.fromConnString(process.env.DATABASE_URL);
//   await saver.setup();          // checks the schema the Python setup() made
//   const graph = builder.compile({ checkpointer: saver });
//
// See README.md.
const { HxSaver } = require('./lib/saver');
const { EncryptedSerializer } = require('./lib/crypto');
const {
  HxSaverError,
  NotSetUp,
  ThreadConflict,
  OwnerSuperseded,
  TypeNotAllowed,
  InvalidParameterValue,
  ProgramLimitExceeded,
  DataCorrupted,
  Tampered,
  NonDeterministicRetry,
} = require('./lib/errors');
const { MAX_KEY_BYTES, MAX_ID_BYTES } = require('./lib/limits');

// (each name written out: an ES module's import finds them so)
module.exports = {
  HxSaver,
  EncryptedSerializer,
  MAX_KEY_BYTES,
  MAX_ID_BYTES,
  HxSaverError,
  NotSetUp,
  ThreadConflict,
  OwnerSuperseded,
  TypeNotAllowed,
  InvalidParameterValue,
  ProgramLimitExceeded,
  DataCorrupted,
  Tampered,
  NonDeterministicRetry,
};
