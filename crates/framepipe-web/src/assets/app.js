// framepipe's control page. Vanilla JS, no build step; the protocol and the page's parts are in
// docs/WEB.md. Two views of one state: "perform" (scenes, faders, pinned parameters, big
// transport buttons) and "engineer" (the graph, every node and property).
'use strict';

const token = new URLSearchParams(location.search).get('token');
const withToken = (path) => token ? path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : path;
// Where this show's routes are: `/` for the only show, `/shows/NAME/` for a show among several.
const base = location.pathname.replace(/[^/]*$/, '');

// What the page knows: the graph, the latest value of every property, stats.
const fp = window.fp = {
  graph: null, values: [], osc: [], bypass: [], frame: 0, stats: null, scenes: [],
  audioBands: null, audio: null, onsets: null, flashes: 0,
  nextId: 1, pending: new Map(), sent: 0, replies: 0, connects: 0, ws: null,
};

const $ = (id) => document.getElementById(id);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};
const store = {
  get(k, d) { try { const v = localStorage.getItem(k); return v === null ? d : JSON.parse(v); } catch (e) { return d; } },
  set(k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch (e) { /* private mode: not kept */ } },
};

// ---- the connection ------------------------------------------------------------------------
// A dropped socket is opened again by itself: after 0.5 s, then twice as long each failed try,
// at most 8 s; the header says so. The server sends the whole state on connecting, so the page
// is in sync again as soon as it is back.
let retries = 0;
function setConn(text, cls) { const c = $('conn'); c.textContent = text; c.className = cls; }
function connect() {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = fp.ws = new WebSocket(withToken(proto + '//' + location.host + base + 'ws'));
  ws.onopen = () => { retries = 0; fp.connects++; setConn('connected', 'ok'); };
  ws.onclose = () => {
    if (fp.ws !== ws) return;
    fp.ws = null;
    const delay = Math.min(8000, 500 * 2 ** retries);
    retries++;
    let left = Math.ceil(delay / 1000);
    const say = () => setConn(`disconnected: retrying in ${left} s (try ${retries})`, 'bad');
    say();
    const tick = setInterval(() => { left--; if (left > 0) say(); }, 1000);
    setTimeout(() => { clearInterval(tick); setConn(`reconnecting (try ${retries})…`, 'bad'); connect(); }, delay);
  };
  ws.onmessage = (ev) => {
    let m; try { m = JSON.parse(ev.data); } catch (e) { return; }
    ({ hello: onHello, graph: onGraph, values: onValues, stats: onStats, audio: onAudio, reply: onReply, error: onError }[m.type] || (() => {}))(m);
  };
}

/** Posts one command line; `what` is the control it came from (for showing an error there). */
function send(cmd, what) {
  const ws = fp.ws;
  if (!ws || ws.readyState !== WebSocket.OPEN) { log(`not sent (disconnected): ${cmd}`, 'error mine'); return; }
  const id = fp.nextId++;
  fp.pending.set(id, { cmd, what });
  if (fp.pending.size > 200) fp.pending.delete(fp.pending.keys().next().value);
  ws.send(JSON.stringify({ id, cmd }));
  fp.sent++;
}

// A control moved continuously sends at most every 33 ms; the last position is always sent.
const throttles = new Map();
function sendThrottled(key, cmd, what) {
  let t = throttles.get(key);
  if (!t) { t = { last: 0, timer: null, cmd: null }; throttles.set(key, t); }
  t.cmd = cmd;
  const now = performance.now();
  if (now - t.last >= 33 && !t.timer) { t.last = now; send(cmd, what); t.cmd = null; return; }
  if (!t.timer) t.timer = setTimeout(() => { t.timer = null; t.last = performance.now(); if (t.cmd) send(t.cmd, what); t.cmd = null; }, 33);
}

// The project files the server lets `load` switch to (its `--scenes` folder), when it says.
function onHello(m) {
  fp.client = m.client;
  if (Array.isArray(m.scenes)) setScenes(m.scenes);
  setAudio(m.audio);
}

// ---- the graph ---------------------------------------------------------------------------
function onGraph(m) {
  fp.graph = m;
  if (m.show) { $('show-name').textContent = m.show; document.title = m.show + ' · framepipe'; }
  if (Array.isArray(m.scenes)) setScenes(m.scenes);
  fp.values = m.nodes.map((n) => n.props.map((p) => p.default));
  fp.osc = m.nodes.map((n) => n.props.map(() => null));
  fp.bypass = m.nodes.map(() => false);
  $('preview-node').textContent = m.preview ? 'of ' + m.preview : '';
  // The preview's node: any node with an output but the tap itself; picking one posts the live
  // edit `link TAP NODE`.
  const pick = $('preview-select');
  pick.textContent = '';
  const tap = m.preview_tap;
  // No tap, no preview (several shows without --web-preview).
  for (const id of ['preview-head', 'preview-pick', 'preview']) $(id).hidden = !tap;
  const branch = new Set(m.nodes.filter((n) => n.name === tap || n.inputs.includes(tap)).map((n) => n.name));
  for (const n of m.nodes) {
    if (n.kind !== 'sink' && !branch.has(n.name)) pick.append(el('option', { value: n.name }, n.name));
  }
  pick.value = m.preview || '';
  pick.disabled = !tap;
  pick.onchange = () => { if (tap) send(`link ${tap} ${pick.value}`, pick); };
  drawGraph(m);
  buildPanels(m);
  buildPerform(m);
  buildDecks(m);
}

function drawGraph(g) {
  const svg = $('graph');
  svg.textContent = '';
  const index = new Map(g.nodes.map((n, i) => [n.name, i]));
  const depth = [];
  g.nodes.forEach((n, i) => { depth[i] = n.inputs.reduce((d, name) => Math.max(d, (depth[index.get(name)] ?? -1) + 1), 0); });
  const rowsAt = [];
  const pos = g.nodes.map((n, i) => { const c = depth[i]; rowsAt[c] = (rowsAt[c] || 0) + 1; return [c, rowsAt[c] - 1]; });
  const W = 130, H = 40, GX = 40, GY = 16;
  const width = (Math.max(0, ...depth) + 1) * (W + GX) + GX, height = Math.max(1, ...rowsAt) * (H + GY) + GY;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('height', Math.min(height, 400));
  const ns = 'http://www.w3.org/2000/svg';
  const at = (i) => [GX + pos[i][0] * (W + GX), GY + pos[i][1] * (H + GY)];
  g.nodes.forEach((n, i) => n.inputs.forEach((name) => {
    const j = index.get(name); if (j === undefined) return;
    const [x1, y1] = at(j), [x2, y2] = at(i);
    const p = document.createElementNS(ns, 'path');
    const ax = x1 + W, ay = y1 + H / 2, bx = x2, by = y2 + H / 2, mx = (ax + bx) / 2;
    p.setAttribute('d', `M${ax},${ay} C${mx},${ay} ${mx},${by} ${bx},${by}`);
    svg.append(p);
  }));
  g.nodes.forEach((n, i) => {
    const [x, y] = at(i);
    const grp = document.createElementNS(ns, 'g');
    grp.setAttribute('class', 'node' + (n.leaky ? ' leaky' : '') + (n.master ? ' master' : ''));
    grp.setAttribute('transform', `translate(${x},${y})`);
    grp.setAttribute('data-node', n.name);
    const r = document.createElementNS(ns, 'rect'); r.setAttribute('width', W); r.setAttribute('height', H);
    const t1 = document.createElementNS(ns, 'text'); t1.setAttribute('x', 6); t1.setAttribute('y', 16); t1.textContent = n.name;
    const t2 = document.createElementNS(ns, 'text'); t2.setAttribute('x', 6); t2.setAttribute('y', 32); t2.setAttribute('class', 'el');
    t2.textContent = `${n.element} ${n.width}x${n.height}`;
    const title = document.createElementNS(ns, 'title'); title.textContent = `${n.kind} ${n.element}`;
    grp.append(r, t1, t2, title);
    grp.addEventListener('click', () => { const p = document.getElementById('panel:' + n.name); if (p) p.scrollIntoView({ behavior: 'smooth' }); });
    svg.append(grp);
  });
}

// ---- which properties a panel shows -------------------------------------------------------
// How a node runs rather than what it does: folded under "advanced" in the engineer view.
const ADVANCED = new Set(['isolate', 'on-crash', 'stall-ms', 'leaky', 'master', 'on-end', 'threads', 'slices']);
const advanced = (p) => ADVANCED.has(p.name) || (p.name === 'mode' && (p.options || []).includes('serial'));
// A property that cannot change while the show runs (`live: false`); absent means live.
const fixed = (p) => p.live === false;
// A text property may name a file the node opens: the server refuses a page's `set` of one
// (docs/WEB.md), so the page shows it read-only, like a fixed one.
const textual = (p) => p.kind === 'str';
const TEXT_RULE = 'text properties may name files: set them from the show\'s own terminal or project file';
const readonly = (p) => fixed(p) || textual(p);
// A `mix` shows the rows its mode and inputs use: `fader` when crossfading, `blend-K` and
// `opacity-K` for its inputs K = 1.. when layering; the other rows are accepted and unused.
function mixUses(n, name, mode) {
  if (name === 'mode') return true;
  if (name === 'fader') return mode === 'crossfade';
  const k = /^(?:blend|opacity)-(\d+)$/.exec(name);
  if (k) return mode !== 'crossfade' && Number(k[1]) < n.inputs.length;
  return true;
}
function refreshMix(ni) {
  const n = fp.graph && fp.graph.nodes[ni];
  if (!n || n.element !== 'mix') return;
  const mi = n.props.findIndex((p) => p.name === 'mode');
  const mode = mi >= 0 ? fp.values[ni][mi] : 'layers';
  n.props.forEach((p, pi) => {
    for (const row of rows.get(`${ni}:${pi}`) || []) if (!row._pinned || p.name === 'fader') row.hidden = !mixUses(n, p.name, mode);
  });
  $('faders-card').hidden = ![...$('faders').children].some((r) => !r.hidden);
}

// ---- the controls ------------------------------------------------------------------------
const hex = (c) => '#' + c.map((x) => Math.round(Math.min(1, Math.max(0, x)) * 255).toString(16).padStart(2, '0')).join('');
const unhex = (h) => [1, 3, 5].map((i) => (parseInt(h.slice(i, i + 2), 16) / 255).toFixed(4));
const fmt = (v) => typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(6).replace(/\.?0+$/, '')) : Array.isArray(v) ? v.join(',') : String(v);
// The last time the user touched a control: live values do not fight a hand on it.
const touched = new Map();
const busy = (e) => document.activeElement === e && performance.now() - (touched.get(e) || 0) < 1500;
const touch = (e) => touched.set(e, performance.now());

// Property rows by `NODE_INDEX:PROP_INDEX`: the engineer's row and a pinned copy, if any.
const rows = new Map();
const addRow = (k, row) => { if (!rows.has(k)) rows.set(k, []); rows.get(k).push(row); };

function buildPanels(g) {
  const root = $('nodes');
  root.textContent = '';
  rows.clear();
  // The preview's own tap is framepipe's, not the show's: no controls for it.
  const tap = g.preview_tap;
  g.nodes.forEach((n, ni) => {
    if (!n.props.length && !n.bypassable) return;
    if (tap && (n.name === tap || n.inputs.includes(tap))) return;
    const panel = el('div', { class: 'node-panel', id: 'panel:' + n.name });
    const head = el('h3', {}, n.name + ' ', el('small', {}, n.element));
    if (n.bypassable) {
      const cb = el('input', { type: 'checkbox', id: `bypass:${n.name}` });
      cb.addEventListener('change', () => { touch(cb); send(`bypass ${n.name} ${cb.checked ? 'on' : 'off'}`, cb); });
      head.append(' ', el('label', { class: 'bypass' }, cb, ' bypass'));
    }
    panel.append(head);
    const more = el('details', { class: 'advanced', id: `adv:${n.name}` }, el('summary', {}, 'advanced'));
    n.props.forEach((p, pi) => (advanced(p) ? more : panel).append(propRow(n, ni, p, pi, false)));
    if (more.children.length > 1) panel.append(more);
    root.append(panel);
    refreshMix(ni);
  });
}

function propRow(n, ni, p, pi, pinned) {
  const key = `${n.name}.${p.name}`;
  const pre = pinned ? 'pin-' : '';
  const row = el('div', { class: 'prop' + (pinned ? ' pinned' : ''), id: `${pre}row:${key}`, title: p.description || '' });
  row._pinned = pinned;
  const ctl = el('div', { class: 'ctl' });
  const err = el('div', { class: 'err', id: `${pre}err:${key}` });
  const set = (text, from) => sendThrottled(key, `set ${key} ${text}`, from);
  const numeric = p.kind === 'float' || p.kind === 'int';
  let update = () => {};
  if (fixed(p)) {
    row.classList.add('readonly');
    ctl.append(el('span', { class: 'fixed', title: 'cannot change while the show runs: set it in the project or on the command line' }, 'fixed while running'));
  } else if (textual(p)) {
    row.classList.add('readonly');
    ctl.append(el('span', { class: 'fixed', id: `${pre}ro:${key}`, title: TEXT_RULE }, 'set from the terminal'));
  } else if (numeric) {
    const range = el('input', { type: 'range', id: `${pre}ctl:${key}`, min: p.min, max: p.max, step: p.kind === 'int' ? 1 : (p.max - p.min) / 1000, 'aria-label': key });
    const num = el('input', { type: 'number', id: `${pre}num:${key}`, min: p.min, max: p.max, step: p.kind === 'int' ? 1 : 'any', 'aria-label': key });
    range.addEventListener('input', () => { touch(range); num.value = range.value; set(range.value, range); });
    num.addEventListener('change', () => { touch(num); set(num.value, num); });
    num.addEventListener('keydown', () => touch(num));
    num.addEventListener('input', () => touch(num));
    ctl.append(range, num);
    update = (v) => { if (!busy(range)) range.value = v; if (!busy(num)) num.value = fmt(v); };
  } else if (p.kind === 'bool') {
    const cb = el('input', { type: 'checkbox', id: `${pre}ctl:${key}`, 'aria-label': key });
    cb.addEventListener('change', () => { touch(cb); send(`set ${key} ${cb.checked}`, cb); });
    ctl.append(cb);
    update = (v) => { if (!busy(cb)) cb.checked = !!v; };
  } else if (p.kind === 'enum') {
    const sel = el('select', { id: `${pre}ctl:${key}`, 'aria-label': key }, ...(p.options || []).map((o) => el('option', { value: o }, o)));
    sel.addEventListener('change', () => { touch(sel); send(`set ${key} ${sel.value}`, sel); });
    ctl.append(sel);
    update = (v) => { if (!busy(sel)) sel.value = v; };
  } else if (p.kind === 'color') {
    const c = el('input', { type: 'color', id: `${pre}ctl:${key}`, 'aria-label': key });
    c.addEventListener('input', () => { touch(c); set(unhex(c.value).join(','), c); });
    ctl.append(c);
    update = (v) => { if (!busy(c) && Array.isArray(v)) c.value = hex(v); };
  } else if (p.kind === 'position') {
    const x = el('input', { type: 'number', id: `${pre}ctl:${key}:x`, step: 'any', 'aria-label': key + ' x' });
    const y = el('input', { type: 'number', id: `${pre}ctl:${key}:y`, step: 'any', 'aria-label': key + ' y' });
    const go = (e) => { touch(e); set(`${x.value},${y.value}`, e); };
    x.addEventListener('change', () => go(x)); y.addEventListener('change', () => go(y));
    ctl.append('x', x, 'y', y);
    update = (v) => { if (Array.isArray(v)) { if (!busy(x)) x.value = v[0]; if (!busy(y)) y.value = v[1]; } };
  }
  const readout = el('output', { id: `${pre}val:${key}` });
  const side = el('span', { class: 'side' }, readout);
  // The oscillator: "~" attaches one (the text in the box, or a sine over the range); while one
  // runs its text is in the box, which is never rewritten while it has the focus or holds an
  // edit not yet sent; Enter or "apply" sends the box, "×" removes it. A refused spec shows the
  // server's reason under the row.
  let osc = null;
  if (numeric && !fixed(p)) {
    const text = el('input', { type: 'text', class: 'osc-text', id: `${pre}osc:${key}`, placeholder: '~sine:0.5hz:min..max', hidden: '', 'aria-label': key + ' oscillator', spellcheck: 'false', autocapitalize: 'off' });
    const attach = el('button', { id: `${pre}osc-attach:${key}`, title: 'attach an oscillator' }, '~');
    const remove = el('button', { id: `${pre}osc-remove:${key}`, title: 'remove the oscillator', hidden: '' }, '×');
    text._dirty = false;
    const post = (from) => { text._dirty = false; send(`set ${key} ${text.value.trim()}`, from); };
    attach.addEventListener('click', () => {
      if (!text.value.trim()) {
        const lo = Math.max(p.min, -1000), hi = Math.min(p.max, 1000);
        text.value = `~sine:0.5hz:${lo}..${hi}`;
      }
      post(attach);
    });
    text.addEventListener('input', () => { text._dirty = true; });
    text.addEventListener('change', () => post(text));
    text.addEventListener('keydown', (e) => { if (e.key === 'Escape') { text._dirty = false; text.blur(); } });
    remove.addEventListener('click', () => { text._dirty = false; text.value = ''; send(`unosc ${key}`, remove); });
    osc = { text, attach, remove };
    side.append(attach, remove);
  }
  // Following the audio (with --audio): "♪" opens a form that composes the binding
  // `~audio:FEATURE:MIN..MAX:attack=Ams:release=Rms` and posts `set NODE.PROP` with it, the
  // very command a terminal would send; it then runs as the property's oscillator (its text
  // in the box, "×" removes it).
  let aud = null;
  if (osc && fp.audioBands) {
    const open = el('button', { id: `${pre}aud:${key}`, title: 'follow the audio (a band, the level, onsets)' }, '♪');
    const feature = el('select', { id: `${pre}aud-feature:${key}`, 'aria-label': key + ' audio feature' },
      ...audioFeatures().map(([v, label]) => el('option', { value: v }, label)));
    const lo = Math.max(p.min, -1000), hi = Math.min(p.max, 1000);
    const num = (id, value, label, attrs) => {
      const i = el('input', Object.assign({ type: 'number', id: `${pre}aud-${id}:${key}`, value: String(value), step: 'any', 'aria-label': `${key} ${label}` }, attrs || {}));
      return [el('label', {}, label, i), i];
    };
    const [minL, min] = num('min', lo, 'min');
    const [maxL, max] = num('max', hi, 'max');
    const [atkL, attack] = num('attack', 0, 'attack ms', { min: 0, max: 60000, step: 1 });
    const [relL, release] = num('release', 0, 'release ms', { min: 0, max: 60000, step: 1 });
    const go = el('button', { id: `${pre}aud-bind:${key}`, title: 'bind the property to the audio' }, 'bind');
    const form = el('div', { class: 'aud-form', id: `${pre}aud-form:${key}`, hidden: '' }, feature, minL, maxL, atkL, relL, go);
    open.addEventListener('click', () => { form.hidden = !form.hidden; });
    go.addEventListener('click', () => {
      const ms = (i) => Math.max(0, Math.round(Number(i.value) || 0));
      let spec = `~audio:${feature.value}:${Number(min.value)}..${Number(max.value)}`;
      if (ms(attack)) spec += `:attack=${ms(attack)}ms`;
      if (ms(release)) spec += `:release=${ms(release)}ms`;
      if (osc) osc.text._dirty = false;
      send(`set ${key} ${spec}`, go);
      form.hidden = true;
    });
    aud = { open, form };
    side.append(open);
  }
  row.append(el('span', { class: 'name' }, pinned ? key : p.name), ctl, side);
  if (osc) row.append(el('div', { class: 'edit' }, osc.text, ...(aud ? [aud.form] : [])));
  if (!pinned && !readonly(p)) {
    const pin = el('button', { class: 'pin', id: `pin:${key}`, title: 'pin to the perform view', 'aria-pressed': String(isPinned(key)) }, isPinned(key) ? '★' : '☆');
    pin.addEventListener('click', () => { togglePin(key); });
    row.append(pin);
  }
  row.append(err);
  row._update = (v, o) => {
    update(v);
    readout.textContent = fmt(v);
    row.classList.toggle('oscillated', !!o);
    if (osc) {
      const editing = document.activeElement === osc.text || osc.text._dirty;
      osc.remove.hidden = !o;
      osc.text.hidden = !o && !editing;
      osc.attach.textContent = o ? 'apply' : '~';
      osc.attach.title = o ? 'send the oscillator in the box' : 'attach an oscillator';
      if (o && !editing) osc.text.value = o;
    }
  };
  addRow(`${ni}:${pi}`, row);
  return row;
}

function onValues(m) {
  if (!fp.graph || m.version !== fp.graph.version) return;
  fp.frame = m.frame;
  const mixes = new Set();
  for (const [ni, pi, v, o] of m.changes) {
    if (fp.values[ni]) { fp.values[ni][pi] = v; fp.osc[ni][pi] = o; }
    const deck = decks.get(ni);
    if (deck && deck[0] === pi) showPlaying(ni, v);
    const n = fp.graph.nodes[ni];
    if (n && n.element === 'mix' && n.props[pi] && n.props[pi].name === 'mode') mixes.add(ni);
    // A hidden page keeps the values but draws nothing (the browser may share the show's CPU).
    if (!document.hidden) for (const row of rows.get(`${ni}:${pi}`) || []) row._update(v, o);
  }
  for (const ni of mixes) refreshMix(ni);
  for (const [ni, b] of m.bypass) {
    fp.bypass[ni] = b;
    const n = fp.graph.nodes[ni];
    const cb = n && document.getElementById(`bypass:${n.name}`);
    if (cb && !busy(cb)) cb.checked = b;
  }
}

// ---- the perform view: scenes, faders, pinned parameters ----------------------------------
const pinKey = () => 'framepipe.pins.' + (fp.graph && fp.graph.show || location.host + base);
const pins = () => store.get(pinKey(), []);
const isPinned = (key) => pins().includes(key);
function togglePin(key) {
  const list = pins();
  const i = list.indexOf(key);
  if (i >= 0) list.splice(i, 1); else list.push(key);
  store.set(pinKey(), list);
  const b = document.getElementById('pin:' + key);
  if (b) { b.textContent = i >= 0 ? '☆' : '★'; b.setAttribute('aria-pressed', String(i < 0)); }
  if (fp.graph) buildPerform(fp.graph);
}

function buildPerform(g) {
  for (const [k, list] of rows) rows.set(k, list.filter((r) => !r._pinned));
  // Faders: the `fader` of each crossfading-capable `mix`, the one nearest the master first.
  const faders = $('faders');
  faders.textContent = '';
  const master = g.nodes.find((n) => n.master);
  const feedsMaster = (n) => master && master.inputs.includes(n.name);
  const mixes = g.nodes.map((n, ni) => [n, ni]).filter(([n]) => n.element === 'mix')
    .sort(([a], [b]) => Number(feedsMaster(b)) - Number(feedsMaster(a)));
  for (const [n, ni] of mixes) {
    const pi = n.props.findIndex((p) => p.name === 'fader');
    if (pi >= 0 && !readonly(n.props[pi])) faders.append(propRow(n, ni, n.props[pi], pi, true));
  }
  for (const [, ni] of mixes) refreshMix(ni);
  // Pinned: this device's favourites that the graph still has.
  const root = $('pins');
  root.textContent = '';
  for (const key of pins()) {
    const dot = key.indexOf('.');
    const ni = g.nodes.findIndex((n) => n.name === key.slice(0, dot));
    const pi = ni >= 0 ? g.nodes[ni].props.findIndex((p) => p.name === key.slice(dot + 1)) : -1;
    if (pi < 0 || (mixes.some(([, m]) => m === ni) && g.nodes[ni].props[pi].name === 'fader')) continue;
    root.append(propRow(g.nodes[ni], ni, g.nodes[ni].props[pi], pi, true));
  }
  $('pins-empty').hidden = root.children.length > 0;
  fp.values.forEach((vals, ni) => vals.forEach((v, pi) => {
    for (const row of rows.get(`${ni}:${pi}`) || []) if (row._pinned) row._update(v, fp.osc[ni][pi]);
  }));
}

// A word of the command line as its parser reads it back: in "..." with \ before " and \
// (a scene's file name may hold spaces and quotes).
const quoteWord = (w) => '"' + w.replace(/[\\"]/g, (c) => '\\' + c) + '"';

function setScenes(list) {
  fp.scenes = list.filter((s) => typeof s === 'string');
  const root = $('scenes');
  root.textContent = '';
  fp.scenes.forEach((name, i) => {
    const b = el('button', { class: 'scene', id: `scene:${name}`, title: `load ${name}` }, name.replace(/\.toml$/, ''));
    b.addEventListener('click', () => {
      const fade = $('scene-fade').value;
      send(`load ${quoteWord(name)}${fade ? ' fade=' + fade : ''}`, b);
    });
    b.dataset.index = i;
    root.append(b);
  });
  $('scenes-card').hidden = !fp.scenes.length;
}
$('scene-fade').value = store.get('framepipe.fade', '2s');
$('scene-fade').addEventListener('change', () => store.set('framepipe.fade', $('scene-fade').value));

// ---- the audio meters (with --audio) -------------------------------------------------------
// The server says the show's bands in its hello and sends the latest frame's analysis at each
// poll (~15 Hz). Values are amplitudes (a full-scale sine: 1), drawn on a dB scale; the level's
// peak is held 1.5 s; an onset (the count grew) flashes the lamp.
const DB_FLOOR = -60;
const toDb = (x) => x > 0 ? Math.max(DB_FLOOR, 20 * Math.log10(x)) : DB_FLOOR;
const dbPct = (x) => ((toDb(x) - DB_FLOOR) / -DB_FLOOR) * 100;
/** The features a binding may follow: [value, label]. */
function audioFeatures() {
  const bands = (fp.audioBands || []).map((b) => [b.name, `${b.name} (${hz(b.lo)}–${hz(b.hi)})`]);
  return [['level', 'level'], ['peak', 'peak'], ...bands, ['onset', 'onset'], ['flux', 'flux']];
}
const hz = (f) => f >= 1000 ? (f / 1000).toPrecision(3).replace(/\.?0+$/, '') + ' kHz' : Math.round(f) + ' Hz';
function setAudio(a) {
  fp.audioBands = a && Array.isArray(a.bands) ? a.bands : null;
  $('audio-card').hidden = !fp.audioBands;
  const root = $('bands');
  root.textContent = '';
  for (const b of fp.audioBands || []) {
    root.append(el('div', { class: 'band', title: `${b.name}: ${hz(b.lo)} to ${hz(b.hi)}` },
      el('div', { class: 'col', id: `band:${b.name}`, role: 'meter', 'aria-label': b.name }, el('div', { class: 'fill' })),
      el('span', { class: 'bname' }, b.name), el('span', { class: 'hz' }, hz(b.lo))));
  }
}
let peakHold = { pct: 0, at: 0 }, flashTimer = null;
function onAudio(m) {
  if (!fp.audioBands) return;
  const first = fp.onsets === null;
  if (!first && m.onsets > fp.onsets) {
    fp.flashes++;
    const lamp = $('onset-lamp');
    lamp.classList.add('flash');
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => lamp.classList.remove('flash'), 150);
  }
  fp.onsets = m.onsets;
  fp.audio = m;
  if (document.hidden) return;
  const level = $('meter-level'), pct = dbPct(m.level), now = performance.now();
  level.querySelector('.fill').style.width = pct.toFixed(1) + '%';
  level.dataset.value = m.level;
  level.setAttribute('aria-valuenow', toDb(m.level).toFixed(1));
  const peak = dbPct(m.peak);
  if (peak >= peakHold.pct || now - peakHold.at > 1500) peakHold = { pct: peak, at: now };
  level.querySelector('.hold').style.left = `calc(${peakHold.pct.toFixed(1)}% - 2px)`;
  fp.audioBands.forEach((b, i) => {
    const col = document.getElementById('band:' + b.name);
    if (!col) return;
    const v = m.bands[i] || 0;
    col.dataset.value = v;
    col.querySelector('.fill').style.height = dbPct(v).toFixed(1) + '%';
  });
  $('audio-tempo').textContent = m.tempo > 0 ? m.tempo.toFixed(1) + ' bpm' : '';
}

// ---- decks: a grid of each `clips` deck's bank ---------------------------------------------
// A thumbnail per clip (its first frame, made once by the server: `thumb/NODE/N.png`), its
// name (the deck's `clip-names`), the one playing outlined; a click posts `trigger NODE N`,
// the command a terminal would send. A thumbnail the server could not make yet is asked for
// again a few times.
const decks = new Map(); // node index → [clip property index, buttons]
function buildDecks(g) {
  const root = $('decks');
  root.textContent = '';
  decks.clear();
  g.nodes.forEach((n, ni) => {
    if (n.element !== 'clips') return;
    const ci = n.props.findIndex((p) => p.name === 'clip');
    const names = (n.props.find((p) => p.name === 'clip-names') || {}).options || [];
    if (ci < 0 || !names.length) return;
    const grid = el('div', { class: 'clip-grid', id: `deck:${n.name}` });
    const buttons = names.map((name, i) => {
      const img = el('img', { alt: name, width: '160', height: '90', id: `thumb:${n.name}:${i}` });
      let tries = 0;
      const load = () => { img.src = withToken(`${base}thumb/${encodeURIComponent(n.name)}/${i}.png?v=${g.version}.${tries}`); };
      img.addEventListener('error', () => { if (++tries <= 5) setTimeout(load, 800 * tries); });
      load();
      const b = el('button', { class: 'clip', id: `clip:${n.name}:${i}`, title: `trigger ${n.name} ${i}`, 'aria-pressed': 'false' }, img, el('span', { class: 'clip-name' }, name));
      b.addEventListener('click', () => send(`trigger ${n.name} ${i}`, b));
      grid.append(b);
      return b;
    });
    root.append(el('h3', {}, n.name), grid);
    decks.set(ni, [ci, buttons]);
    showPlaying(ni, fp.values[ni] && fp.values[ni][ci]);
  });
  $('decks-card').hidden = !decks.size;
}
function showPlaying(ni, clip) {
  const d = decks.get(ni);
  if (!d) return;
  d[1].forEach((b, i) => { const on = i === clip; b.classList.toggle('playing', on); b.setAttribute('aria-pressed', String(on)); });
}

// ---- views ---------------------------------------------------------------------------------
// The view is this device's choice, kept; a narrow screen starts in "perform".
function setView(v) {
  document.body.classList.toggle('view-perform', v === 'perform');
  document.body.classList.toggle('view-engineer', v !== 'perform');
  $('view-perform').setAttribute('aria-selected', String(v === 'perform'));
  $('view-engineer').setAttribute('aria-selected', String(v !== 'perform'));
  fp.view = v;
}
$('view-perform').addEventListener('click', () => { store.set('framepipe.view', 'perform'); setView('perform'); });
$('view-engineer').addEventListener('click', () => { store.set('framepipe.view', 'engineer'); setView('engineer'); });
setView(store.get('framepipe.view', matchMedia('(max-width: 700px)').matches ? 'perform' : 'engineer'));

// ---- stats, history, preview ---------------------------------------------------------------
const history = [];
let lastLate = null, lastAt = 0, previewSeq = 0, previewLoading = false;
function onStats(s) {
  fp.stats = s;
  if (document.hidden) return;
  $('st-frames').textContent = s.frames;
  $('st-fps').textContent = s.fps.toFixed(1);
  $('st-inflight').textContent = s.in_flight;
  $('st-state').textContent = s.paused ? 'paused' : 'running';
  $('st-late').textContent = s.late;
  $('st-repeated').textContent = s.repeated;
  $('st-tempo').textContent = s.tempo.toFixed(1) + ' bpm';
  $('st-budget').textContent = s.latency_budget_ms ? s.latency_budget_ms.toFixed(1) + ' ms' : '–';
  $('btn-pause').classList.toggle('on', s.paused);
  const tempo = $('tempo'); if (!busy(tempo)) tempo.value = s.tempo.toFixed(1);
  const body = $('stages').tBodies[0];
  body.textContent = '';
  for (const st of s.stages) {
    body.append(el('tr', {}, el('td', {}, st.name), el('td', {}, st.ms.toFixed(2) + (st.instances > 1 ? ' ×' + st.instances : '')),
      el('td', {}, String(st.frames)), el('td', {}, String(st.skipped))));
  }
  const w = s.web;
  $('web-counts').textContent = `web: ${w.clients} pages, ${w.commands} commands; bad ${w.bad}, oversized ${w.oversized}, rate-limited ${w.rate_limited}, queue full ${w.queue_full}, send dropped ${w.send_dropped}`;
  $('st-lateness').textContent = (s.lateness_peak_us / 1000).toFixed(2) + ' ms';
  // History: fps, (late + repeated) per second, and the worst lateness of each second.
  const now = performance.now() / 1000, bad = s.late + s.repeated;
  const rate = lastLate === null || now <= lastAt ? 0 : (bad - lastLate) / (now - lastAt);
  lastLate = bad; lastAt = now;
  history.push([s.fps, rate, s.lateness_peak_us / 1000]); if (history.length > 240) history.shift();
  drawHistory();
  if (s.preview && s.preview !== previewSeq && !previewLoading) {
    previewLoading = true; previewSeq = s.preview;
    const img = $('preview');
    img.onload = img.onerror = () => { previewLoading = false; };
    img.src = withToken(base + 'preview.jpg?seq=' + s.preview);
  }
}

function drawHistory() {
  const c = $('history'), g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  const maxFps = Math.max(1, ...history.map((h) => h[0])), maxBad = Math.max(1, ...history.map((h) => h[1]));
  const maxLate = Math.max(1, ...history.map((h) => h[2]));
  const line = (k, max, color) => {
    g.strokeStyle = color; g.beginPath();
    history.forEach((h, i) => { const x = c.width - (history.length - i) * (c.width / 240), y = c.height - 2 - (h[k] / max) * (c.height - 4); i ? g.lineTo(x, y) : g.moveTo(x, y); });
    g.stroke();
  };
  line(0, maxFps, '#5fd38a'); line(1, maxBad, '#ff6b6b'); line(2, maxLate, '#ffd166');
}

// ---- replies -------------------------------------------------------------------------------
function log(text, cls) {
  const l = $('log');
  l.prepend(el('li', { class: cls }, text));
  while (l.children.length > 50) l.lastChild.remove();
}
function showError(what, reason) {
  const row = what && what.closest && what.closest('.prop');
  if (row) { const e = row.querySelector('.err'); e.textContent = reason || ''; }
}
function onReply(m) {
  fp.replies++;
  const p = m.id != null ? fp.pending.get(m.id) : null;
  if (p) { fp.pending.delete(m.id); showError(p.what, m.ok ? '' : m.reason); }
  log(m.text, (m.ok ? 'ok' : 'refused') + (p ? ' mine' : ''));
}
function onError(m) {
  const p = m.id != null ? fp.pending.get(m.id) : null;
  if (p) { fp.pending.delete(m.id); showError(p.what, m.reason); }
  log(m.reason, 'error' + (p ? ' mine' : ''));
}

// Shown again: draw every value as it is now.
document.addEventListener('visibilitychange', () => {
  if (document.hidden || !fp.graph) return;
  fp.values.forEach((vals, ni) => vals.forEach((v, pi) => { for (const r of rows.get(`${ni}:${pi}`) || []) r._update(v, fp.osc[ni][pi]); }));
  if (fp.stats) onStats(fp.stats);
});

// ---- the header ----------------------------------------------------------------------------
for (const b of document.querySelectorAll('button[data-cmd]')) b.addEventListener('click', () => send(b.dataset.cmd));
// Stop asks first: "stop…" shows "stop the show" and "cancel" in its place for 6 s.
let stopTimer = null;
function askStop(open) {
  $('btn-stop').hidden = open; $('stop-confirm').hidden = !open;
  clearTimeout(stopTimer);
  if (open) stopTimer = setTimeout(() => askStop(false), 6000);
}
$('btn-stop').addEventListener('click', () => askStop(true));
$('btn-stop-cancel').addEventListener('click', () => askStop(false));
$('btn-stop-confirm').addEventListener('click', () => { askStop(false); send('stop'); });
$('speed').addEventListener('input', () => { touch($('speed')); $('speed-out').textContent = $('speed').value; sendThrottled('speed', `speed ${$('speed').value}`); });
$('tempo').addEventListener('change', () => { touch($('tempo')); send(`tempo ${$('tempo').value}`); });

// Among several shows: a link back to the list.
if (base.startsWith('/shows/')) { const a = $('all-shows'); a.href = withToken('/shows/'); a.hidden = false; }

connect();
