// baton's dashboard. Plain JavaScript, no build step, no outside fetch.
//
// It reads the state from /api/... and follows /api/events: an event tells which part of the
// page is out of date, and that part is read again (debounced). Everything shown from a chat is
// untrusted text: the DOM is built with textContent only, never innerHTML, and control,
// invisible and text-direction characters are shown escaped (`visible`), so none can hide or
// reorder what a line says.
"use strict";

// ---------- DOM helpers: text only ----------

/** An element with a class (or attributes) and children; strings become text nodes. */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (typeof attrs === "string") {
    node.className = attrs;
  } else if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      if (k === "onclick") node.addEventListener("click", v);
      else if (k === "class") node.className = v;
      else node.setAttribute(k, String(v));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(visible(String(child))));
  }
  return node;
}

/** Characters shown escaped: C0 controls but tab and newline, DEL and C1, zero-width and
 *  format characters, and the bidi marks, embeddings, overrides and isolates. */
const HIDDEN = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u206F\uFEFF]/g;

/** `text` with every hidden character as a visible `<U+XXXX>`. */
function visible(text) {
  return text.replace(HIDDEN, (c) => "<U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + ">");
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** A link inside the page: `#/kind/id`, the id URL-encoded. */
function link(kind, id, ...children) {
  return el("a", { href: "#/" + kind + "/" + encodeURIComponent(id), class: "deep" }, ...children);
}

function seconds(ms) {
  return (Math.max(0, ms) / 1000).toFixed(1) + " s";
}

function clock(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const why = body.error && (body.error.message || body.error);
    throw new Error(why || response.status + " " + response.statusText);
  }
  return body;
}

/** Run `fn` once, `ms` after the last of a burst of calls. */
function debounce(fn, ms) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

// ---------- state kept from the event stream ----------

const feed = []; // recent events worth a line: received, refusals, deliveries, chains
const FEED_MAX = 300;
let route = { tab: "sessions", id: null };
const expanded = new Set(); // delivery run ids whose card is open

// ---------- the roster ----------

async function drawRoster() {
  const data = await api("/api/roster");
  const roster = clear(document.getElementById("roster"));
  for (const bot of data.bots) {
    const accounts = bot.accounts.map((a) =>
      el("li", { class: "account state-" + a.state },
        el("span", "dot"), a.platform + "/" + a.account + " ",
        el("span", "state", a.state + (a.attempt ? " #" + a.attempt : "") + (a.reason ? ": " + a.reason : ""))));
    let doing;
    if (bot.running.length) {
      doing = bot.running.map((t) =>
        el("div", "doing running", "turn running in ",
          link("session", t.session, chatOf(t.session))));
    } else {
      doing = [el("div", "doing idle", "idle")];
    }
    if (bot.queued) doing.push(el("div", "doing queued", bot.queued + " queued"));
    roster.append(el("section", { class: "bot-card", "data-bot": bot.id },
      el("div", "bot-head", el("span", "bot-name", bot.name), " ", el("span", "bot-id", bot.id)),
      el("div", "bot-model", bot.backend + (bot.model ? " · " + bot.model : "")),
      el("div", "bot-desc", bot.description),
      el("ul", "accounts", accounts),
      doing));
  }
  const lanes = clear(document.getElementById("lanes"));
  for (const lane of data.lanes) {
    lanes.append(el("div", "lane",
      el("span", "lane-name", lane.lane),
      el("span", "lane-load", lane.running + "/" + lane.capacity + " running, " + lane.queued + " queued")));
  }
  const c = data.counters;
  const counters = clear(document.getElementById("counters"));
  const counter = (name, value, cls) =>
    el("span", { class: "counter " + (cls || ""), "data-counter": name }, el("b", null, value), " " + name);
  counters.append(
    counter("replies", c.turns_reply),
    counter("silent", c.turns_silent),
    counter("failed", c.turns_failed, c.turns_failed ? "bad" : ""),
    counter("refusals (1 h)", c.refusals_last_hour, c.refusals_last_hour ? "warn" : ""),
    counter("in flight", c.deliveries_in_flight));
}

/** `bot:<bot>:<platform>:<account>:<chat>[:thread:<id>]` -> `<platform>:<chat>[ thread]`. */
function chatOf(session) {
  const parts = session.split(":");
  if (parts.length < 5) return session;
  const thread = parts.indexOf("thread", 5);
  const chat = parts.slice(4, thread === -1 ? undefined : thread).join(":");
  return parts[2] + ":" + chat + (thread === -1 ? "" : " (thread " + parts.slice(thread + 1).join(":") + ")");
}

/** Who sent a delivery: the bot, or `a2a:<caller>` for an A2A agent's task (its sender
 * session's chat is `a2a-in:<caller>`, on the bot's local account). */
function senderOf(d) {
  const a2a = /^bot:[^:]+:local:[^:]+:a2a-in:([^:]+)$/.exec(d.sender_session);
  return a2a ? "a2a:" + a2a[1] : d.sender;
}

// ---------- sessions and transcripts ----------

let sessions = [];
let sessionFilter = "";

async function drawSessions() {
  sessions = await api("/api/sessions");
  sessions.sort((a, b) => b.updated_ms - a.updated_ms);
  // Kept across redraws, so typing in the search box is not interrupted by live updates.
  let search = document.getElementById("session-search");
  let list = document.getElementById("session-list");
  let pane = document.getElementById("transcript");
  if (!search || !list || !pane) {
    const main = clear(document.getElementById("main"));
    search = el("input", { type: "search", id: "session-search", placeholder: "search sessions: bot, chat, platform",
      value: sessionFilter });
    list = el("ul", { class: "session-list", id: "session-list" });
    pane = el("section", { class: "transcript-pane", id: "transcript" });
    search.addEventListener("input", () => { sessionFilter = search.value; fillSessions(list); });
    main.append(el("div", "split", el("div", "list-col", search, list), pane));
  }
  fillSessions(list);
  if (route.tab === "session") await drawTranscript(pane, route.id);
  else clear(pane).append(el("p", "hint", "Pick a session to read its transcript; it updates as the bot works."));
}

function fillSessions(list) {
  clear(list);
  const words = sessionFilter.toLowerCase().split(/\s+/).filter(Boolean);
  for (const s of sessions) {
    const hay = (s.key + " " + s.bot + " " + s.platform + " " + s.chat).toLowerCase();
    if (!words.every((w) => hay.includes(w))) continue;
    const active = route.tab === "session" && route.id === s.key;
    list.append(el("li", { class: active ? "active" : "" },
      link("session", s.key, el("span", "s-bot", s.bot), " ", el("span", "s-chat", chatOf(s.key))),
      el("span", "s-time", clock(s.updated_ms))));
  }
  if (!list.firstChild) list.append(el("li", "empty", "no session matches"));
}

/** The arguments of a tool call entry, parsed. */
function callArguments(entry) {
  const raw = entry.meta && entry.meta.arguments;
  if (typeof raw !== "string") return raw || {};
  try { return JSON.parse(raw); } catch (_) { return {}; }
}

function isSend(entry) {
  const tool = entry.meta && entry.meta.tool;
  return tool === "sessions_send" || tool === "bots_send_message";
}

/** Which delivery a sessions_send call made: same target and message, the first made after it. */
function deliveryOf(entry, deliveries, used) {
  const args = callArguments(entry);
  const candidates = deliveries
    .filter((d) => !used.has(d.run_id))
    .filter((d) => d.target === args.target || d.target_session === args.target)
    .filter((d) => d.message === args.message)
    .filter((d) => d.created_ms >= entry.ts_ms - 1000)
    .sort((a, b) => a.created_ms - b.created_ms);
  return candidates[0];
}

async function drawTranscript(pane, key) {
  const [entries, deliveries, triggers] = await Promise.all([
    api("/api/transcript?session=" + encodeURIComponent(key)),
    api("/api/deliveries?session=" + encodeURIComponent(key) + "&limit=500"),
    api("/api/usage?group_by=trigger&since=7d"),
  ]);
  // What each trigger cost in all, shown on the message that started it.
  const costs = new Map(triggers.rows.map((r) => [r.trigger, r]));
  clear(pane);
  pane.append(el("h2", null, "Session ", el("code", null, key)));
  const body = el("div", { class: "entries", "data-session": key });
  await renderEntries(body, entries, deliveries.deliveries, key, costs);
  if (!entries.length) body.append(el("p", "hint", "nothing recorded yet"));
  pane.append(body);
}

/** Entries grouped by run: each run's lines together, bot-to-bot calls as nested cards. */
async function renderEntries(into, entries, deliveries, session, costs = new Map()) {
  const used = new Set();
  const results = new Map(); // call_id -> tool result entry
  for (const e of entries) {
    if (e.kind === "tool_result" && e.meta && e.meta.call_id) results.set(e.run_id + "/" + e.meta.call_id, e);
  }
  let run = null;
  let group = null;
  for (const e of entries) {
    if (!group || e.run_id !== run) {
      run = e.run_id;
      group = el("div", { class: "run", "data-run": run || "" });
      into.append(group);
    }
    if (e.kind === "tool_result" && isSend(e)) continue; // shown in the card
    if (e.kind === "tool_call" && isSend(e)) {
      const d = deliveryOf(e, deliveries, used);
      const result = results.get(e.run_id + "/" + (e.meta && e.meta.call_id));
      if (d) used.add(d.run_id);
      group.append(callCard(e, d, result, session));
      continue;
    }
    const cost = e.kind === "inbound" ? costs.get(e.run_id) : undefined;
    if (cost) costs.delete(e.run_id);
    group.append(entryLine(e, cost));
  }
}

/** A trigger's total as its message shows it: `$0.0120 · 3,750 tokens`. */
function triggerCost(r) {
  const tokens = r.total_tokens.toLocaleString("en-US") + " tokens" + (r.estimated ? " (est.)" : "");
  return r.cost_usd === null ? tokens : "$" + r.cost_usd.toFixed(4) + " · " + tokens;
}

function entryLine(e, cost) {
  const tool = e.kind === "tool_call" || e.kind === "tool_result";
  const asked = e.kind === "inbound" && e.platform_message_id;
  return el("div", { class: "entry kind-" + e.kind + " origin-" + e.origin, "data-entry": e.id },
    el("div", "entry-head",
      el("span", "speaker", e.speaker), " ",
      el("span", "kind", e.kind.replace("_", " ")), " ",
      el("span", "time", clock(e.ts_ms)),
      cost ? el("span", { class: "trigger-cost", title: "what this message's work cost in all" }, triggerCost(cost)) : null,
      asked ? whyOf(e.platform_message_id) : null),
    el(tool ? "pre" : "div", "entry-text", e.text || (e.kind === "silent" ? "(chose silence)" : "")));
}

// ---------- why (docs/seeing-what-happened.md) ----------

/** The messages whose "why?" is open: kept open across the live redraws. */
const whyOpen = new Set();

/** "why?" on a message: on click, each bot's decision on it (`/api/why`), under it. */
function whyOf(messageId) {
  const box = el("div", { class: "why", "data-why": messageId });
  const toggle = el("button", { class: "why-toggle", title: "why did nobody answer? each bot's decision on this message" }, "why?");
  toggle.addEventListener("click", () => {
    if (whyOpen.delete(messageId)) clear(box);
    else { whyOpen.add(messageId); fillWhy(box, messageId); }
  });
  if (whyOpen.has(messageId)) fillWhy(box, messageId);
  return el("span", "why-of", toggle, box);
}

async function fillWhy(box, messageId) {
  let found;
  try {
    found = await api("/api/why?message=" + encodeURIComponent(messageId));
  } catch (err) {
    clear(box).append(el("div", "error", String(err.message)));
    return;
  }
  clear(box);
  if (!found.decisions.length) box.append(el("div", "why-line", "no decision recorded: no bot received it"));
  for (const d of found.decisions) {
    const waited = d.waited_ms === null || d.waited_ms === undefined ? null : " · waited " + d.waited_ms + " ms";
    box.append(el("div", { class: "why-line step-" + d.step + " outcome-" + d.outcome, "data-bot": d.bot },
      el("span", "why-bot", d.bot), " ",
      el("span", "why-step", d.step), " ",
      el("span", "why-outcome", d.outcome),
      d.reason ? [": ", el("span", "why-reason", d.reason)] : null,
      waited,
      d.posts.flatMap((p) => [" · posted ", el("code", null, p.message_id)]),
      d.deliveries.flatMap((x) => [" · asked ", x.target, " (", x.state, ")"])));
  }
}

/** "snark called caid (model) — 12.4 s", its state, and on click the target's own lines. */
function callCard(call, d, result, session) {
  const args = callArguments(call);
  const caller = (call.speaker || "").replace(/^bot:/, "");
  let status = null;
  if (result) {
    try { status = JSON.parse(result.text).status; } catch (_) { status = null; }
  }
  if (!d) {
    // Refused before anything was written, or not written yet.
    let reason = "";
    if (result) {
      try { reason = JSON.parse(result.text).reason || ""; } catch (_) { reason = result.text; }
    }
    return el("div", { class: "call-card state-" + (status || "pending") },
      el("div", "call-head",
        el("span", "call-caller", caller), " called ", el("span", "call-target", String(args.target || "?")),
        " ", el("span", "call-state", status === "refused" ? "refused" : (status || "starting"))),
      reason ? el("div", "call-reason", reason) : null,
      el("div", "call-message", String(args.message || "")));
  }
  const settled = !["queued", "running"].includes(d.state);
  const elapsed = (d.finished_ms || Date.now()) - d.created_ms;
  let state = d.state.replace("_", " ");
  if (!settled && status === "timeout") state = "timed out, still in flight";
  const open = expanded.has(d.run_id);
  const card = el("div", { class: "call-card state-" + d.state + (open ? " open" : ""), "data-run": d.run_id },
    el("div", { class: "call-head", onclick: () => toggle(d.run_id) },
      el("span", "call-caller", caller), " called ",
      el("span", "call-target", d.target), " ",
      el("span", "call-model", "(" + (d.model || "…") + ")"), " — ",
      el("span", { class: "call-elapsed", "data-created": d.created_ms, "data-settled": settled ? "1" : "" }, seconds(elapsed)),
      " ", el("span", "call-state", state),
      " ", link("delivery", d.run_id, "link")),
    d.reason ? el("div", "call-reason", d.reason) : null,
    el("div", "call-message", d.message),
    progressLines(d.progress || []),
    artifactList("in", d.artifacts_in || [], (id) => el("span", "art-name", id)),
    artifactList("out", d.artifacts_out || [], (a) =>
      el("span", null, el("span", "art-name", a.name), " ",
        el("span", "art-meta", "(" + a.media_type + ", " + a.bytes + " bytes, by " + a.bot + ")"))));
  if (open) {
    const inner = el("div", "call-inner", el("div", "hint", "loading " + d.target + "'s run…"));
    card.append(inner);
    api("/api/transcript?session=" + encodeURIComponent(d.target_session) + "&run=" + encodeURIComponent(d.run_id))
      .then(async (entries) => {
        const nested = await api("/api/deliveries?session=" + encodeURIComponent(d.target_session) + "&limit=200");
        clear(inner);
        inner.append(el("div", "call-inner-head", d.target + "'s run in ", link("session", d.target_session, chatOf(d.target_session))));
        await renderEntries(inner, entries, nested.deliveries, d.target_session);
      })
      .catch((err) => { clear(inner).append(el("div", "error", String(err.message))); });
  }
  return card;
}

/** Every progress line the target reported while it worked, oldest first. */
function progressLines(lines) {
  if (!lines.length) return null;
  return el("ol", "call-progress", lines.map((p) =>
    el("li", "progress-line",
      el("span", "time", clock(p.ts_ms)), " ",
      p.step ? el("span", "progress-step", p.step + (p.of ? "/" + p.of : "")) : null, p.step ? " " : null,
      el("span", "progress-message", p.message))));
}

/** The artifacts a delivery took in or made, each a link to its content. */
function artifactList(way, items, describe) {
  if (!items.length) return null;
  return el("div", "call-artifacts artifacts-" + way, way === "in" ? "artifacts in: " : "artifacts out: ",
    items.map((item) => {
      const id = typeof item === "string" ? item : item.id;
      return el("a", { class: "artifact", href: "/api/artifacts/" + encodeURIComponent(id) + "/content",
        target: "_blank", rel: "noopener", "data-id": id }, describe(item));
    }));
}

function toggle(runId) {
  if (expanded.has(runId)) expanded.delete(runId); else expanded.add(runId);
  redraw();
}

// The elapsed time of running calls ticks without asking the server.
setInterval(() => {
  for (const node of document.querySelectorAll(".call-elapsed")) {
    if (node.dataset.settled) continue;
    node.textContent = seconds(Date.now() - Number(node.dataset.created));
  }
}, 200);

// ---------- chains ----------

async function drawChains() {
  const data = await api("/api/chains?limit=100");
  const main = clear(document.getElementById("main"));
  const list = el("ul", "chain-list");
  for (const c of data.chains) {
    const active = route.tab === "chain" && route.id === c.id;
    list.append(el("li", { class: active ? "active" : "" },
      link("chain", c.id, el("span", "c-name", c.name)),
      el("span", "c-meta", c.id + " · " + c.state + " · holder " + (c.holder || (c.state === "open" ? "baton" : "nobody")))));
  }
  if (!data.chains.length) list.append(el("li", "empty", "no chains yet"));
  const pane = el("section", { class: "chain-pane", id: "chain" });
  main.append(el("div", "split", el("div", "list-col", list), pane));
  if (route.tab === "chain") await drawChain(pane, route.id);
  else pane.append(el("p", "hint", "Pick a chain to follow its thread."));
}

async function drawChain(pane, id) {
  const data = await api("/api/chains/" + encodeURIComponent(id));
  const c = data.chain;
  clear(pane);
  const holder = c.holder || (c.state === "open" ? "baton" : "nobody");
  pane.append(
    el("h2", null, c.name),
    el("div", { class: "chain-facts", "data-chain": c.id },
      el("span", "fact", "id ", el("code", null, c.id)),
      el("span", { class: "fact chain-state state-" + c.state }, c.state),
      el("span", "fact chain-holder", "holder: " + holder),
      el("span", "fact", "coordinator: " + (c.coordinator || "baton")),
      el("span", "fact", "participants: " + c.participants.join(", ")),
      el("span", "fact", "round " + c.round + ", turn " + c.turn),
      el("span", "fact", "in " + c.origin.platform + ":" + c.origin.chat)),
    c.closed_reason ? el("div", "chain-reason", c.closed_reason) : null);
  const thread = el("div", "chain-thread");
  for (const m of data.messages) {
    if (m.kind === "handoff") {
      thread.append(el("div", { class: "turn-bar", "data-turn": m.turn },
        el("span", "turn-no", "turn " + m.turn), " ",
        el("span", "turn-from", m.sender), " → ", el("span", "turn-to", m.recipient || "?"),
        m.content ? el("span", "turn-prompt", m.content) : null));
    } else if (m.kind === "message") {
      thread.append(el("div", { class: "chain-turn", "data-speaker": m.sender },
        el("div", "entry-head", el("span", "speaker", m.sender), " ", el("span", "time", clock(m.ts_ms))),
        el("div", "entry-text", m.content)));
    } else {
      thread.append(el("div", "chain-note", el("span", "speaker", m.sender), " ", m.content));
    }
  }
  if (c.state === "open") thread.append(el("div", "turn-bar now", "now: " + holder + " holds the turn"));
  pane.append(thread);
}

// ---------- deliveries, guards, what arrived ----------

async function drawDeliveries() {
  const data = await api("/api/deliveries?limit=100");
  const main = clear(document.getElementById("main"));
  const open = data.deliveries.filter((d) => d.state === "queued" || d.state === "running");
  const table = (rows) => {
    const t = el("table", "deliveries",
      el("tr", null, ["when", "from", "to", "state", "model", "elapsed", "reason"].map((h) => el("th", null, h))));
    for (const d of rows) {
      const active = route.tab === "delivery" && route.id === d.run_id;
      t.append(el("tr", { class: "state-" + d.state + (active ? " active" : ""), "data-run": d.run_id },
        el("td", null, link("delivery", d.run_id, clock(d.created_ms))),
        el("td", null, link("session", d.sender_session, senderOf(d))),
        el("td", null, link("session", d.target_session, d.target)),
        el("td", "d-state", d.state),
        el("td", null, d.model || ""),
        el("td", null, seconds((d.finished_ms || Date.now()) - d.created_ms)),
        el("td", "d-reason", d.reason || "")));
    }
    if (!rows.length) t.append(el("tr", null, el("td", { colspan: 7, class: "empty" }, "none")));
    return t;
  };
  const refusals = Object.entries(data.refusals).filter(([, n]) => n > 0);
  // append() would write a null as the text "null": only an opened delivery adds its detail.
  const detail = route.tab === "delivery" ? [await deliveryDetail(route.id)] : [];
  main.append(
    ...detail,
    el("h2", null, "In flight"), table(open),
    el("h2", null, "Guard refusals (live)"), feedList((e) => e.type === "guard_refused"),
    el("div", "hint", "sessions_send refusals since start: " +
      (refusals.length ? refusals.map(([r, n]) => r + " " + n).join(", ") : "none")),
    el("h2", null, "Recent deliveries"), table(data.deliveries),
    el("h2", null, "What arrived (live)"), feedList((e) => e.type === "event_received"));
}

async function deliveryDetail(runId) {
  const data = await api("/api/deliveries?limit=500");
  const d = data.deliveries.find((x) => x.run_id === runId);
  if (!d) return el("div", "error", "no delivery " + runId + " in the last 500");
  expanded.add(d.run_id);
  const call = { speaker: senderOf(d), meta: { arguments: { target: d.target, message: d.message } }, ts_ms: d.created_ms };
  return el("section", "delivery-detail",
    el("h2", null, "Delivery ", el("code", null, d.run_id)),
    el("div", "hint", "asked from ", link("session", d.sender_session, chatOf(d.sender_session))),
    callCard(call, d, null, d.sender_session));
}

function feedList(keep) {
  const list = el("ul", "feed");
  const rows = feed.filter(keep).slice(-60).reverse();
  for (const e of rows) list.append(el("li", "feed-" + e.type, el("span", "time", clock(e.ts_ms)), " ", describe(e)));
  if (!rows.length) list.append(el("li", "empty", "nothing yet"));
  return list;
}

function describe(e) {
  switch (e.type) {
    case "guard_refused":
      return e.guard + " refused " + e.bot + ": " + e.reason + (e.chat ? " in " + e.chat : "");
    case "event_received":
      return e.platform + ":" + e.chat + " from " + e.sender + " to " + e.bot + ": " + e.outcome + (e.reason ? " (" + e.reason + ")" : "");
    default:
      return e.type;
  }
}

// ---------- chat ----------

const chat = { mode: "dm", bot: null, room: "lobby", name: "dashboard", log: [] };

async function drawChat() {
  const roster = await api("/api/roster");
  if (!chat.bot && roster.bots.length) chat.bot = roster.bots[0].id;
  const main = clear(document.getElementById("main"));
  const botSelect = el("select", { id: "chat-bot" }, roster.bots.map((b) =>
    el("option", b.id === chat.bot ? { value: b.id, selected: "" } : { value: b.id }, b.name + " (" + b.id + ")")));
  botSelect.addEventListener("change", () => { chat.bot = botSelect.value; drawChat(); });
  const mode = el("select", { id: "chat-mode" },
    el("option", chat.mode === "dm" ? { value: "dm", selected: "" } : { value: "dm" }, "direct message"),
    el("option", chat.mode === "room" ? { value: "room", selected: "" } : { value: "room" }, "local room"));
  mode.addEventListener("change", () => { chat.mode = mode.value; drawChat(); });
  const room = el("input", { id: "chat-room", value: chat.room, size: 12 });
  room.addEventListener("change", () => { chat.room = room.value.trim() || "lobby"; drawChat(); });
  const name = el("input", { id: "chat-name", value: chat.name, size: 12 });
  name.addEventListener("change", () => { chat.name = name.value.trim() || "dashboard"; });
  const controls = el("div", "chat-controls", "talk ", mode, " ",
    chat.mode === "dm" ? botSelect : el("span", null, "in room ", room), " as ", name);
  const log = el("div", { class: "chat-log", id: "chat-log" });
  const input = el("textarea", { id: "chat-input", rows: 2,
    placeholder: chat.mode === "dm" ? "message " + chat.bot : "message the room; @bot wakes a bot" });
  const send = el("button", { id: "chat-send" }, "Send");
  const status = el("div", "chat-status");
  const submit = async () => {
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    try {
      if (chat.mode === "dm") await sendDirect(text, status);
      else await api("/api/local/rooms/" + encodeURIComponent(chat.room) + "/messages", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ sender: chat.name, text }),
      });
      status.textContent = "";
    } catch (err) {
      status.textContent = err.message;
    }
    await fillChatLog();
  };
  send.addEventListener("click", submit);
  input.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); submit(); } });
  main.append(el("h2", null, "Chat"), controls, log, el("div", "chat-compose", input, send), status);
  await fillChatLog();
}

async function sendDirect(text, status) {
  const bot = chat.bot;
  chat.log.push({ bot, author: chat.name, text, ts_ms: Date.now() });
  await fillChatLog();
  status.textContent = bot + " is working…";
  const answer = await api("/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: bot, user: chat.name, messages: [{ role: "user", content: text }] }),
  });
  const reply = answer.choices && answer.choices[0] && answer.choices[0].message.content;
  chat.log.push({ bot, author: bot, is_bot: true, text: reply || "(silence)", ts_ms: Date.now() });
}

async function fillChatLog() {
  const log = document.getElementById("chat-log");
  if (!log) return;
  let messages;
  if (chat.mode === "dm") {
    messages = chat.log.filter((m) => m.bot === chat.bot);
  } else {
    messages = await api("/api/local/rooms/" + encodeURIComponent(chat.room) + "/messages");
  }
  clear(log);
  for (const m of messages) {
    log.append(el("div", { class: "chat-message" + (m.is_bot ? " from-bot" : ""), "data-message": m.id },
      el("span", "speaker", m.author), " ", el("span", "time", clock(m.ts_ms)),
      m.id ? whyOf(m.id) : null,
      el("div", "entry-text", m.text)));
  }
  if (!messages.length) log.append(el("p", "hint", "no messages yet"));
  log.scrollTop = log.scrollHeight;
}

// ---------- routing and the event stream ----------

// ---------- spend (docs/budgets.md) ----------

/** What the model calls spent in the last 24 h, per bot and per chat (`/api/usage`). */
async function drawSpend() {
  const [bots, chats, budgets] = await Promise.all([
    api("/api/usage?group_by=bot&since=24h"),
    api("/api/usage?group_by=chat&since=24h"),
    api("/api/budgets"),
  ]);
  const table = (title, key, data) => {
    const rows = data.rows.map((r) => el("tr", { "data-key": r[key] },
      el("td", null, r[key]),
      el("td", "num", String(r.prompt_tokens)),
      el("td", "num", String(r.completion_tokens)),
      el("td", "num", String(r.total_tokens) + (r.estimated ? " (est.)" : "")),
      el("td", "num", r.cost_usd === null ? "-" : "$" + r.cost_usd.toFixed(4))));
    if (!rows.length) rows.push(el("tr", null, el("td", "empty", "no model calls in the last 24 h")));
    return el("section", { class: "spend", id: "spend-" + key },
      el("h2", null, title),
      el("table", null,
        el("tr", null, ...[key, "prompt", "completion", "total", "cost"].map((h) => el("th", null, h))),
        ...rows));
  };
  const span = (s) => s >= 3600 ? Math.floor(s / 3600) + "h " + Math.floor(s / 60) % 60 + "m"
    : s >= 60 ? Math.floor(s / 60) + "m " + s % 60 + "s" : Math.max(s, 1) + "s";
  const fullest = budgets.budgets.map((b) => el("tr", { "data-key": b.budget },
    el("td", null, b.budget),
    el("td", "num", b.tokens + " tokens" + (b.cost_usd ? ", $" + b.cost_usd.toFixed(2) : "")),
    el("td", "num", b.limit),
    el("td", "num", Math.round(b.share * 100) + "%"),
    el("td", "num", b.resets_in_s === null ? "-" : span(b.resets_in_s))));
  if (!fullest.length) fullest.push(el("tr", null, el("td", "empty", "no budget has counted a call")));
  clear(document.getElementById("main")).append(
    el("section", { class: "spend", id: "spend-budgets" },
      el("h2", null, "Budgets closest to their limit"),
      el("table", null,
        el("tr", null, ...["budget", "used", "limit", "share", "resets in"].map((h) => el("th", null, h))),
        ...fullest)),
    table("Spend per bot, last 24 h", "bot", bots),
    table("Spend per chat, last 24 h", "chat", chats));
}

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const tab = parts[0] || "sessions";
  const id = parts.length > 1 ? decodeURIComponent(parts.slice(1).join("/")) : null;
  return { tab, id };
}

async function redraw() {
  route = parseRoute();
  const views = {
    sessions: drawSessions, session: drawSessions,
    chains: drawChains, chain: drawChains,
    deliveries: drawDeliveries, delivery: drawDeliveries,
    spend: drawSpend,
    chat: drawChat,
  };
  const view = views[route.tab] || drawSessions;
  const tab = { session: "sessions", chain: "chains", delivery: "deliveries" }[route.tab] || route.tab;
  for (const a of document.querySelectorAll(".tabs a")) a.classList.toggle("active", a.dataset.tab === tab);
  try {
    await view();
  } catch (err) {
    clear(document.getElementById("main")).append(el("div", "error", "could not load: " + err.message));
  }
}

const redrawSoon = debounce(redraw, 120);
const rosterSoon = debounce(() => drawRoster().catch(() => {}), 120);
const chatSoon = debounce(() => fillChatLog().catch(() => {}), 120);

/** What part of the page an event makes stale. */
function onEvent(e) {
  if (["event_received", "guard_refused", "delivery", "chain"].includes(e.type)) {
    feed.push(e);
    if (feed.length > FEED_MAX) feed.shift();
  }
  switch (e.type) {
    case "turn_started": case "turn_ended": case "connection": case "guard_refused":
      rosterSoon();
      break;
    default:
  }
  const t = route.tab;
  if (e.type === "entry" || e.type === "delivery" || e.type === "progress") {
    if (t === "sessions" || t === "session" || t === "deliveries" || t === "delivery") redrawSoon();
    if (t === "chat" && chat.mode === "room") chatSoon();
    if (e.type === "delivery") rosterSoon();
  }
  if (e.type === "chain" && (t === "chains" || t === "chain")) redrawSoon();
  if ((e.type === "guard_refused" || e.type === "event_received") && (t === "deliveries" || t === "delivery")) redrawSoon();
}

function follow() {
  const live = document.getElementById("live");
  // From the start of the replay ring: refusals and arrivals of the last while fill the feeds.
  const source = new EventSource("/api/events?after=0");
  source.onopen = () => { live.textContent = "live"; live.className = "live on"; };
  source.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
  source.onmessage = (message) => {
    try { onEvent(JSON.parse(message.data)); } catch (_) { /* not ours */ }
  };
  source.addEventListener("gap", () => { redrawSoon(); rosterSoon(); });
}

window.addEventListener("hashchange", redraw);
document.addEventListener("DOMContentLoaded", () => {
  drawRoster().catch((err) => {
    document.getElementById("roster").textContent = "could not load the roster: " + err.message;
  });
  redraw();
  follow();
});
