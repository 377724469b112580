// hxstate live view: one session as it changes.  Plain browser JavaScript,
// served by the gateway; no build step and nothing fetched from elsewhere.
//
//   - the state, from the gateway's SSE stream (EventSource: it reconnects
//     by itself and sends Last-Event-ID, so the gateway resumes after the
//     last seq shown, or sends a fresh snapshot when the log was trimmed);
//   - the events as they arrive, with their seq and type;
//   - the row's phase on a drawing of the table's phase machine (the
//     gateway's /phases stream: the machine, then each phase change).
(function () {
  'use strict';

  var parts = location.pathname.split('/');
  var key = parts.pop();       // still percent-encoded: reused as is in the URLs below
  var table = parts.pop();
  var token = new URLSearchParams(location.search).get('token');
  var suffix = token ? '?token=' + encodeURIComponent(token) : '';
  // relative to .../view/<table>/<key>, so the page works wherever the gateway is mounted
  var streamUrl = '../../streams/' + table + '/' + key + suffix;
  var phasesUrl = '../../phases/' + table + '/' + key + suffix;

  var MAX_EVENTS = 200;
  var OPEN_DEPTH = 3;

  // what a test (or a curious person in the console) can read
  var view = window.hxView = {
    state: null, seq: null, events: 0, snapshots: 0, messages: null, messageSnapshots: 0, opens: 0, errors: 0, status: 'connecting', ended: false,
    machine: null, phase: null,
  };

  var $ = function (id) { return document.getElementById(id); };

  // ---------------------------------------------------------------------
  // JSON Patch (RFC 6902) on a copy; JSON Pointer (RFC 6901)
  // ---------------------------------------------------------------------

  function clone(v) { return v === undefined ? undefined : JSON.parse(JSON.stringify(v)); }

  function tokens(pointer) {
    if (pointer === '') return [];
    return pointer.split('/').slice(1).map(function (t) { return t.replace(/~1/g, '/').replace(/~0/g, '~'); });
  }

  function equal(a, b) {
    if (a === b) return true;
    if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    var ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (var i = 0; i < ka.length; i++) {
      if (!Object.prototype.hasOwnProperty.call(b, ka[i]) || !equal(a[ka[i]], b[ka[i]])) return false;
    }
    return true;
  }

  // own-property writes, so that a member named "__proto__" stays a member
  function setMember(obj, k, v) {
    Object.defineProperty(obj, k, { value: v, writable: true, enumerable: true, configurable: true });
  }

  function parentOf(doc, toks) {
    var node = doc;
    for (var i = 0; i < toks.length - 1; i++) {
      if (node === null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, toks[i])) {
        throw new Error('path not found: /' + toks.slice(0, i + 1).join('/'));
      }
      node = node[toks[i]];
    }
    return node;
  }

  function get(doc, pointer) {
    var toks = tokens(pointer);
    if (toks.length === 0) return doc;
    var p = parentOf(doc, toks);
    var k = toks[toks.length - 1];
    if (p === null || typeof p !== 'object' || !Object.prototype.hasOwnProperty.call(p, k)) throw new Error('path not found: ' + pointer);
    return p[k];
  }

  function index(arr, k, forAdd) {
    if (forAdd && k === '-') return arr.length;
    if (!/^(0|[1-9][0-9]*)$/.test(k)) throw new Error('bad array index ' + k);
    var i = Number(k);
    if (i > arr.length || (!forAdd && i === arr.length)) throw new Error('array index out of range ' + k);
    return i;
  }

  function add(doc, pointer, value) {
    var toks = tokens(pointer);
    if (toks.length === 0) return value;
    var p = parentOf(doc, toks);
    var k = toks[toks.length - 1];
    if (Array.isArray(p)) p.splice(index(p, k, true), 0, value);
    else if (p !== null && typeof p === 'object') setMember(p, k, value);
    else throw new Error('cannot add to a scalar at ' + pointer);
    return doc;
  }

  function remove(doc, pointer) {
    var toks = tokens(pointer);
    var p = parentOf(doc, toks);
    var k = toks[toks.length - 1];
    if (Array.isArray(p)) p.splice(index(p, k, false), 1);
    else if (p !== null && typeof p === 'object' && Object.prototype.hasOwnProperty.call(p, k)) delete p[k];
    else throw new Error('path not found: ' + pointer);
    return doc;
  }

  function applyPatch(state, ops) {
    var doc = clone(state);
    ops.forEach(function (op) {
      switch (op.op) {
        case 'add': doc = add(doc, op.path, clone(op.value)); break;
        case 'remove': doc = remove(doc, op.path); break;
        case 'replace':
          if (op.path === '') { doc = clone(op.value); break; }
          get(doc, op.path);
          doc = add(remove(doc, op.path), op.path, clone(op.value));
          break;
        case 'move': { var v = get(doc, op.from); doc = add(remove(doc, op.from), op.path, v); break; }
        case 'copy': doc = add(doc, op.path, clone(get(doc, op.from))); break;
        case 'test': if (!equal(get(doc, op.path), op.value)) throw new Error('test failed at ' + op.path); break;
        default: throw new Error('unknown op ' + op.op);
      }
    });
    return doc;
  }

  function escapeToken(k) { return String(k).replace(/~/g, '~0').replace(/\//g, '~1'); }

  // the pointers where a and b differ, stopping at the first difference on each path
  function changes(a, b, at, out) {
    if (equal(a, b)) return out;
    var bothObjects = a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b);
    if (!bothObjects) { out.push(at); return out; }
    var keys = {};
    Object.keys(a).forEach(function (k) { keys[k] = true; });
    Object.keys(b).forEach(function (k) { keys[k] = true; });
    Object.keys(keys).forEach(function (k) {
      var p = at + '/' + escapeToken(k);
      if (!Object.prototype.hasOwnProperty.call(b, k)) out.push(at || '');
      else if (!Object.prototype.hasOwnProperty.call(a, k)) out.push(p);
      else changes(a[k], b[k], p, out);
    });
    return out;
  }

  // ---------------------------------------------------------------------
  // The state as a tree
  // ---------------------------------------------------------------------

  var collapsed = {};   // pointer -> true (closed by the person) or false (opened)

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function scalar(v) {
    if (v === null) return el('span', 'z', 'null');
    if (typeof v === 'string') return el('span', 's', JSON.stringify(v));
    if (typeof v === 'number') return el('span', 'n', String(v));
    return el('span', 'b', String(v));
  }

  function node(label, value, pointer, depth, marks) {
    var li = el('li');
    li.setAttribute('data-path', pointer);
    if (marks.changed[pointer]) li.className = 'changed';
    else if (marks.within[pointer]) li.className = 'within';
    var isObj = value !== null && typeof value === 'object';
    if (!isObj) {
      var row = el('span', 'row');
      if (label !== null) { row.appendChild(el('span', 'k', label)); row.appendChild(document.createTextNode(': ')); }
      row.appendChild(scalar(value));
      li.appendChild(row);
      return li;
    }
    var keys = Object.keys(value);
    var det = el('details');
    var open = collapsed[pointer] === undefined ? (depth < OPEN_DEPTH || !!marks.within[pointer]) : !collapsed[pointer];
    det.open = open;
    var sum = el('summary');
    if (label !== null) { sum.appendChild(el('span', 'k', label)); sum.appendChild(document.createTextNode(': ')); }
    sum.appendChild(el('span', 'c', Array.isArray(value) ? '[' + keys.length + ']' : '{' + keys.length + '}'));
    det.appendChild(sum);
    var filled = false;
    var fill = function () {
      if (filled) return;
      filled = true;
      var ul = el('ul');
      keys.forEach(function (k) { ul.appendChild(node(Array.isArray(value) ? k : k, value[k], pointer + '/' + escapeToken(k), depth + 1, marks)); });
      det.appendChild(ul);
    };
    if (open) fill();
    det.addEventListener('toggle', function () {
      collapsed[pointer] = !det.open;
      if (det.open) fill();
    });
    li.appendChild(det);
    return li;
  }

  function render(changed) {
    var marks = { changed: {}, within: {} };
    changed.forEach(function (p) {
      marks.changed[p] = true;
      var t = tokens(p);
      for (var i = 0; i < t.length; i++) marks.within['' + (i === 0 ? '' : '/' + t.slice(0, i).map(escapeToken).join('/'))] = true;
    });
    var tree = $('tree');
    tree.textContent = '';
    if (view.state === null || view.state === undefined) {
      tree.appendChild(el('p', 'none', view.ended ? 'the row is gone (hx.stream_end)' : 'no state (no row)'));
      return;
    }
    var ul = el('ul');
    ul.appendChild(node(null, view.state, '', 0, marks));
    tree.appendChild(ul);
  }

  // ---------------------------------------------------------------------
  // Events
  // ---------------------------------------------------------------------

  function brief(v, max) {
    var s = JSON.stringify(v);
    if (s === undefined) s = String(v);
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }

  function describe(e) {
    if (e.type === 'STATE_DELTA') {
      return e.delta.map(function (op) { return op.op + ' ' + (op.path || '""') + ('value' in op ? ' ' + brief(op.value, 40) : ''); }).join('; ');
    }
    if (e.type === 'STATE_SNAPSHOT') return (e.metadata && e.metadata.synthetic ? 'current state ' : 'snapshot ') + brief(e.snapshot, 80);
    if (e.type === 'CUSTOM') return e.name + ' ' + brief(e.value, 80);
    return brief(e, 80);
  }

  function listEvent(e) {
    var li = el('li', 'new');
    var seq = e.metadata && e.metadata.seq;
    li.setAttribute('data-seq', seq);
    li.appendChild(el('span', 'seq', String(seq)));
    li.appendChild(el('span', 'type', e.type === 'CUSTOM' ? 'CUSTOM' : e.type));
    li.appendChild(el('span', 'what', describe(e)));
    var list = $('events');
    list.insertBefore(li, list.firstChild);
    while (list.childNodes.length > MAX_EVENTS) list.removeChild(list.lastChild);
  }

  function setStatus(s) {
    view.status = s;
    var e = $('status');
    e.textContent = s;
    e.setAttribute('data-status', s);
  }

  // where an op changed the state: its path (an append: the new element; a removal: the parent)
  function changedPath(state, op) {
    var path = op.path;
    if (op.op === 'remove') return path.slice(0, path.lastIndexOf('/'));
    if (/\/-$/.test(path)) {
      var parent = path.slice(0, -2);
      try {
        var arr = get(state, parent);
        if (Array.isArray(arr)) return parent + '/' + (arr.length - 1);
      } catch (err) { /* the parent is gone: mark it */ }
      return parent;
    }
    return path;
  }

  function onEvent(e) {
    // the run around the stream, and the conversation: not changes of the state
    if (e.type === 'RUN_STARTED' || e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR') return;
    if (e.type === 'MESSAGES_SNAPSHOT') {
      view.messages = e.messages;
      view.messageSnapshots++;
      return;
    }
    var before = view.state;
    var changed = [];
    if (e.type === 'STATE_SNAPSHOT') {
      view.snapshots++;
      view.state = e.snapshot === undefined ? null : e.snapshot;
      changed = changes(before, view.state, '', []);
      view.ended = false;
    } else if (e.type === 'STATE_DELTA') {
      try {
        view.state = applyPatch(before, e.delta);
      } catch (err) {
        // cannot happen with hxstate's deltas; the next reconnect brings a snapshot
        view.errors++;
        console.warn('hxstate view: a delta did not apply:', err.message);
        source.close();
        connect();
        return;
      }
      e.delta.forEach(function (op) {
        changed.push(changedPath(view.state, op));
        if (op.from) changed.push(op.from.slice(0, op.from.lastIndexOf('/')));
      });
    } else if (e.type === 'CUSTOM' && e.name === 'hx.stream_end') {
      view.state = null;
      view.ended = true;
    }
    view.seq = e.metadata ? e.metadata.seq : view.seq;
    view.events++;
    $('seq').textContent = String(view.seq);
    listEvent(e);
    render(changed);
  }

  // ---------------------------------------------------------------------
  // The stream
  // ---------------------------------------------------------------------

  var source = null;

  function connect() {
    source = new EventSource(streamUrl);
    source.onopen = function () { view.opens++; setStatus('live'); };
    source.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      onEvent(e);
      if (e.type === 'CUSTOM' && e.name === 'hx.stream_end') {
        // the stream ended: stop here (a reconnect would only wait for the key's next row)
        source.close();
        setStatus('ended');
      }
    };
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) {
        if (!view.ended) setStatus('refused');
      } else if (!view.ended) {
        setStatus('reconnecting');
      }
    };
  }

  // ---------------------------------------------------------------------
  // The phase machine, drawn as SVG
  // ---------------------------------------------------------------------

  var SVG = 'http://www.w3.org/2000/svg';
  var drawn = null;   // {nodes: {phase: g}, edges: [{from, to, g}]}
  var lastPhase = null;

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ranks by breadth-first distance from the initial phase, left to right
  function layout(m) {
    var phases = [];
    var seen = {};
    var addPhase = function (p) { if (p !== null && !seen[p]) { seen[p] = true; phases.push(p); } };
    addPhase(m.initial);
    m.transitions.forEach(function (t) { addPhase(t.from); addPhase(t.to); });
    var rank = {};
    if (m.initial !== null) rank[m.initial] = 0;
    var queue = m.initial !== null ? [m.initial] : [];
    while (queue.length) {
      var p = queue.shift();
      m.transitions.forEach(function (t) {
        if (t.from === p && rank[t.to] === undefined) { rank[t.to] = rank[p] + 1; queue.push(t.to); }
      });
    }
    var maxRank = 0;
    Object.keys(rank).forEach(function (k) { maxRank = Math.max(maxRank, rank[k]); });
    phases.forEach(function (ph) { if (rank[ph] === undefined) rank[ph] = ++maxRank; });
    var rows = {};
    var pos = {};
    phases.forEach(function (ph) {
      var r = rank[ph];
      rows[r] = (rows[r] || 0) + 1;
      pos[ph] = { x: 80 + r * 215, y: 0, row: rows[r] - 1 };
    });
    var maxRows = 1;
    Object.keys(rows).forEach(function (r) { maxRows = Math.max(maxRows, rows[r]); });
    return { phases: phases, rank: rank, pos: pos, maxRank: maxRank, maxRows: maxRows };
  }

  function drawMachine(m) {
    var box = $('machine');
    box.textContent = '';
    $('machine-name').textContent = m.machine ? m.machine + ' (column ' + m.column + ')' : '';
    if (!m.machine) {
      box.appendChild(el('p', 'none', 'this table has no hx_phase_guard: no phase machine'));
      return;
    }
    var L = layout(m);
    var W = 120;
    var H = 34;
    var top = 70;
    L.phases.forEach(function (ph) { L.pos[ph].y = top + L.pos[ph].row * 80; });
    // edges grouped by (from, to): one line, the events as its label
    var pairs = {};
    var order = [];
    m.transitions.forEach(function (t) {
      var id = t.from + '\u0000' + t.to;
      if (!pairs[id]) { pairs[id] = { from: t.from, to: t.to, events: [] }; order.push(id); }
      pairs[id].events.push(t.event);
    });
    var bottom = top + (L.maxRows - 1) * 80 + H / 2;
    var back = 0;
    var fwd = 0;
    var g = svg('g');
    var edges = [];
    order.forEach(function (id) {
      var e = pairs[id];
      var a = L.pos[e.from];
      var b = L.pos[e.to];
      var d;
      var lx;
      var ly;
      if (e.from === e.to) {
        d = 'M' + (a.x - 18) + ',' + (a.y - H / 2) + ' C' + (a.x - 40) + ',' + (a.y - H / 2 - 48) + ' ' + (a.x + 40) + ',' + (a.y - H / 2 - 48) + ' ' + (a.x + 18) + ',' + (a.y - H / 2);
        lx = a.x;
        ly = a.y - H / 2 - 40;
      } else if (L.rank[e.to] === L.rank[e.from] + 1 && a.row === b.row) {
        d = 'M' + (a.x + W / 2) + ',' + a.y + ' L' + (b.x - W / 2) + ',' + b.y;
        lx = (a.x + b.x) / 2;
        ly = a.y - 7;
      } else {
        var below = L.rank[e.to] <= L.rank[e.from];
        var k = below ? ++back : ++fwd;
        var x1 = a.x + (below ? -12 : 12);
        var x2 = b.x + (below ? 12 : -12);
        var y1 = a.y + (below ? H / 2 : -H / 2);
        var y2 = b.y + (below ? H / 2 : -H / 2);
        var cy = below ? Math.max(y1, y2) + 26 + 24 * k : Math.min(y1, y2) - 26 - 22 * k;
        var cx = (x1 + x2) / 2;
        d = 'M' + x1 + ',' + y1 + ' Q' + cx + ',' + cy + ' ' + x2 + ',' + y2;
        lx = cx;
        ly = 0.25 * y1 + 0.5 * cy + 0.25 * y2 + (below ? 12 : -4);
        if (below) bottom = Math.max(bottom, ly + 6);
      }
      var eg = svg('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to });
      eg.appendChild(svg('path', { d: d, 'marker-end': 'url(#hx-arrow)' }));
      eg.appendChild(svg('text', { x: lx, y: ly }, e.events.join(', ')));
      g.appendChild(eg);
      edges.push({ from: e.from, to: e.to, g: eg });
    });
    var nodes = {};
    L.phases.forEach(function (ph) {
      var p = L.pos[ph];
      var ng = svg('g', { class: 'node', 'data-phase': ph });
      ng.appendChild(svg('rect', { x: p.x - W / 2, y: p.y - H / 2, width: W, height: H, rx: 10 }));
      ng.appendChild(svg('text', { x: p.x, y: p.y }, ph));
      g.appendChild(ng);
      nodes[ph] = ng;
    });
    if (m.initial !== null) {
      var s = L.pos[m.initial];
      g.appendChild(svg('circle', { class: 'start', cx: s.x - W / 2 - 34, cy: s.y, r: 5 }));
      g.appendChild(svg('path', { d: 'M' + (s.x - W / 2 - 29) + ',' + s.y + ' L' + (s.x - W / 2) + ',' + s.y, stroke: '#1d232a', 'marker-end': 'url(#hx-arrow)' }));
    }
    var width = 80 + L.maxRank * 215 + W / 2 + 20;
    var root = svg('svg', { viewBox: '0 0 ' + width + ' ' + Math.ceil(bottom + 16), role: 'img', 'aria-label': 'phase machine ' + m.machine });
    var defs = svg('defs');
    var marker = svg('marker', { id: 'hx-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.appendChild(svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#7d8793' }));
    defs.appendChild(marker);
    root.appendChild(defs);
    root.appendChild(g);
    box.appendChild(root);
    drawn = { nodes: nodes, edges: edges };
    if (view.phase !== null) markPhase(view.phase, null);
  }

  function markPhase(phase, from) {
    $('phase').textContent = phase === null ? '–' : phase;
    if (!drawn) return;
    Object.keys(drawn.nodes).forEach(function (ph) {
      drawn.nodes[ph].setAttribute('class', ph === phase ? 'node current' : 'node');
    });
    drawn.edges.forEach(function (e) {
      var cls = 'edge';
      if (from !== null && e.from === from && e.to === phase) cls += ' taken';
      else if (e.from === phase) cls += ' available';
      e.g.setAttribute('class', cls);
    });
  }

  function followPhases() {
    var ps = new EventSource(phasesUrl);
    ps.addEventListener('machine', function (m) {
      view.machine = JSON.parse(m.data);
      drawMachine(view.machine);
    });
    ps.addEventListener('phase', function (m) {
      var p = JSON.parse(m.data);
      var from = lastPhase;
      view.phase = p.exists ? p.phase : null;
      lastPhase = view.phase;
      markPhase(view.phase, from);
      var li = el('li', null, (from === null ? '' : from + ' → ') + (view.phase === null ? '(no row)' : view.phase) + '  ' + new Date().toLocaleTimeString());
      $('phases').insertBefore(li, $('phases').firstChild);
    });
  }

  render([]);
  connect();
  followPhases();
}());
