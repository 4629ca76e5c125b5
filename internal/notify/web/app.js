// The SMS log page: it reads the change feed GET /v1/sms (cursor-paginated, rows of the last
// few seconds come again, so items are upserted by user and seq) and the per-user counts
// GET /v1/users, and renders every user's SMS in seq order; it shows the SMS provider breaker
// from GET /v1/gate. No framework, no CDN.
//
// Those endpoints need the notifier's read token (or its admin token): the page asks for it
// once, keeps it in the tab's session storage and sends it as Authorization: Bearer. A link
// may carry it in its fragment (/#token=…), which browsers never send to the server; the
// page stores it and takes it out of the address bar.
"use strict";

const POLL_MS = 1000;
const RETRY_MS = 2000;
const TOKEN_KEY = "walletsaga.notifier.token";
const users = new Map(); // user_id -> {sms: Map(seq -> item), summary: object|null, dirty: bool}
let cursor = "";
// Each start of the polls gets a new generation; a poll of an older one stops, so that asking
// for the token again never leaves two loops running.
let generation = 0;

class TokenRefused extends Error {}

function takeTokenFromFragment() {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

function askForToken(message) {
  generation++;
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("login").hidden = false;
  document.getElementById("empty").hidden = true;
  setStatus("locked", "waiting for the read token");
  document.getElementById("token").focus();
}

function user(id) {
  let u = users.get(id);
  if (!u) {
    u = { sms: new Map(), summary: null, dirty: true };
    users.set(id, u);
  }
  return u;
}

function setStatus(state, text) {
  const el = document.getElementById("status");
  el.dataset.state = state;
  el.textContent = text;
}

async function getJSON(url) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const r = await fetch(url, { headers: { Accept: "application/json", Authorization: "Bearer " + token } });
  if (r.status === 401 || r.status === 403) {
    let msg = "HTTP " + r.status;
    try { msg = (await r.json()).error.message; } catch (e) { /* keep the status */ }
    throw new TokenRefused(msg);
  }
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
  return r.json();
}

function upsert(it) {
  const u = user(it.user_id);
  const old = u.sms.get(it.seq);
  if (old && old.updated_at === it.updated_at && old.status === it.status) return;
  it.fresh = old !== undefined || cursor !== "";
  u.sms.set(it.seq, it);
  u.dirty = true;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function smsItem(it) {
  const dead = it.status === "dead_lettered";
  const li = el("li", "sms status-" + it.status + (dead ? " dead-letter" : "") + (it.fresh ? " fresh" : ""));
  li.dataset.seq = it.seq;
  li.dataset.status = it.status;
  li.appendChild(el("span", "seq", "#" + it.seq));
  li.appendChild(el("span", "badge", dead ? "dead-lettered" : it.status === "pending" ? "retrying" : it.status.replace(/_/g, " ")));
  li.appendChild(el("span", "text", it.text || "(" + it.kind + ")"));
  let meta = "";
  if (it.sent_at) meta = "sent " + new Date(it.sent_at).toLocaleString();
  else if (dead) meta = "dead-lettered after " + it.attempts + " attempts: " + (it.last_error || "");
  else if (it.status === "pending" && it.attempts > 0) meta = "attempt " + it.attempts + (it.last_error ? ": " + it.last_error : "");
  if (meta) {
    li.appendChild(el("span", "meta", meta));
    li.title = meta;
  }
  return li;
}

function renderUser(id, u) {
  let sec = document.getElementById("user-" + id);
  if (!sec) {
    sec = el("section", "user");
    sec.id = "user-" + id;
    sec.dataset.user = id;
    // Keep sections in user-id order.
    const root = document.getElementById("users");
    let before = null;
    for (const s of root.children) {
      if (Number(s.dataset.user) > id) { before = s; break; }
    }
    root.insertBefore(sec, before);
  }
  const items = [...u.sms.values()].sort((a, b) => a.seq - b.seq);
  const n = { sent: 0, dead: 0, pending: 0 };
  for (const it of items) {
    if (it.status === "sent") n.sent++;
    else if (it.status === "dead_lettered") n.dead++;
    else if (it.status === "pending") n.pending++;
  }
  const h = el("h2", "", "User " + id);
  let counts = n.sent + " sent";
  if (n.dead) counts += " · " + n.dead + " dead-lettered";
  if (n.pending) counts += " · " + n.pending + " retrying";
  h.appendChild(el("span", "counts", counts));
  const list = el("ol", "sms-list");
  for (const it of items) list.appendChild(smsItem(it));
  const parts = [h];
  if (u.summary && u.summary.missing_seq) {
    parts.push(el("p", "waiting", "waiting for seq " + u.summary.missing_seq + ", which has not arrived, since " +
      new Date(u.summary.gap_since).toLocaleTimeString() + "; later SMS wait behind it"));
  }
  parts.push(list);
  sec.replaceChildren(...parts);
  for (const it of items) it.fresh = false;
  u.dirty = false;
}

function render() {
  for (const [id, u] of [...users.entries()].sort((a, b) => a[0] - b[0])) {
    if (u.dirty) renderUser(id, u);
  }
  document.getElementById("empty").hidden = users.size > 0;
}

async function pollSMS(gen) {
  if (gen !== generation) return;
  let delay = POLL_MS;
  try {
    const page = await getJSON("/v1/sms?limit=1000&cursor=" + encodeURIComponent(cursor));
    for (const it of page.items) upsert(it);
    cursor = page.next_cursor;
    render();
    setStatus("live", "live · " + new Date().toLocaleTimeString());
    if (page.more) delay = 0;
  } catch (e) {
    if (e instanceof TokenRefused) {
      if (gen === generation) askForToken("The token was refused: " + e.message);
      return;
    }
    setStatus("offline", "offline, retrying: " + e.message);
    delay = RETRY_MS;
  }
  setTimeout(() => pollSMS(gen), delay);
}

async function pollUsers(gen) {
  if (gen !== generation) return;
  try {
    let c = "";
    do {
      const page = await getJSON("/v1/users?limit=1000&cursor=" + encodeURIComponent(c));
      for (const s of page.items) {
        const u = user(s.user_id);
        const was = u.summary;
        if (!was || was.missing_seq !== s.missing_seq || was.last_seq !== s.last_seq) u.dirty = true;
        u.summary = s;
      }
      c = page.next_cursor || "";
    } while (c);
    render();
  } catch (e) {
    // the SMS poll reports the connection state and a refused token
  }
  setTimeout(() => pollUsers(gen), 3 * POLL_MS);
}

async function pollBreaker(gen) {
  if (gen !== generation) return;
  try {
    const g = await getJSON("/v1/gate");
    const b = g.breaker, e = document.getElementById("breaker");
    e.dataset.state = b.state;
    let text = "SMS provider: " + (b.state === "closed" ? "up" : b.state === "open" ? "failing — SMS wait, none is dead-lettered for it" : "probing");
    if (b.state !== "closed" && b.retry_at) text += " (next probe " + new Date(b.retry_at).toLocaleTimeString() + ")";
    if (b.opened) text += " · breaker opened " + b.opened + "× since start";
    e.textContent = text;
  } catch (e) {
    // the SMS poll reports the connection state and a refused token
  }
  setTimeout(() => pollBreaker(gen), 2 * POLL_MS);
}

function start() {
  const gen = ++generation;
  document.getElementById("login").hidden = true;
  setStatus("connecting", "connecting…");
  pollSMS(gen);
  pollUsers(gen);
  pollBreaker(gen);
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token");
  sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  input.value = "";
  start();
});

takeTokenFromFragment();
if (sessionStorage.getItem(TOKEN_KEY)) start();
else askForToken("");
