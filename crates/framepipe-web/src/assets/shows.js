// framepipe's list of shows (several shows in one process, docs/SHOWS.md): every show's name,
// state, rate and late frames, polled from /shows.json; each name opens that show's page
// (/shows/NAME/). Vanilla JS, no build step.
'use strict';

const token = new URLSearchParams(location.search).get('token');
const withToken = (path) => token ? path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : path;
const $ = (id) => document.getElementById(id);
const cell = (text, cls) => { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; return td; };
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

function draw(m) {
  $('count').textContent = m.shows.length + (m.shows.length === 1 ? ' show' : ' shows');
  const body = $('shows').tBodies[0];
  const rows = [];
  for (const s of m.shows) {
    const tr = document.createElement('tr');
    tr.id = 'show:' + s.name;
    const a = document.createElement('a');
    a.href = withToken('/shows/' + encodeURIComponent(s.name) + '/');
    a.id = 'link:' + s.name;
    a.textContent = s.name;
    const name = document.createElement('td'); name.append(a);
    tr.append(name, cell(s.state, s.state), cell(s.fps.toFixed(1)), cell(String(s.frames)),
      cell(String(s.late), s.late ? 'late' : ''), cell(String(s.repeated)),
      cell((s.lateness_peak_us / 1000).toFixed(2) + ' ms'), cell(String(s.clients)));
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  const w = m.web;
  $('web-counts').textContent = `web: ${w.clients} pages, ${w.commands} commands; bad ${w.bad}, rate-limited ${w.rate_limited}, queue full ${w.queue_full}`;
}

poll();
