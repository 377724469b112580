'use strict';
// hxstate-client and hxstate-gateway as a user installs them: `npm pack`
// of each (what their package.json's "files" take), the two tarballs
// installed into an empty folder, and every public module required:
// first with no optional peer (the gateway and its command need none),
// then with the peers of `hxstate-gateway/agent` (@ag-ui/client) and
// `hxstate-gateway/copilotkit` (rxjs), at the versions this repository's
// lock file pins.  (npm installs the dependencies from the registry, or
// its cache.)  A dependency a package uses and does not declare fails
// here, where the repository's own node_modules would hide it.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');

const TOP = path.join(__dirname, '..', '..');

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 64 * 1024 * 1024, timeout: 240000 }, (err, stdout, stderr) =>
      (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || stdout || err.message}`)) : resolve(stdout)));
  });
}

const pin = (name) => `${name}@${JSON.parse(fs.readFileSync(path.join(TOP, 'node_modules', name, 'package.json'), 'utf8')).version}`;

test('npm pack of the client and the gateway, installed into an empty folder: every public module, the command', { timeout: 600000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-gateway-install-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', dir, '-w', 'client', '-w', 'gateway'], TOP));
  const byName = new Map(packed.map((p) => [p.name, p]));
  const gwFiles = byName.get('hxstate-gateway').files.map((f) => f.path);
  for (const f of ['index.js', 'agent.js', 'copilotkit.js', 'bin/hxstate-gateway.js', 'README.md', 'sql/durable.sql', 'examples/chat.html', 'examples/chat.js']) {
    assert.ok(gwFiles.includes(f), `the gateway's tarball has ${f}`);
  }
  assert.deepEqual(gwFiles.filter((f) => f.startsWith('test/')), [], 'no tests in the gateway\'s tarball');
  assert.deepEqual(byName.get('hxstate-client').files.map((f) => f.path).filter((f) => f.startsWith('test/')), [], 'none in the client\'s');

  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
  const tarballs = packed.map((p) => path.join(dir, p.filename));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...tarballs], app);
  const node = (code) => run(process.execPath, ['-e', code], app);

  // no optional peer: the client, the gateway and its command
  assert.equal(await node("const c = require('hxstate-client'); console.log(typeof c.HxHub, typeof c.RunWriter, typeof c.RunFollower)"), 'function function function\n');
  assert.equal(await node("const g = require('hxstate-gateway'); console.log(typeof g.createGateway, typeof g.mintToken, typeof g.setupDurable)"), 'function function function\n');
  const help = await run(process.execPath, [path.join(app, 'node_modules', '.bin', 'hxstate-gateway'), '--help'], app);
  assert.match(help, /--durable/);
  await assert.rejects(node("require('hxstate-gateway/agent')"), /@ag-ui\/client/, 'without its peer, the agent says which one is missing');

  // the optional peers, as an application that uses them has them
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', pin('@ag-ui/client'), pin('rxjs')], app);
  assert.equal(await node("const { HxAgent } = require('hxstate-gateway/agent'); const a = new HxAgent({ url: 'http://h/agents/sessions/s-1' }); console.log(a.connectUrl)"), 'http://h/agents/sessions/s-1/connect\n');
  assert.equal(await node("const { HxAgentRunner } = require('hxstate-gateway/copilotkit'); console.log(typeof HxAgentRunner)"), 'function\n');
});
