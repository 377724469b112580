'use strict';
// The JavaScript packages are versioned with the extension: the root
// package.json, hxstate-client and hxstate-gateway carry the extension's
// default_version (hxstate.control), and so does @hxstate/langgraph
// (langgraph-js), the gateway depends on the client of that version, and
// package-lock.json says the same (npm install
// --package-lock-only keeps it so).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const TOP = path.join(__dirname, '..', '..');
const read = (p) => JSON.parse(fs.readFileSync(path.join(TOP, p), 'utf8'));

test('client, gateway, langgraph-js and the root package are versioned with the extension, and the lock file agrees', () => {
  const control = fs.readFileSync(path.join(TOP, 'hxstate.control'), 'utf8');
  const version = /default_version\s*=\s*'([^']+)'/.exec(control)[1];
  const root = read('package.json');
  const client = read('client/package.json');
  const gateway = read('gateway/package.json');
  assert.equal(root.version, version, 'package.json');
  assert.equal(client.version, version, 'client/package.json');
  assert.equal(gateway.version, version, 'gateway/package.json');
  assert.equal(read('langgraph-js/package.json').version, version, 'langgraph-js/package.json');
  assert.equal(gateway.dependencies['hxstate-client'], version, 'the gateway depends on the client of its version');
  assert.equal(read('META.json').version, version, 'META.json');
  const lock = read('package-lock.json');
  assert.equal(lock.version, version);
  assert.equal(lock.packages[''].version, version);
  assert.equal(lock.packages.client.version, version);
  assert.equal(lock.packages.gateway.version, version);
  assert.equal(lock.packages['langgraph-js'].version, version);
  assert.equal(lock.packages.gateway.dependencies['hxstate-client'], version);
});
