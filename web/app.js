// SPDX-License-Identifier: MIT — Ethan's web chat page (see web/README.md)
//
// One plain ES module, no dependency. Model text is never turned into markup here: HTML comes
// only from the server (rendered and sanitised there) and passes through the `ethan` Trusted
// Types policy; everything else is set with textContent.

const $ = (id) => document.getElementById(id);
const policy = window.trustedTypes
  ? window.trustedTypes.createPolicy('ethan', { createHTML: (s) => s })
  : { createHTML: (s) => s };
/** Put HTML the server rendered and sanitised into `el`. */
function setServerHtml(el, html) { el.innerHTML = policy.createHTML(html); }

const state = {
  csrf: localStorage.getItem('ethan.csrf') || '',
  session: null, // the open conversation's id
  live: null,    // the turn being written: its DOM parts
  follow: null,  // AbortController of the event stream
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const newId = () => crypto.randomUUID().replaceAll('-', '');
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function setStatus(t) { $('status').textContent = t; }

class SignedOut extends Error {}

async function api(method, path, body) {
  const headers = { 'X-Ethan-Csrf': state.csrf };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch('/web/api/' + path, {
    method, headers, cache: 'no-store', credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json().catch(() => ({}));
  if (r.status === 401 && path !== 'login') { showSignin(); throw new SignedOut(); }
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

// ----- sign-in --------------------------------------------------------------------------

function showSignin(message) {
  stopFollowing();
  $('loading').hidden = true;
  $('app').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  $('token').focus();
}

async function signIn(ev) {
  ev.preventDefault();
  $('signin-error').textContent = '';
  try {
    const r = await api('POST', 'login', { token: $('token').value });
    state.csrf = r.csrf;
    localStorage.setItem('ethan.csrf', r.csrf);
    $('token').value = '';
    await showApp();
  } catch (e) {
    $('signin-error').textContent = e.message;
  }
}

async function signOut() {
  try { await api('POST', 'logout'); } catch (_) { /* signed out either way */ }
  localStorage.removeItem('ethan.csrf');
  state.csrf = '';
  showSignin();
}

// ----- conversations ----------------------------------------------------------------------

async function showApp() {
  $('loading').hidden = true;
  $('signin').hidden = true;
  $('app').hidden = false;
  await listSessions();
  const wanted = location.hash.slice(1);
  if (/^[A-Za-z0-9_-]{1,64}$/.test(wanted)) await open(wanted);
  else newChat();
}

async function listSessions() {
  const list = await api('GET', 'sessions');
  const ul = $('sessions');
  ul.replaceChildren();
  for (const s of list) {
    const li = el('li');
    const b = el('button', '', s.title || 'New conversation');
    b.type = 'button';
    b.dataset.id = s.id;
    b.title = s.title || '';
    if (s.id === state.session) b.setAttribute('aria-current', 'true');
    b.addEventListener('click', () => { closeMenu(); open(s.id); });
    li.append(b);
    ul.append(li);
  }
}

function markCurrent() {
  for (const b of $('sessions').querySelectorAll('button')) {
    b.setAttribute('aria-current', String(b.dataset.id === state.session));
  }
}

function newChat() {
  stopFollowing();
  state.session = null;
  state.live = null;
  history.replaceState(null, '', '#');
  $('log').replaceChildren();
  $('title').textContent = 'New conversation';
  $('stop').hidden = true;
  markCurrent();
  $('input').focus();
}

/** Load conversation `id` from the server and follow its events. */
async function open(id) {
  stopFollowing();
  state.session = id;
  history.replaceState(null, '', '#' + id);
  markCurrent();
  const c = await api('GET', 'sessions/' + id);
  if (state.session !== id) return;
  render(c);
  follow(id, c.cursor);
}

function render(c) {
  const log = $('log');
  log.replaceChildren();
  state.live = null;
  let title = null;
  for (const it of c.items) {
    if (it.kind === 'tool') {
      const ul = el('ul', 'tools');
      ul.append(toolLine(it.name, '', it.state));
      log.append(ul);
      continue;
    }
    const cls = { user: 'msg user', assistant: 'msg assistant', card: 'card-wrap' }[it.kind];
    if (!cls) continue;
    const d = el('div', cls);
    setServerHtml(d, it.html);
    if (it.kind === 'user' && title === null) title = d.textContent;
    log.append(d);
  }
  for (const text of c.pending) {
    log.append(el('div', 'msg user pending', text));
    if (title === null) title = text;
  }
  $('title').textContent = (title || 'New conversation').slice(0, 80);
  if (c.live) {
    const live = startLive();
    live.text.textContent = c.live.text;
    for (const t of c.live.tools) {
      const line = toolLine(t.name, t.summary, t.state, t.ms);
      line.dataset.id = t.id;
      live.tools.append(line);
    }
    for (const html of c.live.cards) addCard(html);
    for (const req of c.live.consents) addConsent(req);
  }
  scrollDown();
}

function scrollDown() { const log = $('log'); log.scrollTop = log.scrollHeight; }

// ----- the turn being written ---------------------------------------------------------------

function startLive() {
  if (state.live) return state.live;
  const box = el('div', 'msg live');
  const tools = el('ul', 'tools');
  const extras = el('div', 'extras');
  const text = el('div', 'text');
  box.append(tools, extras, text);
  $('log').append(box);
  state.live = { box, tools, extras, text };
  $('stop').hidden = false;
  return state.live;
}

const ICON = { running: '⏳', done: '✓', failed: '✗', denied: '⛔', stopped: '⏹' };

function toolLine(name, summary, st, ms) {
  const li = el('li', 'tool ' + st);
  li.append(el('span', 'icon', ICON[st] || '•'), ' ', el('span', 'name', name));
  if (summary) li.append(' ', el('span', 'summary', summary));
  li.append(' ', el('span', 'state', ms !== undefined && ms !== null ? `${st} · ${ms} ms` : st));
  return li;
}

function addCard(html) {
  const live = startLive();
  const d = el('div', 'card-wrap');
  setServerHtml(d, html);
  live.extras.append(d);
}

function addConsent(req) {
  const live = startLive();
  const box = el('div', 'consent');
  box.dataset.request = req.request_id;
  const head = el('p', 'head', '🔐 Approval needed: ');
  head.append(el('code', '', req.tool));
  // The description as every channel shows it: escapes visible, never cut.
  const desc = el('pre', 'description', req.description);
  box.append(head, desc);
  if (req.always) {
    box.append(el('p', 'note', 'This kind of call is asked every time; it cannot be approved for the session.'));
  }
  const buttons = el('div', 'buttons');
  const choices = [['once', 'Approve once', '']];
  if (!req.always) choices.push(['session', 'Approve for this session', 'quiet']);
  choices.push(['deny', 'Deny', 'deny']);
  for (const [choice, label, cls] of choices) {
    const b = el('button', cls, label);
    b.type = 'button';
    b.dataset.choice = choice;
    b.addEventListener('click', () => answer(box, req.request_id, choice));
    buttons.append(b);
  }
  box.append(buttons, el('p', 'outcome'));
  live.extras.append(box);
  scrollDown();
}

async function answer(box, requestId, choice) {
  for (const b of box.querySelectorAll('button')) b.disabled = true;
  try {
    const r = await api('POST', 'consent/' + requestId, { choice });
    if (r.ok) resolveConsent(requestId, r.outcome || r.message);
    else {
      box.querySelector('.outcome').textContent = r.message;
      for (const b of box.querySelectorAll('button')) b.disabled = false;
    }
  } catch (e) {
    box.querySelector('.outcome').textContent = e.message;
    for (const b of box.querySelectorAll('button')) b.disabled = false;
  }
}

function resolveConsent(requestId, outcome) {
  for (const box of document.querySelectorAll('.consent')) {
    if (box.dataset.request !== requestId) continue;
    box.querySelector('.buttons')?.remove();
    box.querySelector('.outcome').textContent = outcome;
  }
}

/** One event of the open conversation's stream. */
function onEvent(name, data) {
  switch (name) {
    case 'start': startLive(); break;
    case 'delta': startLive().text.append(data.text); break;
    case 'delta_reset': startLive().text.textContent = ''; break;
    case 'tool_start': {
      const line = toolLine(data.name, data.summary, 'running');
      line.dataset.id = data.id;
      startLive().tools.append(line);
      break;
    }
    case 'tool_end': {
      const st = data.denied ? 'denied' : data.ok ? 'done' : 'failed';
      const old = [...startLive().tools.children].find((l) => l.dataset.id === data.id);
      const summary = old?.querySelector('.summary')?.textContent || '';
      const line = toolLine(data.name, summary, st, data.ms);
      line.dataset.id = data.id;
      if (old) old.replaceWith(line); else state.live.tools.append(line);
      break;
    }
    case 'consent_request': addConsent(data); break;
    case 'consent_resolved': resolveConsent(data.request_id, data.outcome); break;
    case 'card': addCard(data.html); break;
    case 'answer':
    case 'end':
      if (state.live) {
        // The turn is over and stored: show the conversation as the store has it.
        state.live = null;
        $('stop').hidden = true;
        open(state.session).then(listSessions).catch(report);
      } else if (name === 'answer') {
        const d = el('div', 'msg assistant notice');
        setServerHtml(d, data.html);
        $('log').append(d);
      }
      break;
    default: break;
  }
  scrollDown();
}

// ----- the event stream (Server-Sent Events over fetch, resumed by Last-Event-ID) -------------

function stopFollowing() {
  if (state.follow) state.follow.abort();
  state.follow = null;
}

async function follow(session, cursor) {
  const ctl = new AbortController();
  state.follow = ctl;
  let last = cursor;
  while (!ctl.signal.aborted) {
    try {
      const r = await fetch(`/web/api/sessions/${session}/events`, {
        headers: { 'X-Ethan-Csrf': state.csrf, 'Last-Event-ID': last, Accept: 'text/event-stream' },
        cache: 'no-store', credentials: 'same-origin', signal: ctl.signal,
      });
      if (r.status === 401) { showSignin(); return; }
      if (!r.ok) throw new Error('HTTP ' + r.status);
      setStatus('');
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replaceAll('\r\n', '\n');
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const ev = parseEvent(buf.slice(0, end));
          buf = buf.slice(end + 2);
          if (!ev) continue;
          if (ev.name === 'reset') {
            // Events were lost (the daemon restarted): reload, then follow again.
            if (!ctl.signal.aborted) open(session).catch(report);
            return;
          }
          if (ev.id) last = ev.id;
          onEvent(ev.name, ev.data);
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
      setStatus('reconnecting…');
    }
    await sleep(1000);
  }
}

function parseEvent(block) {
  let name = 'message'; let data = ''; let id = null;
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'event') name = value;
    else if (field === 'data') data += (data ? '\n' : '') + value;
    else if (field === 'id') id = value;
  }
  if (!data) return null;
  try { return { name, id, data: JSON.parse(data) }; } catch (_) { return null; }
}

// ----- sending ------------------------------------------------------------------------------

async function send(ev) {
  ev.preventDefault();
  const input = $('input');
  const text = input.value;
  if (!text.trim()) return;
  input.value = '';
  try {
    if (!state.session) {
      await open(newId());
    }
    $('log').append(el('div', 'msg user pending', text));
    if ($('title').textContent === 'New conversation') $('title').textContent = text.slice(0, 80);
    scrollDown();
    await api('POST', `sessions/${state.session}/messages`, { id: newId(), text });
    listSessions().catch(report);
  } catch (e) {
    input.value = text;
    report(e);
  }
}

function report(e) {
  if (e instanceof SignedOut) return;
  setStatus(e.message);
}

function closeMenu() { $('app').classList.remove('menu-open'); }

function init() {
  $('signin-form').addEventListener('submit', signIn);
  $('composer').addEventListener('submit', send);
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  $('new-chat').addEventListener('click', () => { closeMenu(); newChat(); });
  $('signout').addEventListener('click', signOut);
  $('stop').addEventListener('click', () => {
    if (state.session) api('POST', `sessions/${state.session}/stop`).catch(report);
  });
  $('menu').addEventListener('click', () => $('app').classList.toggle('menu-open'));
  api('GET', 'me').then(showApp).catch((e) => { if (!(e instanceof SignedOut)) showSignin(e.message); });
}

init();
