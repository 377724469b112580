'use strict';
// The JavaScript packages' seams are named interfaces: a module never
// reaches into another object's underscored members (obj._x), it calls
// what that object offers, or the callbacks it was given.  An underscored
// member is its own class's business: `this._x`, or a static member of a
// class written in the same file (`Reader._take` inside reader.js).
//
// This reads the packages' source (comments and strings left out) and
// lists every `<expression>._<name>` that is neither.  The one name let
// through is not ours: LangChain's messages' `_getType()`, which
// @langchain/core's own serializers call.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const top = path.join(__dirname, '..', '..');
const ROOTS = ['client/index.js', 'client/lib', 'gateway/index.js', 'gateway/agent.js', 'gateway/copilotkit.js',
  'gateway/lib', 'gateway/bin', 'gateway/examples', 'langgraph-js/index.js', 'langgraph-js/lib'];
const FOREIGN = new Set(['_getType']);

function sources(rel) {
  const at = path.join(top, rel);
  if (!fs.existsSync(at)) return [];
  if (!fs.statSync(at).isDirectory()) return /\.(c|m)?js$/.test(at) ? [at] : [];
  return fs.readdirSync(at).flatMap((name) => (name === 'node_modules' ? [] : sources(path.join(rel, name))));
}

/** The code of a file without its comments and the contents of its strings. */
function code(text) {
  let out = '';
  for (let i = 0; i < text.length;) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 2;
    } else if (c === '\'' || c === '"' || c === '`') {
      out += c;
      for (i++; i < text.length && text[i] !== c; i++) if (text[i] === '\\') i++;
      out += c;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** `<expression>._<name>` of src that reach into another object: [[expression, name], ...] */
function reaches(src) {
  const own = new Set([...src.matchAll(/\bclass\s+([A-Za-z_$][\w$]*)/g)].map((m) => m[1]));
  return [...src.matchAll(/([\w$]+|[)\]])\s*\??\.\s*(_[A-Za-z][\w$]*)/g)]
    .map((m) => [m[1], m[2]])
    .filter(([expr, name]) => expr !== 'this' && !own.has(expr) && !FOREIGN.has(name));
}

test('the scan finds a reach into another object, and lets a class\'s own members be', () => {
  assert.deepEqual(reaches(code('hub._flush(); sub._state.x = 1; this._a = 1; f()._b;')),
    [['hub', '_flush'], ['sub', '_state'], [')', '_b']]);
  assert.deepEqual(reaches(code('class Reader { static _take() {} } Reader._take(); // hub._x\n s = "a._b";')), []);
});

test('no module of the JavaScript packages reaches into another object\'s underscored members', () => {
  const files = ROOTS.flatMap(sources);
  assert.ok(files.length > 30, `the packages' sources were found (${files.length})`);
  const found = [];
  for (const file of files) {
    for (const [expr, name] of reaches(code(fs.readFileSync(file, 'utf8')))) {
      found.push(`${path.relative(top, file)}: ${expr}.${name}`);
    }
  }
  assert.deepEqual(found, [], 'a seam is a named interface: callbacks passed in, or events');
});
