// framepipe's list of shows (several shows in one process, docs/SHOWS.md): every show's name,
// state, rate and late frames, polled from /shows.json; each name opens that show's page
// (/shows/NAME/). Vanilla JS, no build step.
'use strict';

const token = new URLSearchParams(location.search).get('token');
const withToken = (path) => token ? path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : path;
const $ = (id) => document.getElementById(id);
const list = window.fpShows = { shows: [], polls: 0 };

async function poll() {
  try {
    const r = await fetch(withToken('/shows.json'), { cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const m = await r.json();
    list.shows = m.shows; list.polls++;
    $('conn').textContent = 'connected'; $('conn').className = 'ok';
    if (!document.hidden) draw(m);
  } catch (e) {
    $('conn').textContent = 'disconnected (retrying)'; $('conn').className = 'bad';
  }
  setTimeout(poll, 500);
}

// One row per show, made once and then updated in place (a row replaced under the pointer
// would lose a click).
const rows = new Map();
function row(name) {
  let r = rows.get(name);
  if (r) return r;
  const tr = document.createElement('tr');
  tr.id = 'show:' + name;
  const a = document.createElement('a');
  a.href = withToken('/shows/' + encodeURIComponent(name) + '/');
  a.id = 'link:' + name;
  a.textContent = name;
  const first = document.createElement('td'); first.append(a);
  const cells = [1, 2, 3, 4, 5, 6, 7].map(() => document.createElement('td'));
  tr.append(first, ...cells);
  r = { tr, cells };
  rows.set(name, r);
  $('shows').tBodies[0].append(tr);
  return r;
}

function draw(m) {
  $('count').textContent = m.shows.length + (m.shows.length === 1 ? ' show' : ' shows');
  for (const s of m.shows) {
    const { cells } = row(s.name);
    const texts = [s.state, s.fps.toFixed(1), String(s.frames), String(s.late), String(s.repeated),
      (s.lateness_peak_us / 1000).toFixed(2) + ' ms', String(s.clients)];
    texts.forEach((t, i) => { if (cells[i].textContent !== t) cells[i].textContent = t; });
    cells[0].className = s.state;
    cells[3].className = s.late ? 'late' : '';
  }
  const w = m.web;
  $('web-counts').textContent = `web: ${w.clients} pages, ${w.commands} commands; bad ${w.bad}, rate-limited ${w.rate_limited}, queue full ${w.queue_full}`;
}

poll();
