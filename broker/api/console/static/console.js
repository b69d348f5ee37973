// Regent's console. It reads only through the broker's JSON routes, with
// the token the user pasted (kept in sessionStorage, never in a cookie or a
// URL), and builds the page with DOM nodes, never with HTML strings, so a
// queue name or a payload is always shown as text.
"use strict";

const TOKEN = "regent.token";
const main = document.getElementById("main");
const banner = document.getElementById("banner");

// --- talking to the broker -------------------------------------------------

class Unavailable extends Error {} // the broker does not serve the route (yet)
class Denied extends Error {}      // 401: no token, or one the broker refuses
class Down extends Error {}        // no answer at all
class Failed extends Error {}      // any other non-2xx answer

// api calls a route: GET, a POST of body, or method (DELETE) without one.
async function api(path, body, method) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.Authorization = "Bearer " + token;
  const init = { headers, cache: "no-store", method: method || "GET" };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new Down("The broker at " + location.host + " cannot be reached.");
  }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* an empty or non-JSON body */ }
  const message = data && data.error ? data.error : "HTTP " + resp.status;
  if (resp.status === 401) throw new Denied(message);
  if (resp.status === 404 && data && data.error === "Not found") {
    throw new Unavailable("Not available: this broker does not serve " + path.split("?")[0] + ".");
  }
  if (!resp.ok) throw new Failed("The broker answered " + resp.status + ": " + message);
  return data;
}

// --- building the page -----------------------------------------------------

function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

const TIME = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" };

const fmt = {
  num: (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en")),
  // Local time, written year first so that no reader mistakes the day,
  // with its time zone. Every field is spelled out: with a time zone alone,
  // sv-SE drops the hour's leading zero.
  time: (v) => (v || v === 0 ? new Date(v).toLocaleString("sv-SE", TIME) : "—"),
  secs: (v) => {
    if (v === null || v === undefined) return "—";
    if (v < 120) return v + " s";
    if (v < 7200) return Math.round(v / 60) + " min";
    return (v / 3600).toFixed(1) + " h";
  },
  rate: (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(2) + "/s"),
};

function link(href, text) { return el("a", { href }, text); }
const enc = encodeURIComponent;

// table draws rows under headers; a column is [header, cell(row), "num"?].
function table(cols, rows, empty) {
  if (!rows.length) return el("p", { class: "muted" }, empty || "Nothing to show.");
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, cols.map(([h, , cls]) => el("th", { class: cls }, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map(([, cell, cls]) => el("td", { class: cls }, cell(r))))))));
}

function pill(text, kind) { return el("span", { class: "pill " + kind }, text); }

function stat(k, v, small) {
  return el("div", { class: "stat" + (small ? " small" : "") }, el("div", { class: "v" }, v), el("div", { class: "k" }, k));
}

// panel is a card that fills itself from load(), and shows instead what
// went wrong: a route the broker does not serve, or an error answer.
function panel(title, load, opts) {
  const body = el("div", {}, el("p", { class: "muted" }, "Loading…"));
  const count = el("span", { class: "count" });
  const p = el("section", { class: "panel" + (opts && opts.wide ? " wide" : ""), "data-panel": title },
    el("h2", {}, el("span", {}, title), count), body);
  // data-state says the panel is done, for a reader and for the tests.
  load((n) => { count.textContent = n; }).then(
    (node) => { body.replaceChildren(node); p.dataset.state = "ready"; },
    (e) => {
      if (e instanceof Denied) { failPage(e); return; }
      if (e instanceof Down) failPage(e);
      const cls = e instanceof Unavailable ? "unavailable" : "error";
      body.replaceChildren(el("p", { class: cls }, e.message));
      p.dataset.state = cls;
    });
  return p;
}

// --- who is signed in ------------------------------------------------------

function claims(token) {
  try {
    const b64 = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(decodeURIComponent(escape(atob(b64))));
  } catch (e) { return {}; }
}

// level is what the console may offer to do: the signed-in token's role
// (role or roles claim), 1 read-only, 2 read-write, 3 admin. Without a token
// the broker checks none (auth off), so every action is offered; the broker
// decides either way.
const READ_WRITE = 2, ADMIN = 3;
function level() {
  const token = sessionStorage.getItem(TOKEN);
  if (!token) return ADMIN;
  const c = claims(token);
  const roles = [].concat(c.role || [], c.roles || []);
  return Math.max(0, ...roles.map((r) => ({ "read-only": 1, "read-write": READ_WRITE, admin: ADMIN }[r] || 0)));
}

function showWho() {
  const who = document.getElementById("who");
  const token = sessionStorage.getItem(TOKEN);
  if (!token) { who.replaceChildren(); return; }
  const c = claims(token);
  who.replaceChildren(
    el("span", { id: "identity" }, [c.sub, c.tenant && "tenant " + c.tenant].filter(Boolean).join(" · ") || "signed in"),
    el("button", { type: "button", class: "secondary", id: "signout", onclick: () => {
      sessionStorage.removeItem(TOKEN); showWho(); route();
    } }, "Sign out"));
}

function login(message) {
  // Every panel of a page learns of the refusal; the first one signs out.
  if (!message && document.getElementById("login")) return;
  const area = el("textarea", { id: "token", placeholder: "eyJhbGciOi…", autocomplete: "off", spellcheck: "false" });
  main.replaceChildren(el("section", { class: "panel login" },
    el("h1", {}, "Sign in"),
    el("p", {}, "This broker checks tokens. Paste a JWT with at least the read-only role; it is kept in this tab's session storage only."),
    message && el("p", { class: "error", id: "login-error" }, message),
    el("form", { id: "login", onsubmit: (ev) => {
      ev.preventDefault();
      const t = area.value.trim().replace(/^Bearer\s+/i, "");
      if (!t) return;
      sessionStorage.setItem(TOKEN, t);
      showWho();
      route();
    } }, area, el("button", { type: "submit" }, "Sign in"))));
}

// failPage replaces the page when nothing on it can load: the broker is
// gone, or it refuses the token.
function failPage(e) {
  if (e instanceof Denied) {
    const had = sessionStorage.getItem(TOKEN);
    sessionStorage.removeItem(TOKEN);
    showWho();
    login(had ? "The broker refused the token: " + e.message : null);
    return;
  }
  showBanner(e.message + " Last tried at " + new Date().toLocaleTimeString("en-GB", { hour12: false }) + ".");
}

function showBanner(text) { banner.textContent = text; banner.hidden = false; }

// --- pages -----------------------------------------------------------------

function groupsBehind(gs) { return gs.filter((g) => g.partitionsWithLag > 0 || g.maxTimeLag >= 60); }

// The states of GET /api/v1/consumer-groups (broker/api/admin/groups.go), each
// with one colour and what it means. How far behind a group is has columns
// of its own, so a Stable group that is behind stays green.
const groupStates = {
  Stable: ["ok", "it consumes, and its oldest unconsumed message is under 5 minutes old"],
  Lagging: ["bad", "its oldest unconsumed message is over 5 minutes old"],
  Dead: ["idle", "it has never consumed a message: it took a batch and acknowledged nothing yet"],
};

function groupState(g) {
  const [kind, meaning] = groupStates[g.state] || ["idle", "a state this console does not know"];
  return el("span", { class: "pill " + kind, title: g.state + ": " + meaning }, g.state);
}

function groupLegend() {
  return el("p", { class: "muted legend" }, Object.entries(groupStates).flatMap(([state, [kind, meaning]], i) =>
    [i ? "; " : "", pill(state, kind), ": " + meaning]), ".");
}

// stateKey shows a state key's parts, which the SDKs join with U+001F (the
// operator, the window start, the user key), with a separator one can see,
// and a part that is an epoch-ms time as a date too.
function stateKey(key) {
  const parts = key.split("\u001f");
  return el("span", { class: "mono", title: parts.length > 1 ? "the parts are separated by U+001F" : null },
    parts.flatMap((part, i) => [i ? el("span", { class: "sep" }, " ▸ ") : "",
      /^\d{13}$/.test(part) ? part + " (" + fmt.time(Number(part)) + ")" : part]));
}

// tableRows is a table sink's row count: exact, "about" the planner's
// estimate beyond a million, or "table missing" once it is gone.
function tableRows(t) {
  if (t.rows === null) return "table missing";
  return (t.rows_estimated ? "about " : "") + fmt.num(t.rows);
}

function queryState(q) {
  if (q.suspended) {
    return el("span", { class: "pill idle", title: "Its StreamQuery has spec.suspend: its workers' pops are answered empty and its cycles refused" }, "suspended");
  }
  if (!q.last_cycle) return pill("no cycle yet", "idle");
  return q.lag > 0 ? pill("behind " + fmt.num(q.lag), "warn") : pill("caught up", "ok");
}

const pages = {
  overview() {
    return [el("h1", {}, "Overview"), el("div", { class: "grid" },
      panel("Broker", async () => {
        const h = await api("/health");
        return el("div", { class: "stats" }, stat("status", h.status), stat("database", h.database), stat("version", h.version));
      }),
      level() >= ADMIN && panel("Pops", popSwitch),
      panel("Throughput (last 5 min)", async () => {
        const o = await api("/api/v1/resources/overview");
        return el("div", { class: "stats" },
          stat("messages in", fmt.rate(o.throughput.ingestedPerSecond)),
          stat("messages out", fmt.rate(o.throughput.processedPerSecond)),
          stat("pending", fmt.num(o.messages.pending)),
          stat("dead letters", fmt.num(o.messages.deadLetter)));
      }),
      panel("Queues", async (count) => {
        const qs = (await api("/api/v1/resources/queues")).queues.filter((q) => q.name !== "");
        count(qs.length);
        return table([
          ["Queue", (q) => link("#/queue/" + enc(q.name), q.name)],
          ["Partitions", (q) => fmt.num(q.partitions), "num"],
          ["Messages", (q) => fmt.num(q.messages.total), "num"],
          ["Pending", (q) => fmt.num(q.messages.pending), "num"],
          ["In flight", (q) => fmt.num(q.messages.processing), "num"],
        ], qs, "No queues yet.");
      }, { wide: true }),
      panel("Consumer groups behind", async (count) => {
        const all = await api("/api/v1/consumer-groups");
        const gs = groupsBehind(all);
        count(gs.length + " of " + all.length);
        return el("div", {}, table([
          ["Group", (g) => g.name],
          ["Queue", (g) => link("#/queue/" + enc(g.queueName), g.queueName)],
          ["State", groupState],
          ["Partitions behind", (g) => fmt.num(g.partitionsWithLag), "num"],
          ["Messages", (g) => fmt.num(g.lagMessages), "num"],
          ["Oldest unconsumed", (g) => (g.partitionsWithLag ? fmt.secs(g.maxTimeLag) : "—"), "num"],
        ], gs, all.length ? "Every group is caught up." : "No consumer groups yet."), gs.length > 0 && groupLegend());
      }, { wide: true }),
      panel("Stream queries", async (count) => {
        const qs = (await api("/streams/v1/queries")).queries;
        count(qs.length);
        return table([
          ["Query", (q) => link("#/query/" + enc(q.name), q.name)],
          ["Source", (q) => q.source_queue],
          ["Sink", (q) => q.sink_queue || "—"],
          ["Table", (q) => (q.sink_table ? q.sink_table.table : "—")],
          ["Table rows", (q) => (q.sink_table ? tableRows(q.sink_table) : "—"), "num"],
          ["Last write", (q) => (q.sink_table ? fmt.time(q.sink_table.last_write) : "—")],
          ["State", queryState],
          ["Lag", (q) => fmt.num(q.lag), "num"],
          ["State rows", (q) => fmt.num(q.state_rows), "num"],
          ["Last cycle", (q) => fmt.time(q.last_cycle)],
        ], qs, "No stream queries registered.");
      }, { wide: true }))];
  },

  queue(name) {
    return [el("h1", {}, name, el("span", { class: "sub" }, "queue")), el("div", { class: "grid" },
      panel("Messages in and out", async () => opsChart(name), { wide: true }),
      panel("Consumer group lag", async () => lagChart(name), { wide: true }),
      panel("Partitions", async (count) => {
        const q = await api("/api/v1/resources/queues/" + enc(name));
        count(q.partitions.length);
        return table([
          ["Partition", (p) => p.name],
          ["Messages", (p) => fmt.num(p.stats.total), "num"],
          ["Pending", (p) => fmt.num(p.stats.pending), "num"],
          ["In flight", (p) => fmt.num(p.stats.processing), "num"],
          ["Dead letters", (p) => fmt.num(p.stats.deadLetter), "num"],
          ["Oldest pending", (p) => fmt.time(p.oldestMessage)],
          ["Newest", (p) => fmt.time(p.newestMessage)],
        ], q.partitions, "No partitions.");
      }, { wide: true }),
      panel("Consumer groups", async (count) => {
        const gs = (await api("/api/v1/consumer-groups")).filter((g) => g.queueName === name);
        count(gs.length);
        const rows = [];
        for (const g of gs) {
          const d = await api("/api/v1/consumer-groups/" + enc(g.name));
          for (const p of (d[name] || { partitions: [] }).partitions) rows.push({ group: g, p });
        }
        return el("div", {}, table([
          ["Group", (r) => r.group.name],
          ["State", (r) => groupState(r.group)],
          ["Partition", (r) => r.p.partition],
          ["Lag (messages)", (r) => fmt.num(r.p.offsetLag), "num"],
          ["Oldest unconsumed", (r) => (r.p.offsetLag ? fmt.secs(r.p.timeLagSeconds) : "—"), "num"],
          ["Lease", (r) => (r.p.leaseActive ? pill("leased", "warn") : pill("free", "idle"))],
          ["Consumed", (r) => fmt.num(r.p.totalConsumed), "num"],
          ["Last consumed", (r) => fmt.time(r.p.lastConsumedAt)],
        ], rows, "No consumer group has read this queue."), rows.length > 0 && groupLegend(),
          gs.length > 0 && level() >= READ_WRITE && seekForm(name, gs.map((g) => g.name)));
      }, { wide: true }),
      panel("Dead letters", async (count) => {
        const d = await api("/api/v1/dlq?limit=20&queue=" + enc(name));
        count(d.total);
        return el("div", {}, dlqTable(d.messages), d.total > d.messages.length &&
          el("p", {}, link("#/dlq?queue=" + enc(name), "All " + d.total + " dead letters of " + name)));
      }, { wide: true }))];
  },

  query(name) {
    const h = el("h1", {}, name, el("span", { class: "sub" }, "stream query"));
    const grid = el("div", { class: "grid" });
    const load = api("/streams/v1/queries").then((a) => {
      const q = a.queries.find((x) => x.name === name);
      if (!q) throw new Failed("No stream query named " + name + " is registered for this tenant.");
      return q;
    });
    grid.append(
      panel("Query", async () => {
        const q = await load;
        return el("dl", { class: "kv" },
          el("dt", {}, "Id"), el("dd", { class: "mono" }, q.query_id),
          el("dt", {}, "Source"), el("dd", {}, link("#/queue/" + enc(q.source_queue), q.source_queue)),
          el("dt", {}, "Sink"), el("dd", {}, q.sink_queue ? link("#/queue/" + enc(q.sink_queue), q.sink_queue) : "—"),
          el("dt", {}, "Config hash"), el("dd", { class: "mono" }, q.config_hash),
          el("dt", {}, "Resets"), el("dd", {}, fmt.num(q.reset_generation)),
          el("dt", {}, "Suspended"), el("dd", {}, q.suspended ? "yes (spec.suspend)" : "no"),
          el("dt", {}, "Last rewind"), el("dd", {}, q.last_rewind
            ? "to " + (q.last_rewind.to ? fmt.time(q.last_rewind.to) : "the beginning") + ", at " + fmt.time(q.last_rewind.at) +
              " (" + q.last_rewind.partitions + (q.last_rewind.partitions === 1 ? " partition)" : " partitions)")
            : "never"),
          el("dt", {}, "Registered"), el("dd", {}, fmt.time(q.created_at)));
      }),
      panel("Progress", async () => {
        const q = await load;
        return el("div", { class: "stats" }, stat("lag", fmt.num(q.lag)), stat("state rows", fmt.num(q.state_rows)),
          stat("last cycle", fmt.time(q.last_cycle), true), stat("state", queryState(q), true));
      }),
      panel("Table sink", async () => {
        const q = await load;
        const t = q.sink_table;
        if (!t) return el("p", {}, "The query writes no table: its output goes to its sink queue only.");
        return el("dl", { class: "kv" },
          el("dt", {}, "Table"), el("dd", { class: "mono" }, t.schema + "." + t.table),
          el("dt", {}, "Mode"), el("dd", {}, t.mode + (t.key_columns && t.key_columns.length ? " on " + t.key_columns.join(", ") : "")),
          el("dt", {}, "Rows"), el("dd", {}, tableRows(t)),
          el("dt", {}, "Rows written"), el("dd", {}, fmt.num(t.written)),
          el("dt", {}, "Last write"), el("dd", {}, t.last_write ? fmt.time(t.last_write) : "never"));
      }),
      panel("Cycles", async () => cycleChart(await load), { wide: true }),
      panel("Source partitions", async (count) => {
        const q = await load;
        count(q.partitions.length);
        return table([
          ["Partition", (p) => p.name],
          ["Lag", (p) => fmt.num(p.lag), "num"],
          ["State rows", (p) => fmt.num(p.state_rows), "num"],
        ], q.partitions, "The source queue has no partition yet.");
      }, { wide: true }),
      panel("State", async () => stateBrowser(await load), { wide: true }));
    return [h, grid];
  },

  dlq(params) {
    const queue = params.get("queue") || "", group = params.get("consumerGroup") || "";
    const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0), limit = 50;
    const form = filters([["queue", "Queue", queue], ["consumerGroup", "Consumer group", group]], "#/dlq");
    return [el("h1", {}, "Dead letters"), form, el("div", { class: "grid" },
      panel("Dead letters", async (count) => {
        const q = new URLSearchParams({ limit, offset });
        if (queue) q.set("queue", queue);
        if (group) q.set("consumerGroup", group);
        const d = await api("/api/v1/dlq?" + q);
        count(d.total);
        return el("div", {}, dlqTable(d.messages, true), pager(params, "#/dlq", offset, limit, d.messages.length, d.total));
      }, { wide: true }))];
  },

  messages(params) {
    const now = new Date(), hourAgo = new Date(now - 3600e3);
    const f = {
      queue: params.get("queue") || "", status: params.get("status") || "",
      from: params.get("from") || hourAgo.toISOString(), to: params.get("to") || now.toISOString(),
    };
    const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0), limit = 50;
    const form = filters([["queue", "Queue", f.queue], ["status", "Status", f.status,
      ["", "pending", "processing", "completed", "dead_letter"]], ["from", "From", f.from], ["to", "To", f.to]], "#/messages");
    const detail = el("div", { id: "message-detail", class: "span-all" });
    return [el("h1", {}, "Messages"), form, el("div", { class: "grid" },
      panel("Messages", async () => {
        const q = new URLSearchParams({ from: f.from, to: f.to, limit, offset });
        if (f.queue) q.set("queue", f.queue);
        if (f.status) q.set("status", f.status);
        const a = await api("/api/v1/messages?" + q);
        const payloads = [];
        const payload = (m) => {
          const cell = el("span", { class: "preview mono", "data-preview": m.transactionId }, "…");
          payloads.push([cell, m]);
          return cell;
        };
        const shown = el("div", {}, table([
          ["Created", (m) => fmt.time(m.createdAt)],
          ["Queue", (m) => link("#/queue/" + enc(m.queue), m.queue)],
          ["Partition", (m) => m.partition],
          ["Transaction", (m) => el("button", { type: "button", class: "link", "data-tx": m.transactionId, onclick: () => showMessage(detail, m) }, m.transactionId)],
          ["Status", (m) => pill(m.status, { completed: "ok", pending: "idle", processing: "warn", dead_letter: "bad" }[m.status] || "idle")],
          ["Groups done", (m) => m.busStatus ? m.busStatus.consumedBy + " of " + m.busStatus.totalGroups : "—", "num"],
          ["Payload", payload],
        ], a.messages, "No message in this window."), pager(params, "#/messages", offset, limit, a.messages.length));
        previews(payloads);
        return shown;
      }, { wide: true }), detail)];
  },
};

function dlqTable(ms, withQueue) {
  return table([
    ["Failed", (m) => fmt.time(m.failedAt)],
    withQueue && ["Queue", (m) => link("#/queue/" + enc(m.queue), m.queue)],
    ["Partition", (m) => m.partition],
    ["Group", (m) => m.consumerGroup],
    ["Transaction", (m) => el("span", { class: "mono" }, m.transactionId)],
    ["Retries", (m) => fmt.num(m.retryCount), "num"],
    ["Error", (m) => m.errorMessage || "—"],
    ["Payload", (m) => el("pre", {}, JSON.stringify(m.data))],
    level() >= READ_WRITE && ["", (m) => el("span", {}, retryButton(m), " ", deleteButton(m))],
  ].filter(Boolean), ms, "No dead letters.");
}

// confirming is an action's cell: a button that asks first, then does
// act and shows the page again, or the error it met.
function confirming(m, label, question, act) {
  const cell = el("span", { class: "action" });
  const ask = () => cell.replaceChildren(
    el("span", { class: "muted" }, question + " "),
    el("button", { type: "button", class: "danger", "data-confirm": m.transactionId, "data-action": label, onclick: async (ev) => {
      ev.target.disabled = true;
      try {
        await act();
        route();
      } catch (e) {
        if (e instanceof Down || e instanceof Denied) failPage(e);
        else cell.replaceChildren(el("span", { class: "error" }, e.message));
      }
    } }, label),
    " ", el("button", { type: "button", class: "secondary", onclick: idle }, "Keep"));
  const idle = () => cell.replaceChildren(
    el("button", { type: "button", class: "secondary", ["data-" + label.toLowerCase()]: m.transactionId, onclick: ask }, label + "…"));
  idle();
  return cell;
}

const deleteMessage = (m) => api("/api/v1/messages/" + enc(m.partitionId) + "/" + enc(m.transactionId), undefined, "DELETE");

// deleteButton deletes a dead letter's message (read-write), after asking:
// the message goes for every consumer group, its dead letters with it.
function deleteButton(m) {
  return confirming(m, "Delete", "Delete the message for every group?", () => deleteMessage(m));
}

// retryButton retries a dead letter (read-write) with the routes the API
// has, since Queen's retry route is not served: it pushes the payload again
// to the same partition as a new message, which every group of the queue
// is delivered, then deletes the dead one. A push that fails leaves the
// dead letter as it was.
function retryButton(m) {
  return confirming(m, "Retry", "Push the payload again to " + m.queue + "/" + m.partition +
    " as a new message (every group gets it) and delete this one?", async () => {
    await api("/api/v1/push", { items: [{ queue: m.queue, partition: m.partition, payload: m.data }] });
    await deleteMessage(m);
  });
}

// previews fills each listed message's payload cell from the message's own
// route, a few at a time: the listing carries no payload (Queen's wire), and
// a page lists at most 50 messages.
function previews(cells) {
  let next = 0;
  const work = async () => {
    while (next < cells.length) {
      const [cell, m] = cells[next++];
      try {
        const d = await api("/api/v1/messages/" + enc(m.partitionId) + "/" + enc(m.transactionId));
        const text = JSON.stringify(d.payload);
        cell.textContent = text.length > 80 ? text.slice(0, 79) + "…" : text;
        cell.title = JSON.stringify(d.payload, null, 2);
      } catch (e) {
        if (e instanceof Down || e instanceof Denied) return failPage(e);
        cell.textContent = "—";
        cell.title = e.message; // deleted since it was listed, say
      }
    }
  };
  for (let i = 0; i < 4; i++) work();
}

function showMessage(detail, m) {
  detail.replaceChildren(panel("Message " + m.transactionId, async () => {
    const d = await api("/api/v1/messages/" + enc(m.partitionId) + "/" + enc(m.transactionId));
    return el("div", {}, el("dl", { class: "kv" },
      el("dt", {}, "Queue"), el("dd", {}, d.queue + " / " + d.partition),
      el("dt", {}, "Status"), el("dd", {}, d.status),
      el("dt", {}, "Created"), el("dd", {}, fmt.time(d.createdAt)),
      el("dt", {}, "Trace"), el("dd", { class: "mono" }, d.traceId || "—"),
      el("dt", {}, "Retries"), el("dd", {}, fmt.num(d.retryCount)),
      el("dt", {}, "Error"), el("dd", {}, d.errorMessage || "—")),
      el("h3", {}, "Payload"), el("pre", {}, JSON.stringify(d.payload, null, 2)));
  }, { wide: true }));
}

// filters is a form whose fields become the page's query string.
function filters(fields, base) {
  const inputs = fields.map(([name, label, value, options]) => el("label", {}, label, options
    ? el("select", { name }, options.map((o) => el("option", { value: o, selected: o === value }, o || "any")))
    : el("input", { name, value, autocomplete: "off" })));
  return el("form", { class: "filters", onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(ev.target)) if (v) q.set(k, v);
    location.hash = base + "?" + q;
  } }, inputs, el("button", { type: "submit" }, "Apply"));
}

function pager(params, base, offset, limit, shown, total) {
  const to = (o) => { const q = new URLSearchParams(params); q.set("offset", o); return base + "?" + q; };
  const more = total === undefined ? shown === limit : offset + shown < total;
  if (!offset && !more) return null;
  return el("div", { class: "pager" },
    offset > 0 && link(to(Math.max(0, offset - limit)), "← Newer"),
    el("span", { class: "muted" }, (offset + 1) + "–" + (offset + shown) + (total !== undefined ? " of " + total : "")),
    more && link(to(offset + limit), "Older →"));
}

// stateBrowser reads a query's state shards through POST
// /streams/v1/state/get, with the route's own key-prefix and ripeness
// filters, and shows each row's value (a window's accumulator).
function stateBrowser(q) {
  if (!q.partitions.length) return el("p", { class: "muted" }, "The source queue has no partition, so there is no state.");
  const part = el("select", { name: "partition", id: "state-partition" },
    q.partitions.map((p) => el("option", { value: p.partition_id }, p.name + " (" + p.state_rows + " rows)")));
  const prefix = el("input", { name: "key_prefix", id: "state-prefix", placeholder: "any key", autocomplete: "off" });
  const ripe = el("input", { name: "ripe", id: "state-ripe", type: "datetime-local", step: "1" });
  const out = el("div", { id: "state-rows" });
  const read = async () => {
    const body = { query_id: q.query_id, partition_id: part.value };
    if (prefix.value) body.key_prefix = prefix.value;
    if (ripe.value) body.ripe_at_or_before = new Date(ripe.value).getTime();
    out.replaceChildren(el("p", { class: "muted" }, "Reading…"));
    try {
      const a = await api("/streams/v1/state/get", body);
      out.replaceChildren(el("p", { class: "muted", id: "state-count" }, a.rows.length + (a.rows.length === 1 ? " row" : " rows")),
        table([
          ["Key", (r) => stateKey(r.key)],
          ["Window", (r) => windowOf(r.value)],
          ["Value", (r) => el("pre", {}, JSON.stringify(r.value, null, 1))],
          ["Updated", (r) => fmt.time(r.updated_at)],
        ], a.rows, "No state row matches."));
    } catch (e) {
      if (e instanceof Down || e instanceof Denied) failPage(e);
      else out.replaceChildren(el("p", { class: "error" }, e.message));
    }
  };
  const form = el("form", { class: "filters", id: "state-form", onsubmit: (ev) => { ev.preventDefault(); read(); } },
    el("label", {}, "Partition", part), el("label", {}, "Key prefix", prefix),
    el("label", {}, "Ripe at or before (your time)", ripe),
    el("button", { type: "button", class: "secondary", id: "state-ripe-now", onclick: () => {
      const d = new Date(Date.now() - new Date().getTimezoneOffset() * 60e3);
      ripe.value = d.toISOString().slice(0, 19);
    } }, "Ripe now"),
    el("button", { type: "submit", id: "state-read" }, "Read state"));
  read();
  return el("div", {}, form, out);
}

// windowOf shows a row's window when its value carries the epoch-ms bounds
// the ripeness filter reads, and a partition's watermark (the largest event
// time folded) when the row is one.
function windowOf(v) {
  const num = (x) => typeof x === "number";
  if (v && num(v.watermark)) return "watermark " + fmt.time(v.watermark);
  if (!v || !num(v.windowEnd)) return "—";
  const end = fmt.time(v.windowEnd);
  return num(v.windowStart) ? fmt.time(v.windowStart) + " → " + end : "ends " + end;
}

// --- actions ---------------------------------------------------------------

// popSwitch shows pop maintenance (admin) and switches it: while it is on,
// every replica answers every pop as an empty queue; acks and pushes carry on.
async function popSwitch() {
  const box = el("div", { id: "pop-switch" });
  const draw = (m) => box.replaceChildren(
    el("div", { class: "stats" }, stat("pops", m.popMaintenanceMode ? pill("paused", "warn") : pill("running", "ok"), true)),
    el("p", { class: "muted" }, m.popMaintenanceMode
      ? "Every pop is answered as an empty queue, on every replica; acks and pushes carry on."
      : "Pausing answers every pop as an empty queue, on every replica, until you resume; acks and pushes carry on."),
    el("button", { type: "button", id: "pop-toggle", onclick: async (ev) => {
      ev.target.disabled = true;
      try {
        draw(await api("/api/v1/system/maintenance/pop", { enabled: !m.popMaintenanceMode }));
      } catch (e) {
        if (e instanceof Down || e instanceof Denied) failPage(e);
        else box.append(el("p", { class: "error" }, e.message));
      }
    } }, m.popMaintenanceMode ? "Resume pops" : "Pause pops"));
  draw(await api("/api/v1/system/maintenance/pop"));
  return box;
}

// seekForm moves a group's cursors on the queue (read-write): to just after
// the last message created at or before a time, or past the newest one.
// Only the partitions the group has read move, and their leases end.
function seekForm(queue, groups) {
  const group = el("select", { name: "group", id: "seek-group" }, groups.map((g) => el("option", { value: g }, g)));
  const at = el("input", { name: "at", id: "seek-at", type: "datetime-local", step: "1" });
  const note = el("span", { class: "muted", id: "seek-result" });
  const seek = async (body) => {
    note.textContent = "Seeking…";
    try {
      const a = await api("/api/v1/consumer-groups/" + enc(group.value) + "/queues/" + enc(queue) + "/seek", body);
      note.textContent = group.value + ": " + a.partitionsUpdated + (a.partitionsUpdated === 1 ? " partition" : " partitions") +
        (body.toEnd ? " moved past the newest message." : " moved to after " + fmt.time(body.timestamp) + ".");
    } catch (e) {
      if (e instanceof Down || e instanceof Denied) failPage(e);
      else note.textContent = e.message;
    }
  };
  return el("form", { class: "filters seek", id: "seek-form", onsubmit: (ev) => {
    ev.preventDefault();
    if (at.value) seek({ timestamp: new Date(at.value).toISOString() });
  } },
  el("label", {}, "Group", group), el("label", {}, "Deliver again after (your time)", at),
  el("button", { type: "submit", id: "seek-time" }, "Seek"),
  el("button", { type: "button", class: "secondary", id: "seek-end", onclick: () => seek({ toEnd: true }) }, "Skip to the end"),
  note);
}

// --- charts ----------------------------------------------------------------

// The windows a chart offers, in minutes. The analytics routes roll the
// per-minute counters into buckets whose width follows the window.
const chartWindows = [["15 min", 15], ["1 h", 60], ["6 h", 360], ["24 h", 1440], ["7 d", 10080]];

// windowed is a chart over a window the user picks (an hour at first):
// draw(from, to) reads the window and returns the chart's nodes.
function windowed(id, draw) {
  const out = el("div", { id });
  const buttons = chartWindows.map(([label, minutes]) => el("button", {
    type: "button", class: "secondary", "data-minutes": minutes, onclick: () => show(minutes) }, label));
  const show = async (minutes) => {
    for (const b of buttons) b.classList.toggle("active", Number(b.dataset.minutes) === minutes);
    const to = new Date(), from = new Date(to - minutes * 60e3);
    out.replaceChildren(el("p", { class: "muted" }, "Reading…"));
    try {
      out.replaceChildren(...[].concat(await draw(from, to)));
      out.dataset.state = "ready";
    } catch (e) {
      if (e instanceof Down || e instanceof Denied) failPage(e);
      else out.replaceChildren(el("p", { class: "error" }, e.message));
    }
  };
  show(60);
  return el("div", {}, el("div", { class: "windows" }, buttons), out);
}

function windowQuery(from, to, extra) {
  return new URLSearchParams({ ...extra, from: from.toISOString(), to: to.toISOString() });
}

// opsChart charts a queue's messages in (pushed) and out (popped) per
// bucket, from GET /api/v1/analytics/queue-ops.
function opsChart(name) {
  return windowed("ops-chart", async (from, to) => {
    const a = await api("/api/v1/analytics/queue-ops?" + windowQuery(from, to, { queue: name }));
    return lineChart(from, to, a.bucketMinutes, a.series,
      [["in", "messages in", (r) => r.pushMessages], ["out", "messages out", (r) => r.popMessages]]);
  });
}

// lagChart charts the lag of each consumer group of a queue, in messages
// and in seconds, from Regent's GET /api/v1/analytics/group-lag: each
// bucket shows its largest sample, taken once a minute.
function lagChart(name) {
  return windowed("lag-chart", async (from, to) => {
    const a = await api("/api/v1/analytics/group-lag?" + windowQuery(from, to, { queue: name }));
    if (!a.groups.length) return el("p", { class: "muted" }, "No consumer group's lag was sampled in this window.");
    const rows = new Map();
    for (const r of a.series) {
      if (!rows.has(r.bucket)) rows.set(r.bucket, { bucket: r.bucket, lag: {}, secs: {} });
      rows.get(r.bucket).lag[r.consumerGroup] = r.lag;
      rows.get(r.bucket).secs[r.consumerGroup] = r.lagSeconds;
    }
    const series = (of) => a.groups.map((g, i) => ["s" + (i % 6), g, (r) => r[of][g] || 0]);
    return [el("h3", {}, "Messages behind"), lineChart(from, to, a.bucketMinutes, [...rows.values()], series("lag"), true),
      el("h3", {}, "Seconds behind (the oldest unconsumed message's age)"),
      lineChart(from, to, a.bucketMinutes, [...rows.values()], series("secs"), true)];
  });
}

// cycleChart charts a stream query's cycles, committed and refused, from
// Regent's GET /api/v1/analytics/query-cycles.
function cycleChart(q) {
  return windowed("cycle-chart", async (from, to) => {
    const a = await api("/api/v1/analytics/query-cycles?" + windowQuery(from, to, { queryId: q.query_id }));
    return lineChart(from, to, a.bucketMinutes, a.series,
      [["in", "cycles", (r) => r.cycles], ["bad", "refused", (r) => r.refused]]);
  });
}

// SVG_NS is the SVG namespace, as the HTML parser gives an <svg> element: no
// address appears in the console's files, which load nothing from elsewhere.
const SVG_NS = new DOMParser().parseFromString("<svg></svg>", "text/html").querySelector("svg").namespaceURI;

// lineChart draws each series [class, label, value(row)] of rows keyed by
// bucket over every bucket from from to to: a bucket without a row had no
// traffic (or, for a gauge, no sample), so it is a zero, not a gap. Each
// line carries its values in data-values, and each bucket a title with its
// time and values. The legend gives each series' total, or its peak for a
// gauge, whose values do not add up.
function lineChart(from, to, bucketMinutes, rows, series, gauge) {
  const width = bucketMinutes * 60e3, W = 600, H = 160;
  const byBucket = new Map(rows.map((r) => [Date.parse(r.bucket), r]));
  const buckets = [];
  for (let t = Math.floor(from / width) * width; t <= to; t += width) buckets.push(t);
  const values = series.map(([, , value]) => buckets.map((t) => (byBucket.has(t) ? value(byBucket.get(t)) : 0)));
  const max = Math.max(1, ...values.flat());
  const x = (i) => (buckets.length > 1 ? (i / (buckets.length - 1)) * W : W / 2);
  const y = (v) => H - (v / max) * (H - 4) - 2;
  const svg = (tag, attrs, ...children) => {
    const n = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    n.append(...children);
    return n;
  };
  const chart = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img" },
    ...series.map(([cls], s) => svg("polyline", { class: cls, "data-values": values[s].join(","),
      points: values[s].map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ") })),
    ...buckets.map((t, i) => svg("rect", { class: "hover", x: (x(i) - W / buckets.length / 2).toFixed(1), y: 0,
      width: (W / buckets.length).toFixed(1), height: H },
      svg("title", {}, fmt.time(t) + ": " + series.map(([, label], s) => fmt.num(values[s][i]) + " " + label).join(", ")))));
  const total = (s) => values[s].reduce((a, b) => a + b, 0);
  return el("div", {},
    el("div", { class: "chart-legend" }, series.map(([cls, label], s) =>
      el("span", { class: "key " + cls }, gauge ? label + ": peak " + fmt.num(Math.max(...values[s])) : fmt.num(total(s)) + " " + label)),
      el("span", { class: "muted" }, "per " + (bucketMinutes < 60 ? bucketMinutes + " min" : bucketMinutes / 60 + " h") +
        "; peak " + fmt.num(max))),
    chart,
    el("div", { class: "chart-axis muted" }, el("span", {}, fmt.time(buckets[0])), el("span", {}, fmt.time(to))));
}

// --- routing ---------------------------------------------------------------

function route() {
  banner.hidden = true;
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  let page = "overview", nodes;
  if (parts[0] === "queue" && parts[1] !== undefined) { page = "queue"; nodes = pages.queue(parts[1]); }
  else if (parts[0] === "query" && parts[1] !== undefined) { page = "query"; nodes = pages.query(parts[1]); }
  else if (parts[0] === "dlq") { page = "dlq"; nodes = pages.dlq(params); }
  else if (parts[0] === "messages") { page = "messages"; nodes = pages.messages(params); }
  else nodes = pages.overview();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === page);
  main.replaceChildren(...nodes);
}

async function start() {
  showWho();
  try {
    const h = await api("/health");
    document.getElementById("version").textContent = "Regent " + h.version;
  } catch (e) {
    if (e instanceof Down) { showBanner(e.message); return; }
  }
  route();
}

window.addEventListener("hashchange", route);
document.getElementById("refresh").addEventListener("click", route);
start();
