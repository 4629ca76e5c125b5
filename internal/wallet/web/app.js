// walletsvc's operator console: the sagas that need attention first, then the sagas of a
// chosen state, each one page of GET /v1/operator/sagas (newest first, cursor-paginated; a
// page may be short, even empty, and still have a next one: see Pager.load);
// the page keeps the cursors of the pages before the one shown (to go back), never their
// rows. A saga that needs attention is retried or resolved with POST /v1/sagas/{id}/retry or
// /resolve. No framework, no CDN.
//
// All of it needs the operator's own token (one of walletsvc's OPERATOR_TOKENS), which also
// says who acts: the audit trail records the token's operator, so the page asks for no name.
// It asks for the token once and keeps it in the tab's session storage. A link may carry the
// token in its fragment (/#token=…), which browsers never send to the server; the page
// stores it and takes it out of the address bar.
"use strict";

performance.mark("console-start");

const PAGE = 20;
// FOLLOW_EMPTY is how many empty pages in a row (each one request's stretch of sagas, see
// Pager.load) the console follows by itself before it shows one.
const FOLLOW_EMPTY = 5;
const TOKEN_KEY = "walletsaga.wallet.operator-token";

class TokenRefused extends Error {}

const $ = (id) => document.getElementById(id);

function takeTokenFromFragment() {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

function askForToken(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("login-error").textContent = message || "";
  $("login").hidden = false;
  $("console").hidden = true;
  setStatus("locked", "waiting for your operator token");
}

function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function headers() {
  return {
    Accept: "application/json",
    Authorization: "Bearer " + (sessionStorage.getItem(TOKEN_KEY) || ""),
  };
}

async function errorOf(r) {
  try { return (await r.json()).error.message; } catch (e) { return "HTTP " + r.status; }
}

async function getJSON(url) {
  const r = await fetch(url, { headers: headers() });
  if (r.status === 401 || r.status === 403) throw new TokenRefused(await errorOf(r));
  if (!r.ok) throw new Error(await errorOf(r));
  return r.json();
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function money(minor, currency) {
  return (minor / 100).toFixed(2) + " " + currency;
}

// act retries or resolves a saga, with the reason typed above the list.
async function act(id, action) {
  const reason = $("reason").value.trim();
  if (!reason) {
    $("op-result").textContent = "Type a reason first: it is recorded with the action.";
    return;
  }
  const r = await fetch("/v1/sagas/" + id + "/" + action, {
    method: "POST",
    headers: { ...headers(), "Content-Type": "application/json" },
    body: JSON.stringify({ reason }),
  });
  $("op-result").textContent = r.ok ? "Saga " + id + ": " + action + " done, now " + (await r.json()).state + "."
    : "Saga " + id + ": " + action + " refused (HTTP " + r.status + "): " + (await errorOf(r));
  attention.refresh().catch(report);
}

function sagaItem(s) {
  const li = el("li", "saga");
  li.dataset.id = s.id;
  li.dataset.state = s.state;
  let who = "user " + s.user_id;
  if (s.counterparty_id) who += " → user " + s.counterparty_id;
  li.append(el("span", "id", "#" + s.id), el("span", "state", s.state.replace(/_/g, " ")),
    el("span", "what", s.kind + " of " + money(s.amount, s.currency) + ", " + who + ", " + new Date(s.created_at).toLocaleString()));
  const actions = el("span", "actions");
  if (s.state === "needs_attention") {
    for (const a of ["retry", "resolve"]) {
      const b = el("button", a, a === "retry" ? "Retry" : "Resolve");
      b.type = "button";
      b.addEventListener("click", () => act(s.id, a));
      actions.append(b);
    }
  }
  li.append(actions);
  if (s.error) li.append(el("span", "error", s.error.code + ": " + s.error.message));
  return li;
}

// Pager shows one page of a cursor-paginated list in the panel with the given id.
class Pager {
  constructor(id, url) {
    this.root = $(id);
    this.url = url;
    this.back = [];
    this.cursor = "";
    this.next = "";
    this.root.querySelector(".next").addEventListener("click", () => this.forward());
    this.root.querySelector(".prev").addEventListener("click", () => this.backward());
  }

  // load shows the page at cursor. The server reads a bounded stretch of sagas a request,
  // so a page can come back short, even empty, with a next_cursor: an empty one is followed
  // at once, up to FOLLOW_EMPTY times, so that the panel does not say "none" while older
  // sagas remain; a page still empty after that says so, and Older reads on.
  async load(cursor) {
    let page = await getJSON(this.url(cursor));
    for (let hops = 0; page.items.length === 0 && page.next_cursor && hops < FOLLOW_EMPTY; hops++) {
      cursor = page.next_cursor;
      page = await getJSON(this.url(cursor));
    }
    this.cursor = cursor;
    this.next = page.next_cursor || "";
    this.root.querySelector(".list").replaceChildren(...page.items.map(sagaItem));
    this.root.querySelector(".empty").hidden = page.items.length > 0 || this.next !== "";
    this.root.querySelector(".more").hidden = page.items.length > 0 || this.next === "";
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
  else setStatus("offline", "error: " + e.message);
}

const listURL = (state) => (c) => "/v1/operator/sagas?state=" + state + "&limit=" + PAGE + (c ? "&cursor=" + encodeURIComponent(c) : "");
const attention = new Pager("attention", listURL("needs_attention"));
const byState = new Pager("by-state", (c) => listURL($("state").value)(c));

async function start() {
  $("login").hidden = true;
  $("console").hidden = false;
  setStatus("connecting", "connecting…");
  try {
    await attention.first();
    performance.mark("attention-rendered");
    await byState.first();
    setStatus("live", "read at " + new Date().toLocaleTimeString());
  } catch (e) {
    report(e);
  }
}

$("state").addEventListener("change", () => byState.first().catch(report));

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  start();
});

takeTokenFromFragment();
if (sessionStorage.getItem(TOKEN_KEY)) start();
else {
  $("login").hidden = false;
  setStatus("locked", "waiting for your operator token");
}
