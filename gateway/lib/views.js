'use strict';
// The live view: its page (GET /view/<table>/<key>), its assets (GET
// /assets/view.js, view.css: no authorisation, they hold no state) and
// what it draws (GET /phases/<table>/<key>: the table's phase machine,
// then the row's phase at each change, as SSE).
//
// The page and the assets are served with a Content-Security-Policy that
// lets the page load nothing but the gateway's own script and style and
// connect nowhere but to the gateway (default-src 'none'; no inline script
// or style, no frames, no forms), and with X-Content-Type-Options: nosniff,
// so that neither a key in the page's title nor any asset is ever read as
// something else.
const fs = require('node:fs');
const path = require('node:path');
const { SseResponse } = require('./sse');

const VIEW_DIR = path.join(__dirname, '..', 'view');

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

function loadAssets() {
  const assets = new Map();
  for (const [file, type] of [['view.js', 'text/javascript'], ['view.css', 'text/css'], ['view.html', 'text/html']]) {
    assets.set(file, { type: `${type}; charset=utf-8`, body: fs.readFileSync(path.join(VIEW_DIR, file)) });
  }
  return assets;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** GET /assets/<file>; false if it is not one. */
function serveAsset(assets, req, res, file) {
  const a = assets.get(file);
  if (!a || file === 'view.html') return false;
  res.writeHead(200, { 'content-type': a.type, 'cache-control': 'no-cache', 'content-length': a.body.length, ...SECURITY_HEADERS });
  res.end(req.method === 'HEAD' ? undefined : a.body);
  return true;
}

/** GET /view/<table>/<key>: the live view's page. */
function serveView(assets, req, res, target) {
  const page = assets.get('view.html').body.toString('utf8').replace(/\{\{title\}\}/g, escapeHtml(target.stream));
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS });
  res.end(page);
}

/**
 * GET /phases/<table>/<key>: the table's machine (event "machine"), then
 * the row's phase now and at each change (event "phase"), polled.
 */
function servePhases(ctx, req, res, { target, clientId, release }) {
  const conn = new SseResponse(ctx, req, res, { kind: 'view', clientId, release });
  let unwatch = null;
  const send = (name, value) => conn.push({ frame: Buffer.from(`event: ${name}\ndata: ${JSON.stringify(value)}\n\n`) });
  conn.onClosed(() => { if (unwatch) unwatch(); });
  ctx.machines.machine(target.table).then((m) => {
    if (conn.closed) return;
    send('machine', m);
    if (!m.machine) return;
    unwatch = ctx.machines.watch(target.table, target.key, (p) => send('phase', p));
    if (conn.closed) unwatch();
  }, (err) => {
    ctx.log('warn', `phases of ${target.table}: ${err.message}`);
    conn.end(503, 'the machine could not be read');
  });
}

module.exports = { loadAssets, serveAsset, serveView, servePhases, SECURITY_HEADERS, CSP };
