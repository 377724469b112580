'use strict';
// The repository's Markdown holds together, and the project stands on its
// own (no server needed):
//   - every relative link of every Markdown file (README.md, CHANGELOG.md,
//     bench/, test/, client/, gateway/, python/ and docs/) names a file or
//     directory of the repository, and every #anchor, in the same file or
//     another, names a heading of that file as GitHub spells its anchor
//     (lower case; punctuation and symbols dropped, letters, digits, marks,
//     "_" and "-" kept; each space a "-"; a repeated heading gets -1, -2...)
//     or an explicit <a id>/<a name>;
//   - no file of the repository cites the team's shared folder, its design
//     notes or the seed material the project was started from: code, tests
//     and READMEs state the rules they rely on themselves.
// Links inside code (fenced blocks and `code spans`) are not links.
// Headings are ATX ("## ..."), as every Markdown file here writes them.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const top = path.resolve(__dirname, '../..');

// Directories that are not the repository's own text: dependencies, build
// and test output, virtual environments.
const SKIP_DIRS = new Set(['.git', 'node_modules', '__pycache__', '.venv', 'venv', '.pytest_cache',
  '.mypy_cache', 'results', 'output_iso', 'tmp_check', 'log', 'dist', 'artifacts']);

/** The repository's files, relative to root: git's list when root is a work tree, else a walk. */
function repositoryFiles(root) {
  try {
    const out = execFileSync('git', ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.split('\0').filter((f) => f && fs.existsSync(path.join(root, f)));
  } catch {
    const files = [];
    const walk = (dir) => {
      for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
        const rel = path.join(dir, e.name);
        if (e.isDirectory()) {
          if (!SKIP_DIRS.has(e.name)) walk(rel);
        } else if (e.isFile()) files.push(rel);
      }
    };
    walk('');
    return files;
  }
}

/** Markdown text with fenced code blocks blanked out (line numbers kept). */
function withoutFences(text) {
  const lines = text.split('\n');
  let fence = null;
  return lines.map((line) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && /^ {0,3}[`~]+\s*$/.test(line)) fence = null;
      return '';
    }
    if (m) {
      fence = m[1];
      return '';
    }
    return line;
  }).join('\n');
}

/** GitHub's anchor for a heading's text (github-slugger's rules). */
function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')    // links and images: their text
    .replace(/<[^>]+>/g, (tag) => (/^<[a-z/!]/i.test(tag) && !/^<[a-z]+>$/i.test(tag) ? '' : tag))
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
}

/** The anchors of a Markdown text: its headings' slugs and explicit ids. */
function anchors(text) {
  const found = new Set();
  const seen = new Map();
  const body = withoutFences(text);
  for (const line of body.split('\n')) {
    const m = /^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$/.exec(line);
    if (!m) continue;
    // code spans in a heading keep their text, without the backticks
    const base = slug(m[1].replace(/`+/g, ''));
    const n = seen.get(base) || 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of body.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(m[1]);
  return found;
}

/** The links of a Markdown text, outside code: [{target, line}]. */
function links(text) {
  const body = withoutFences(text);
  const out = [];
  // paragraphs (a code span or a link never crosses a blank line)
  let offset = 0;
  for (const para of body.split(/\n[ \t]*\n/)) {
    const lineOf = (i) => body.slice(0, offset + i).split('\n').length;
    // code spans blanked out, keeping positions
    const plain = para.replace(/(`+)[\s\S]*?\1/g, (s) => s.replace(/[^\n]/g, ' '));
    for (const m of plain.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ target: m[1], line: lineOf(m.index) });
    }
    for (const m of plain.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) {
      out.push({ target: m[1], line: lineOf(m.index) });
    }
    offset += para.length + (body.slice(offset + para.length).match(/^\n[ \t]*\n/) || [''])[0].length;
  }
  return out;
}

/**
 * What is wrong with the links of the Markdown files of root: a list of
 * "file:line: target: why", empty when every link resolves.
 */
function brokenLinks(root, files) {
  const problems = [];
  const anchorCache = new Map();
  const anchorsOf = (abs) => {
    if (!anchorCache.has(abs)) anchorCache.set(abs, anchors(fs.readFileSync(abs, 'utf8')));
    return anchorCache.get(abs);
  };
  for (const file of files.filter((f) => f.endsWith('.md'))) {
    const abs = path.join(root, file);
    for (const { target, line } of links(fs.readFileSync(abs, 'utf8'))) {
      const where = `${file}:${line}: ${target}`;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;        // https:, mailto:: not ours to check
      const hash = target.indexOf('#');
      const rel = hash < 0 ? target : target.slice(0, hash);
      const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
      const dest = rel === '' ? abs : path.resolve(path.dirname(abs), decodeURIComponent(rel));
      if (dest !== root && !dest.startsWith(root + path.sep)) {
        problems.push(`${where}: outside the repository`);
        continue;
      }
      if (!fs.existsSync(dest)) {
        problems.push(`${where}: no such file`);
        continue;
      }
      if (anchor === null) continue;
      if (!dest.endsWith('.md') || !fs.statSync(dest).isFile()) {
        problems.push(`${where}: an anchor into a file that is not Markdown`);
        continue;
      }
      if (!anchorsOf(dest).has(anchor)) problems.push(`${where}: no heading with anchor #${anchor}`);
    }
  }
  return problems;
}

// What a file of the project must not cite, spelled so that this file does
// not cite it either.  One thing beside the repository may be read, not
// cited: the upstream JSON Patch test suite, which the conformance test
// runs when a checkout of it is there (test/js/conformance.test.js).
const DATA = '(?!/json-patch-tests\\b)';
const FORBIDDEN = [
  [new RegExp(['\\.\\.', 'shared'].join('/') + DATA), 'the shared folder'],
  [new RegExp(['', 'work', 'shared'].join('/') + DATA), 'the shared folder'],
  [new RegExp(`\\b${'DESIGN'}\\.md\\b`), 'the design notes'],
  [new RegExp(`\\bthe ${'seeds'}\\b`, 'i'), 'the seed material'],
];

/** Files of root (text ones) that cite what FORBIDDEN names: "file:line: what". */
function citations(root, files) {
  const found = [];
  for (const file of files) {
    const abs = path.join(root, file);
    if (!fs.statSync(abs).isFile()) continue;
    const buf = fs.readFileSync(abs);
    if (buf.includes(0)) continue;                                 // binary
    const lines = buf.toString('utf8').split('\n');
    lines.forEach((text, i) => {
      for (const [re, what] of FORBIDDEN) if (re.test(text)) found.push(`${file}:${i + 1}: cites ${what}`);
    });
  }
  return found;
}

test('GitHub anchors: the headings of this repository as GitHub spells them', () => {
  const cases = [
    ['Trimming 10^7 events under writers', 'trimming-107-events-under-writers'],
    ['Composing merges: `hx_merge`', 'composing-merges-hx_merge'],
    ['`GET /streams/<table>/<key>`', 'get-streamstablekey'],
    ['Browsers and @ag-ui/client: hxstate-gateway', 'browsers-and-ag-uiclient-hxstate-gateway'],
    ["The walsender's share, whatever the client", 'the-walsenders-share-whatever-the-client'],
    ['`new HxHub(options)`', 'new-hxhuboptions'],
    ['AG-UI 1.0', 'ag-ui-10'],
    ["LangGraph's issues, reproduced", 'langgraphs-issues-reproduced'],
  ];
  for (const [heading, expected] of cases) assert.equal(slug(heading.replace(/`+/g, '')), expected, heading);
  const a = anchors('# A\n\n## Notes\n\n```\n## not a heading\n```\n\n### Notes\n\n<a id="here"></a>\n');
  assert.deepEqual([...a].sort(), ['a', 'here', 'notes', 'notes-1']);
});

test('the checker finds a missing file, a missing anchor, and links only outside code', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-links-'));
  try {
    fs.mkdirSync(path.join(root, 'sub'));
    fs.writeFileSync(path.join(root, 'sub', 'B.md'), '# B\n\n## A section\n');
    fs.writeFileSync(path.join(root, 'A.md'), [
      '# A', '',
      'Good: [b](sub/B.md), [section](sub/B.md#a-section), [top](#a), [web](https://example.com/x#y),',
      'a link that spans [two', 'lines](#a).', '',
      'Bad: [gone](sub/C.md) and [nowhere](sub/B.md#no-such-section) and [here](#missing) and [up](../x.md).', '',
      '`[code](nothing.md)` is code, and so is', '', '```md', '[fenced](nothing.md)', '```', '',
    ].join('\n'));
    const problems = brokenLinks(root, ['A.md', 'sub/B.md']);
    assert.equal(problems.length, 4, problems.join('\n'));
    assert.match(problems[0], /^A\.md:7: sub\/C\.md: no such file$/);
    assert.match(problems[1], /sub\/B\.md#no-such-section: no heading with anchor #no-such-section$/);
    assert.match(problems[2], /#missing: no heading with anchor #missing$/);
    assert.match(problems[3], /\.\.\/x\.md: outside the repository$/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('every relative link and anchor of the Markdown files resolves', () => {
  const files = repositoryFiles(top);
  const markdown = files.filter((f) => f.endsWith('.md'));
  for (const f of ['README.md', 'CHANGELOG.md', 'bench/README.md', 'test/README.md', 'client/README.md',
    'gateway/README.md', 'python/README.md', 'langgraph-js/README.md']) {
    assert.ok(markdown.includes(f), `${f} is checked`);
  }
  const problems = brokenLinks(top, markdown);
  assert.deepEqual(problems, [], `broken links:\n${problems.join('\n')}`);
});

test('no file of the repository cites the shared folder, the design notes or the seed material', () => {
  const found = citations(top, repositoryFiles(top));
  assert.deepEqual(found, [], found.join('\n'));
});

test('the citation check finds a citation', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hx-cite-'));
  try {
    fs.writeFileSync(path.join(root, 'a.js'), `// see ${['..', 'shared'].join('/')}/x\nok\n`);
    fs.writeFileSync(path.join(root, 'b.md'), `As ${'DESIGN'}.md says.\n`);
    fs.writeFileSync(path.join(root, 'c.js'), `const t = '${['..', 'shared'].join('/')}/json-patch-tests';\n`);
    assert.deepEqual(citations(root, ['a.js', 'b.md', 'c.js']),
      ['a.js:1: cites the shared folder', 'b.md:1: cites the design notes']);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
