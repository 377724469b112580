'use strict';
// The package as a user installs it: `npm pack` (which builds its type
// declarations), the tarball installed into an empty folder with its
// peer dependencies, then required from CommonJS, imported from an ES
// module, and its declarations used by a TypeScript program under
// `tsc --strict`; and `tsc` finds nothing in the package's own JSDoc.
// (npm installs pg and the peers from the registry, or its cache.)

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { TOP } = require('./helpers');

const PKG = path.join(TOP, 'langgraph-js');
const TSC = path.join(TOP, 'node_modules', 'typescript', 'bin', 'tsc');

/**
 * @param {string} cmd
 * @param {string[]} args
 * @param {string} cwd
 * @returns {Promise<string>}
 */
function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 64 * 1024 * 1024, timeout: 240000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || stdout || err.message}`)) : resolve(stdout),
    );
  });
}

test('npm pack, installed into an empty folder, required, imported and type-checked', { timeout: 300000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-lgjs-install-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', dir, '-w', 'langgraph-js'], TOP));
  const files = packed[0].files.map((/** @type {{ path: string }} */ f) => f.path).sort();
  assert.ok(files.includes('types/index.d.ts'), 'the declarations are built and packed');
  assert.ok(files.includes('README.md') && files.includes('index.js') && files.includes('lib/saver.js'));
  assert.deepEqual(files.filter((/** @type {string} */ f) => f.startsWith('test/') || f === 'tsconfig.json'), [], 'no tests');
  const tarball = path.join(dir, packed[0].filename);
  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
  const pin = (/** @type {string} */ name) => `${name}@${JSON.parse(fs.readFileSync(path.join(TOP, 'node_modules', name, 'package.json'), 'utf8')).version}`;
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, pin('@langchain/core'), pin('@langchain/langgraph-checkpoint')], app);
  const cjs = await run(process.execPath, ['-e', "const m = require('@hxstate/langgraph'); console.log(typeof m.HxSaver, typeof m.EncryptedSerializer, m.ThreadConflict.code)"], app);
  assert.equal(cjs, 'function function 40001\n');
  fs.writeFileSync(path.join(app, 'esm.mjs'), "import { HxSaver, NotSetUp } from '@hxstate/langgraph';\nconsole.log(typeof HxSaver, NotSetUp.code);\n");
  assert.equal(await run(process.execPath, ['esm.mjs'], app), 'function 42P01\n');
  fs.writeFileSync(
    path.join(app, 'main.ts'),
    [
      "import pg from 'pg';",
      "import { HxSaver, EncryptedSerializer, OwnerSuperseded } from '@hxstate/langgraph';",
      "import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';",
      'const saver: BaseCheckpointSaver = new HxSaver(new pg.Pool(), { schema: "langgraph", rebuildFactor: 2,',
      '  serde: new EncryptedSerializer({ k1: new Uint8Array(32) }) });',
      'async function use(s: HxSaver): Promise<string> {',
      '  const token: string = await s.acquire("t");',
      '  const epoch: number | null = await s.ownerEpoch("t");',
      '  const err = new OwnerSuperseded("x");',
      '  return token + String(epoch) + err.code;',
      '}',
      'void saver; void use;',
      '// @ts-expect-error: no such option',
      'new HxSaver(new pg.Pool(), { schemaName: "x" });',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, noEmit: true, module: 'node16', moduleResolution: 'node16', target: 'es2022', esModuleInterop: true, skipLibCheck: true, types: [] }, files: ['main.ts'] }),
  );
  // pg's declarations, for the program (the package's own come with it)
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', pin('@types/pg')], app);
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], app);
});

test("tsc --strict finds nothing in the package's JSDoc", { timeout: 120000 }, async () => {
  await run(process.execPath, [TSC, '-p', 'tsconfig.json', '--noEmit'], PKG);
});
