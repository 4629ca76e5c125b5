// The notifier's operator console. Every list on it is one page of a cursor-paginated
// endpoint, and the page holds no more than that page: the recent activity
// (GET /v1/activity, newest first, the first page polled while it is shown), a user's SMS
// (GET /v1/users/{id}/sms), the search by phone (GET /v1/users?phone=), the dead letters
// (GET /v1/dead-letters, with replay) and the users held by a gap (GET /v1/gate, with skip).
// Next and back move by cursor: the page keeps the cursors of the pages before, never their
// rows. No framework, no CDN.
//
// The read endpoints need the notifier's read token (or an operator's token): the page asks
// for it once, keeps it in the tab's session storage and sends it as Authorization: Bearer.
// A link may carry it in its fragment (/#token=…), which browsers never send to the server;
// the page stores it and takes it out of the address bar. Replay and skip need the
// operator's own token (one of the notifier's OPERATOR_TOKENS), which also says who acts:
// it is asked for in the operator form and kept likewise; the page sends no name.
"use strict";

performance.mark("console-start");

const POLL_MS = 2000;
const RETRY_MS = 2000;
const PAGE = 50;
const TOKEN_KEY = "walletsaga.notifier.token";
const OPERATOR_TOKEN_KEY = "walletsaga.notifier.operator-token";
// Each start of the polls gets a new generation; a poll of an older one stops, so that asking
// for the token again never leaves two loops running.
let generation = 0;

class TokenRefused extends Error {}

const $ = (id) => document.getElementById(id);

function takeTokenFromFragment() {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

function askForToken(message) {
  generation++;
  sessionStorage.removeItem(TOKEN_KEY);
  $("login-error").textContent = message || "";
  $("login").hidden = false;
  $("console").hidden = true;
  setStatus("locked", "waiting for the read token");
  $("token").focus();
}

function setStatus(state, text) {
  const el = $("status");
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
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { msg = (await r.json()).error.message; } catch (e) { /* keep the status */ }
    throw new Error(msg);
  }
  return r.json();
}

// operate POSTs an operator action with the operator token of the operator form (whose
// operator the audit trail records), and reports the outcome there.
async function operate(path, body) {
  const token = sessionStorage.getItem(OPERATOR_TOKEN_KEY) || "";
  const out = $("op-result");
  if (!token || !body.reason) {
    out.textContent = "Fill in your operator token and a reason first.";
    return false;
  }
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify(body),
  });
  let msg = "done";
  try {
    const v = await r.json();
    if (!r.ok) msg = v.error.message;
  } catch (e) { /* keep it */ }
  out.textContent = (r.ok ? "OK: " : "Refused (HTTP " + r.status + "): ") + path + " — " + msg;
  return r.ok;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function badge(status) {
  return status === "dead_lettered" ? "dead-lettered" : status === "pending" ? "retrying" : status.replace(/_/g, " ");
}

function userLink(id) {
  const a = el("a", "user-link", "user " + id);
  a.href = "#";
  a.dataset.user = id;
  a.addEventListener("click", (ev) => { ev.preventDefault(); showUser(id); });
  return a;
}

// smsItem renders one SMS; withUser adds a link to its user (lists of several users).
function smsItem(it, withUser) {
  const dead = it.status === "dead_lettered";
  const li = el("li", "sms status-" + it.status + (dead ? " dead-letter" : ""));
  li.dataset.user = it.user_id;
  li.dataset.seq = it.seq;
  li.dataset.status = it.status;
  const who = el("span", "seq");
  if (withUser) who.append(userLink(it.user_id), " ");
  who.append("#" + it.seq);
  li.append(who, el("span", "badge", badge(it.status)), el("span", "text", it.text || "(" + it.kind + ")"));
  let meta = "";
  if (it.sent_at) meta = "sent " + new Date(it.sent_at).toLocaleString();
  else if (dead) meta = "dead-lettered after " + it.attempts + " attempts: " + (it.last_error || "");
  else if (it.status === "pending" && it.attempts > 0) meta = "attempt " + it.attempts + (it.last_error ? ": " + it.last_error : "");
  if (it.replay_count) meta += " · replayed " + it.replay_count + "×";
  if (meta) {
    li.append(el("span", "meta", meta));
    li.title = meta;
  }
  return li;
}

// Pager shows one page of a cursor-paginated list in the panel with the given id: its
// <ol class="list">, its back and next buttons and its page number. It keeps the cursors of
// the pages before the one shown (to go back), never their rows.
class Pager {
  constructor(id, url, item) {
    this.root = $(id);
    this.url = url; // (cursor) => the page's URL
    this.item = item; // (row) => its <li>
    this.back = []; // cursors of the pages before this one
    this.cursor = "";
    this.next = "";
    this.root.querySelector(".next").addEventListener("click", () => this.forward());
    this.root.querySelector(".prev").addEventListener("click", () => this.backward());
  }

  async load(cursor) {
    const page = await getJSON(this.url(cursor));
    this.cursor = cursor;
    this.next = page.next_cursor || "";
    const list = this.root.querySelector(".list");
    list.replaceChildren(...page.items.map(this.item));
    list.dataset.cursor = cursor;
    this.root.querySelector(".empty").hidden = page.items.length > 0;
    this.root.querySelector(".next").disabled = !this.next;
    this.root.querySelector(".prev").disabled = this.back.length === 0;
    this.root.querySelector(".page-no").textContent = "page " + (this.back.length + 1);
    return page;
  }

  first() {
    this.back = [];
    return this.load("");
  }

  refresh() { return this.load(this.cursor); }

  async forward() {
    if (!this.next) return;
    this.back.push(this.cursor);
    try { await this.load(this.next); } catch (e) { this.back.pop(); report(e); }
  }

  async backward() {
    if (this.back.length === 0) return;
    const c = this.back.pop();
    try { await this.load(c); } catch (e) { this.back.push(c); report(e); }
  }
}

function report(e) {
  if (e instanceof TokenRefused) askForToken("The token was refused: " + e.message);
  else setStatus("offline", "offline, retrying: " + e.message);
}

let shownUser = 0;

const activity = new Pager("activity", (c) => "/v1/activity?limit=" + PAGE + "&cursor=" + encodeURIComponent(c), (it) => smsItem(it, true));
const userLog = new Pager("user", (c) => "/v1/users/" + shownUser + "/sms?limit=" + PAGE + "&cursor=" + encodeURIComponent(c), (it) => smsItem({ ...it, user_id: shownUser }, false));
let searchedPhone = "";
const results = new Pager("results", (c) => "/v1/users?limit=20&phone=" + encodeURIComponent(searchedPhone) + "&cursor=" + encodeURIComponent(c), (u) => {
  const li = el("li", "result");
  li.dataset.user = u.user_id;
  li.append(userLink(u.user_id), " " + u.phone + " · " + u.sent + " sent · " + u.dead_lettered + " dead-lettered · " + u.pending + " pending");
  return li;
});
const deadLetters = new Pager("dead", (c) => "/v1/dead-letters?limit=20&cursor=" + encodeURIComponent(c), (d) => {
  const li = smsItem({ ...d, status: "dead_lettered" }, true);
  const b = el("button", "replay", "Replay");
  b.type = "button";
  b.addEventListener("click", async () => {
    if (await operate("/v1/dead-letters/" + d.user_id + "/" + d.seq + "/replay", { reason: $("op-reason").value.trim() })) deadLetters.refresh().catch(report);
  });
  li.append(b);
  return li;
});

let firstPaint = true;

async function showActivity(gen) {
  await activity.load(activity.cursor);
  if (firstPaint && gen === generation) {
    firstPaint = false;
    // The first paint of the console, as the browser timed it (the tests read it). The
    // other panels load after it, so as not to hold it up.
    performance.mark("activity-rendered");
    document.body.dataset.firstPaintMs = Math.round(performance.now());
    pollGate(gen);
    deadLetters.first().catch(() => { /* the activity poll reports it */ });
  }
}

async function showUser(id) {
  shownUser = id;
  $("user-title").textContent = "User " + id;
  $("user").hidden = false;
  try {
    await userLog.first();
    $("user").scrollIntoView({ block: "nearest" });
  } catch (e) { report(e); }
}

async function search(q) {
  q = q.trim().replace(/[\s-]/g, "");
  $("search-error").textContent = "";
  if (/^[0-9]+$/.test(q) && Number(q) > 0) {
    $("results").hidden = true;
    return showUser(Number(q));
  }
  if (!/^\+[1-9][0-9]{7,14}$/.test(q)) {
    $("search-error").textContent = "Type a user id (digits) or a phone number in E.164 form (+8613800001234).";
    return;
  }
  searchedPhone = q;
  $("results-title").textContent = "Users with SMS to " + q;
  $("results").hidden = false;
  try {
    const page = await results.first();
    if (page.items.length === 1) await showUser(page.items[0].user_id);
  } catch (e) { report(e); }
}

// pollActivity reloads the first page of the recent activity while it is shown; on a later
// page the rows stand still until the operator goes back.
async function pollActivity(gen) {
  if (gen !== generation) return;
  let delay = POLL_MS;
  if (activity.back.length === 0) {
    try {
      await showActivity(gen);
      setStatus("live", "live · " + new Date().toLocaleTimeString());
    } catch (e) {
      if (e instanceof TokenRefused) {
        if (gen === generation) askForToken("The token was refused: " + e.message);
        return;
      }
      setStatus("offline", "offline, retrying: " + e.message);
      delay = RETRY_MS;
    }
  }
  setTimeout(() => pollActivity(gen), delay);
}

async function pollGate(gen) {
  if (gen !== generation) return;
  try {
    const g = await getJSON("/v1/gate");
    const b = g.breaker, e = $("breaker");
    e.dataset.state = b.state;
    let text = "SMS provider: " + (b.state === "closed" ? "up" : b.state === "open" ? "failing — SMS wait, none is dead-lettered for it" : "probing");
    if (b.state !== "closed" && b.retry_at) text += " (next probe " + new Date(b.retry_at).toLocaleTimeString() + ")";
    if (b.opened) text += " · breaker opened " + b.opened + "× since start";
    e.textContent = text;
    $("gaps-empty").hidden = g.gaps.length > 0;
    $("gaps-list").replaceChildren(...g.gaps.map((gap) => {
      const li = el("li", "gap" + (gap.alert ? " alert" : ""));
      li.dataset.user = gap.user_id;
      li.append(userLink(gap.user_id), " waits for seq " + gap.missing_seq + " since " + new Date(gap.since).toLocaleTimeString() + " ");
      const s = el("button", "skip", "Skip seq " + gap.missing_seq);
      s.type = "button";
      s.addEventListener("click", () => operate("/v1/gate/" + gap.user_id + "/skip", { seq: gap.missing_seq, reason: $("op-reason").value.trim() }));
      li.append(s);
      return li;
    }));
  } catch (e) {
    // the activity poll reports the connection state and a refused token
  }
  setTimeout(() => pollGate(gen), 5 * POLL_MS);
}

function start() {
  const gen = ++generation;
  $("login").hidden = true;
  $("console").hidden = false;
  setStatus("connecting", "connecting…");
  firstPaint = true;
  pollActivity(gen);
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = $("token");
  sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  input.value = "";
  start();
});

$("search").addEventListener("submit", (ev) => {
  ev.preventDefault();
  search($("q").value);
});

$("operator-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(OPERATOR_TOKEN_KEY, $("op-token").value.trim());
  $("op-token").value = "";
  $("op-result").textContent = "Operator actions will be sent with your token; the audit trail records its operator.";
});

takeTokenFromFragment();
if (sessionStorage.getItem(TOKEN_KEY)) start();
else askForToken("");
