// The swarm UI: plain JavaScript over the controller's public API, one view per hash route.
// Every request goes to the same origin (the hive-gateway proxies the controller's socket).
"use strict";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
// Live things of the current view (EventSources, timers), closed when the view changes.
let live = [];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
  return node;
}

function state(text, kind = text) {
  return el("span", { class: `state ${kind.split(" ")[0]}` }, text);
}

// A state with what it is the state of: "wanted up", "on its hive running".
function pill(label, text, kind = text) {
  return el("span", { class: "pill" }, el("span", { class: "pill-label" }, label), state(text, kind));
}

// A table; on a narrow screen each row stacks its cells under their headers (app.css).
function table(headers, rows, attrs = {}) {
  if (rows.length === 0) return el("p", { class: "empty" }, "Nothing yet.");
  return el("table", { class: "rows", ...attrs }, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { "data-label": headers[i] || null }, c))))));
}

// What a person reads of an API message: the API's hints for programs (which route to call,
// which variable to set) are left out, they mean nothing in a browser.
function forPeople(message) {
  return String(message)
    .replace(/\s*\((?:see )?(?:GET|POST|PUT|PATCH|DELETE) \/[^)]*\)/g, "")
    .replace(/[;,]?\s*see (?:GET|POST|PUT|PATCH|DELETE) \/\S+/g, "")
    .replace(/\s*\(SWARM_[A-Z0-9_]+[^)]*\)/g, "")
    .replace(/\bSWARM_[A-Z0-9_]+\b/g, "a controller setting");
}

function showError(message) {
  banner.textContent = message ? forPeople(message) : "";
  banner.hidden = !message;
}

// A request to the API; resolves with the parsed JSON, or throws an Error carrying the API's own
// message and the HTTP status.
async function api(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch { value = null; }
  if (!response.ok) {
    const error = new Error(forPeople((value && value.error) || `${response.status} ${response.statusText}`));
    error.status = response.status;
    throw error;
  }
  return value;
}

// Which optional parts this controller runs (asked once): a page leaves out what is not there
// instead of asking for it and showing a refusal.
let configured = null;
async function features() {
  if (!configured) configured = api("GET", "/healthz").then((h) => h.configured || {}, () => ({}));
  return configured;
}

function canCreate(have) {
  return Boolean(have.secret_store && have.nats_dir);
}

// ---- times ----

function agoText(stamp) {
  if (!stamp) return "-";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(stamp)) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} d ago`;
}

function utc(stamp) {
  return `${new Date(stamp).toISOString().replace(".000", "")} (UTC)`;
}

// "12 s ago", kept current by the ticker below; the exact UTC time on hover.
function since(stamp) {
  if (!stamp) return "-";
  return el("time", { datetime: stamp, title: utc(stamp), "data-since": stamp }, agoText(stamp));
}

// An instant in the viewer's time zone, with UTC on hover.
function at(stamp) {
  if (!stamp) return "-";
  const date = new Date(stamp);
  return el("time", { datetime: date.toISOString(), title: utc(stamp) }, date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }));
}

// "in 4 min" for a future instant.
function untilText(date) {
  const seconds = Math.max(0, Math.round((date.getTime() - Date.now()) / 1000));
  if (seconds < 90) return `in ${seconds} s`;
  if (seconds < 5400) return `in ${Math.round(seconds / 60)} min`;
  return `in ${Math.round(seconds / 3600)} h`;
}

setInterval(() => {
  for (const node of document.querySelectorAll("[data-since]")) node.textContent = agoText(node.dataset.since);
  for (const node of document.querySelectorAll("[data-elapsed]")) node.textContent = elapsedText(node.dataset.elapsed);
}, 1000);

function elapsedText(stamp) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(stamp)) / 1000));
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

// ---- agents and hives ----

// What an agent is doing: working, idle, paused, failed, starting, stopped, unknown.
function activity(agent) {
  const actual = agent.actual;
  if (!actual) return "unknown";
  if (actual.actual === "failed") return "failed";
  if (actual.actual === "paused" || (actual.turn && actual.turn.turn === "paused")) return "paused";
  if (actual.actual !== "running") return actual.actual;
  return actual.turn && actual.turn.turn === "working" ? "working" : "idle";
}

// The agent's state as its hive last reported it, saying when that report is old, and the
// wanted state its hive has not applied yet.
function reportedState(agent, hive) {
  const actual = agent.actual ? agent.actual.actual : "unknown";
  const parts = [];
  if (hive && hive.stale) {
    const age = hive.age_secs == null ? "never reported" : `as of ${hive.age_secs} s ago; hive not reporting`;
    parts.push(state(`${actual}, ${age}`, "stale"));
  } else {
    parts.push(state(actual));
  }
  if (agent.actual && agent.actual.wanted !== agent.wanted.state) parts.push(" ", state(`pending: ${agent.wanted.state}`, "pending"));
  return el("span", { class: "reported" }, parts);
}

function hiveLink(name) {
  return el("a", { href: `#/hives/${encodeURIComponent(name)}` }, name);
}

function agentLink(name) {
  return el("a", { href: `#/agents/${encodeURIComponent(name)}` }, name);
}

// An agent's labels as `key=value` chips; with `remove`, each has a button that removes it.
function labelChips(labels, remove) {
  const entries = Object.entries(labels || {});
  if (!entries.length) return "";
  return el("span", { class: "labels" }, entries.map(([k, v]) => el("span", { class: "label-chip", "data-label": `${k}=${v}` }, `${k}=${v}`,
    remove ? el("button", { class: "chip-remove", title: `Remove ${k}`, "aria-label": `Remove label ${k}`, onclick: () => remove(k) }, "×") : "")));
}

// `team=infra tier=gold` (spaces or commas between) as labels; throws saying which word is wrong.
function parseLabels(text) {
  const labels = {};
  for (const word of text.split(/[\s,]+/).filter(Boolean)) {
    const at = word.indexOf("=");
    if (at < 1) throw new Error(`"${word}" is not a label: write key=value, e.g. team=infra`);
    labels[word.slice(0, at)] = word.slice(at + 1);
  }
  return labels;
}

// How a turn ended, as a badge: "succeeded", "failed (exit 3)", "cancelled"...
function outcome(turn) {
  const words = turn.outcome.replace("_", " ");
  return state(turn.outcome === "failed" && turn.exit_code != null ? `${words} (exit ${turn.exit_code})` : words, turn.outcome);
}

function lastTurn(turn) {
  return turn ? el("span", {}, outcome(turn), " ", since(turn.ended_at)) : "-";
}

// Each hive's last status by name. `steady` leaves out the age of a fresh one, which changes
// with every read but is not shown beside its agents.
async function hiveStatuses(steady = false) {
  const statuses = await api("GET", "/api/hives/status");
  return Object.fromEntries(statuses.map((s) => [s.hive, steady && !s.stale ? { ...s, age_secs: null, status: null } : s]));
}

// Schedule ids to names, for turns a schedule started.
async function scheduleNames() {
  try {
    return Object.fromEntries((await api("GET", "/api/schedules")).map((s) => [s.id, s.name]));
  } catch { return {}; }
}

// Who asked for a turn: "schedule nightly", "operator:alice".
function turnSource(source, names) {
  if (source && source.startsWith("schedule:")) {
    const id = source.slice("schedule:".length);
    return `schedule ${names[id] || id}`;
  }
  return source || "";
}

async function setState(agent, wanted) {
  if (wanted === "destroyed") {
    const sure = await confirmTyped(`Destroy ${agent.name}? It is stopped, its state removed and its credentials revoked. This cannot be undone.`, agent.name);
    if (!sure) return;
  }
  const headers = agent.wanted.revision ? { "if-match": String(agent.wanted.revision) } : {};
  try {
    await api("PUT", `/api/hives/${agent.hive}/agents/${agent.name}/state`, { state: wanted }, headers);
    showError("");
  } catch (error) {
    showError(`${agent.name}: ${error.message}`);
  }
  route();
}

function stateButtons(a) {
  const wanted = a.wanted.state;
  return el("span", { class: "buttons" },
    ["up", "paused", "offline"].filter((s) => s !== wanted && wanted !== "destroyed").map((s) =>
      el("button", { "data-agent": a.name, "data-state": s, onclick: () => setState(a, s) }, { up: "Up", paused: "Pause", offline: "Offline" }[s])),
    wanted === "destroyed" ? "" : el("button", { class: "danger", "data-agent": a.name, "data-state": "destroyed", onclick: () => setState(a, "destroyed") }, "Destroy"));
}

// What a list shows of an agent: a redraw happens only when one of these changes.
function listed(agent) {
  const actual = agent.actual && { actual: agent.actual.actual, wanted: agent.actual.wanted, turn: agent.actual.turn && { turn: agent.actual.turn.turn },
    problem: agent.actual.problem, last_exit: agent.actual.last_exit };
  return { name: agent.name, hive: agent.hive, origin: agent.origin, labels: agent.labels || {}, wanted: agent.wanted, actual, last_turn: agent.last_turn };
}

// Each agent's waiting todos, counted (an agent whose queue cannot be read shows "-").
async function queueLengths(agents) {
  const counts = await Promise.all(agents.map((a) => api("GET", `/api/agents/${a.name}/todos`).then((t) => t.filter((x) => x.state === "waiting").length, () => null)));
  return Object.fromEntries(agents.map((a, i) => [a.name, counts[i]]));
}

function agentRows(agents, hives, queues) {
  return agents.map((a) => [el("img", { class: "icon", src: `/api/agents/${a.name}/icon`, alt: "" }),
    el("span", {}, agentLink(a.name), labelChips(a.labels)), hiveLink(a.hive), reportedState(a, hives[a.hive]), state(activity(a)), lastTurn(a.last_turn),
    queues[a.name] == null ? "-" : String(queues[a.name]), stateButtons(a)]);
}

const AGENT_HEADERS = ["", "Agent", "Hive", "State", "Doing", "Last turn", "Queue", ""];

// Loads with `load` every `seconds` while the view is shown and redraws `container` with
// `render` when what was loaded changed (a redraw under the pointer would lose a click); an
// error shows in place; `keyOf` says what of the data counts as a change. Resolves after the
// first draw; its `refresh()` loads again at once.
function poll(seconds, load, render, container, keyOf = JSON.stringify) {
  let stopped = false;
  let timer = null;
  let shown = null;
  let latest = 0;
  const again = async () => {
    const run = ++latest;
    clearTimeout(timer);
    if (stopped) return;
    try {
      const data = await load();
      const key = keyOf(data);
      if (key !== shown && !stopped && run === latest) {
        shown = key;
        container.replaceChildren(...[render(data)].flat());
      }
    } catch (error) {
      shown = null;
      container.replaceChildren(el("p", { class: "empty" }, forPeople(error.message)));
    }
    // Only the latest run keeps the loop going: a refresh does not start a second one.
    if (!stopped && run === latest) timer = setTimeout(again, seconds * 1000);
  };
  live.push(() => { stopped = true; clearTimeout(timer); });
  const first = again();
  first.refresh = again;
  return first;
}

// ---- views ----

async function overviewView() {
  const body = el("div", { id: "overview" });
  const load = async () => {
    const [counts, schedules, graph] = await Promise.all([api("GET", "/api/overview"), api("GET", "/api/schedules"), api("GET", "/api/jobq/graph").catch(() => ({ nodes: [] }))]);
    return { counts, schedules, nodes: graph.nodes };
  };
  await poll(3, load, ({ counts, schedules, nodes }) => {
    const doing = counts.activity;
    const ended = Object.fromEntries(Object.entries(counts.last_turns).map(([outcome, n]) => [outcome.replace("_", " "), n]));
    if (counts.no_turn_yet) ended["no turn yet"] = counts.no_turn_yet;
    const stale = counts.hives_stale;
    const fires = schedules.map((s) => ({ s, next: nextFire(s) })).filter((f) => f.next).sort((a, b) => a.next - b.next).slice(0, 5);
    const failedJobs = nodes.filter((n) => n.state === "failed" || n.state === "blocked").slice(-10);
    return [
      el("div", { class: "cards" },
        card("Agents", "agents-doing", ["working", "idle", "paused", "failed", "starting", "stopped", "unknown"].filter((k) => doing[k] || ["working", "idle", "paused", "failed"].includes(k)).map((k) => [k, doing[k] || 0])),
        card("Last turns", "last-turns", Object.entries(ended)),
        card("Hives", "hives-fresh", [["fresh", counts.hives_fresh], ["stale", stale.length]],
          stale.length ? el("p", { class: "muted" }, "not reporting: ", stale.map((hive, i) => [i ? ", " : "", hiveLink(hive)])) : "")),
      el("h2", {}, "Next fires"),
      table(["When", "Schedule", "Agents"], fires.map(({ s, next }) => [el("span", {}, at(next.toISOString()), ` (${untilText(next)})`), s.name, s.agents.join(", ")]), { id: "next-fires" }),
      el("h2", {}, "Failed turns"),
      table(["Agent", "Result", "Asked by", "Ended"], counts.failed_turns.map((t) => [agentLink(t.agent), outcome(t), t.source, since(t.ended_at)]), { id: "failed-turns" }),
      el("h2", {}, "Failed jobs"),
      table(["Job", "Agent", "State", "Last error"], failedJobs.map((n) => [n.kind, n.agent || "-", state(n.state), n.last_error || ""]), { id: "failed-jobs" }),
    ];
  }, body);
  return [el("h1", {}, "Overview"), body];
}

function countBy(items, key) {
  const counts = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] || 0) + 1;
  return counts;
}

function card(title, id, counts, extra = "") {
  return el("section", { class: "card", id }, el("h2", {}, title),
    el("dl", {}, counts.map(([k, n]) => el("div", { class: `count ${k.split(" ")[0]}`, "data-count": k }, el("dt", {}, k), el("dd", {}, String(n))))), extra);
}

async function hivesView() {
  const [hives, statuses] = await Promise.all([api("GET", "/api/hives"), hiveStatuses()]);
  return [el("h1", {}, "Hives"), table(["Hive", "Description", "Status", "Last report", "Agents", "Load"], hives.map((h) => {
    const s = statuses[h.name] || {};
    const agents = s.status ? Object.keys(s.status.agents || {}).length : "-";
    return [hiveLink(h.name), h.description || "", state(s.status ? (s.stale ? "stale" : "fresh") : "never"),
      s.status ? since(s.status.published_at) : "-", String(agents), s.status ? s.status.load.map((l) => l.toFixed(2)).join(" ") : "-"];
  }))];
}

async function hiveView(name) {
  const hives = await api("GET", "/api/hives");
  const hive = hives.find((h) => h.name === name);
  if (!hive) throw new Error(`There is no hive ${name}.`);
  // The facts change with every report; the agents (and their buttons) only when one of them
  // does, so they are redrawn apart.
  const facts = el("div", { id: "hive" });
  const agents = el("div", { id: "hive-agents" });
  const loadAgents = async () => {
    const [statuses, all] = await Promise.all([hiveStatuses(true), api("GET", `/api/agents?hive=${encodeURIComponent(name)}`)]);
    const own = all.map(listed);
    return { statuses, own, queues: await queueLengths(own) };
  };
  await Promise.all([
    poll(3, hiveStatuses, (statuses) => {
      const s = statuses[name] || {};
      return el("dl", { class: "facts" },
        fact("Status", state(s.status ? (s.stale ? "stale" : "fresh") : "never")),
        fact("Version", s.status ? s.status.version : "-"),
        fact("Load", s.status ? s.status.load.map((l) => l.toFixed(2)).join(" ") : "-"),
        fact("Last report", s.status ? since(s.status.published_at) : "never"),
        fact("Running since", s.status ? at(s.status.started_at) : "-"));
    }, facts),
    poll(3, loadAgents, ({ statuses, own, queues }) => {
      const problems = own.filter((a) => a.actual && (a.actual.problem || a.actual.last_exit));
      return [
        el("dl", { class: "facts" }, fact("Last error", problems.length ? problems.map((a) => el("div", {}, `${a.name}: `, a.actual.problem || exitText(a.actual.last_exit))) : "none")),
        el("h2", {}, "Agents"),
        table(AGENT_HEADERS, agentRows(own, statuses, queues)),
      ];
    }, agents),
  ]);
  return [el("h1", {}, `Hive ${name}`), el("p", { class: "muted" }, hive.description || ""), facts, agents];
}

function exitText(exit) {
  return `${exit.code != null ? `exited with ${exit.code}` : `killed by signal ${exit.signal}`}, ${agoText(exit.at)}`;
}

function fact(term, value) {
  return el("div", {}, el("dt", {}, term), el("dd", {}, value));
}

// Agents a page of the agents list shows unless the address says otherwise.
const AGENT_PAGE = 100;

// The agents list, a page at a time in name order (`#/agents?after=NAME&limit=N&hive=H`): the
// hive is chosen by the controller, the search and the other filters apply to the page shown.
async function agentsView(params) {
  const limit = Math.min(Math.max(Number.parseInt(params.get("limit"), 10) || AGENT_PAGE, 1), 1000);
  const after = params.get("after") || "";
  const hive = params.get("hive") || "";
  // One query for the controller and for the page's own address.
  const pageQuery = (cursor, chosenHive) => new URLSearchParams({ limit, ...(cursor ? { after: cursor } : {}), ...(chosenHive ? { hive: chosenHive } : {}) });
  const pageLink = (cursor, chosenHive = hive) => `#/agents?${pageQuery(cursor, chosenHive)}`;
  const search = el("input", { id: "agent-search", type: "search", placeholder: "name, hive, state, label...", "aria-label": "Search" });
  const hiveFilter = el("select", { id: "agent-hive", "aria-label": "Hive" }, el("option", { value: "" }, "every hive"),
    hive ? el("option", { value: hive }, hive) : "");
  hiveFilter.value = hive;
  hiveFilter.addEventListener("input", () => { location.hash = pageLink("", hiveFilter.value); });
  const stateFilter = el("select", { id: "agent-state", "aria-label": "State" }, el("option", { value: "" }, "every state"),
    ["working", "idle", "paused", "failed", "starting", "stopped", "unknown", "stale", "pending"].map((s) => el("option", { value: s }, s)));
  const labelFilter = el("select", { id: "agent-label", "aria-label": "Label" }, el("option", { value: "" }, "every label"));
  const list = el("div", { id: "agent-list" });
  const pager = el("nav", { id: "agent-pages", class: "pager", "aria-label": "Pages" });
  let latest = null;
  const draw = () => {
    if (!latest) return;
    const { agents, hives, queues } = latest;
    const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const shown = agents.filter((a) => {
      const tags = [activity(a), a.actual ? a.actual.actual : "unknown", a.wanted.state];
      if (hives[a.hive] && hives[a.hive].stale) tags.push("stale");
      if (a.actual && a.actual.wanted !== a.wanted.state) tags.push("pending");
      const labels = Object.entries(a.labels).map(([k, v]) => `${k}=${v}`);
      const haystack = [a.name, a.hive, a.origin, ...tags, ...labels].join(" ").toLowerCase();
      return words.every((w) => haystack.includes(w)) && (!stateFilter.value || tags.includes(stateFilter.value))
        && (!labelFilter.value || labels.includes(labelFilter.value));
    });
    list.replaceChildren(table(AGENT_HEADERS, agentRows(shown, hives, queues)));
    // A full page may have more after it; a shorter one is the last.
    const last = agents.length === limit ? agents[agents.length - 1].name : null;
    pager.replaceChildren(
      after ? el("a", { href: pageLink(""), id: "first-page" }, "First page") : "",
      agents.length ? el("span", { class: "muted" }, `${agents[0].name} to ${agents[agents.length - 1].name}`) : "",
      last ? el("a", { href: pageLink(last), id: "next-page" }, "Next page") : "",
      after || last ? el("span", { class: "muted" }, "search and filters apply to this page") : "");
  };
  for (const input of [search, stateFilter, labelFilter]) input.addEventListener("input", draw);
  const load = async () => {
    const [agents, hives] = await Promise.all([api("GET", `/api/agents?${pageQuery(after, hive)}`), hiveStatuses(true)]);
    return { agents: agents.map(listed), hives, queues: await queueLengths(agents) };
  };
  const problems = el("div", {});
  await poll(3, load, (data) => {
    latest = data;
    const known = new Set([...hiveFilter.options].map((o) => o.value));
    for (const name of Object.keys(data.hives)) if (!known.has(name)) hiveFilter.append(el("option", { value: name }, name));
    const knownLabels = new Set([...labelFilter.options].map((o) => o.value));
    const labels = new Set(data.agents.flatMap((a) => Object.entries(a.labels).map(([k, v]) => `${k}=${v}`)));
    for (const label of [...labels].sort()) if (!knownLabels.has(label)) labelFilter.append(el("option", { value: label }, label));
    draw();
    return [];
  }, problems);
  return [el("h1", {}, "Agents"), el("div", { class: "filters" }, search, hiveFilter, stateFilter, labelFilter), list, pager, problems];
}

// The prompt box and the queue (shown above the terminal) and the turn history (below it) of one
// agent.
function workSections(name, names) {
  const queue = el("div", { id: "queue" });
  const turns = el("div", { id: "turns" });
  const shown = el("pre", { id: "turn-output", class: "terminal", hidden: true });
  const waiting = poll(2, () => api("GET", `/api/agents/${name}/todos`), (todos) =>
    table(["Todo", "State", "Asked by", "Queued", "Prompt", ""], todos.map((t) => [t.id, state(t.state), turnSource(t.source, names),
      since(new Date(Date.now() - t.age_seconds * 1000).toISOString()), t.preview,
      t.state === "waiting" ? el("button", { class: "danger", onclick: async () => {
        try { await api("DELETE", `/api/agents/${name}/todos/${encodeURIComponent(t.id)}`); showError(""); } catch (error) { showError(error.message); }
        waiting.refresh();
      } }, "Remove") : ""])), queue,
  // Its age grows with every read; the page's ticker keeps it current, so it is no change.
  (todos) => JSON.stringify(todos.map(({ age_seconds: _, ...rest }) => rest)));
  const history = poll(2, () => api("GET", `/api/agents/${name}/turns?limit=20`), (page) =>
    table(["Started", "Asked by", "Result", "Took", ""], page.turns.map((t) => [since(t.started_at),
      t.schedule_name ? `schedule ${t.schedule_name}` : turnSource(t.source, names), outcome(t), `${(t.duration_ms / 1000).toFixed(1)} s`,
      el("button", { onclick: () => { shown.hidden = false; shown.textContent = `${t.prompt}\n---\n${t.output}`; } }, "Output")])), turns);
  const refresh = () => { waiting.refresh(); history.refresh(); };
  const form = el("form", { class: "stack", id: "prompt-form", onsubmit: async (event) => {
    event.preventDefault();
    const body = new FormData(form).get("body");
    try {
      const queued = await api("POST", `/api/agents/${name}/todos`, { body });
      showError("");
      form.reset();
      form.querySelector("output").textContent = `queued ${queued.id}`;
      refresh();
    } catch (error) { showError(`${name}: ${error.message}`); }
  } },
  el("label", {}, "Prompt", el("textarea", { name: "body", required: true, rows: 3, placeholder: "e.g. summarise yesterday's failed builds" })),
  el("span", {}, el("button", { type: "submit" }, "Send"), " ", el("output", { class: "muted" })));
  return { above: [el("h2", {}, "Prompt now"), form, el("h2", {}, "Queue"), queue], below: [el("h2", {}, "Turns"), turns, shown] };
}

function follow(path, onEvent, name) {
  const source = new EventSource(path);
  source.addEventListener(name, (event) => onEvent(JSON.parse(event.data)));
  live.push(() => source.close());
  return source;
}

// The icon, which uploads a new one when clicked.
function iconUpload(name) {
  const input = el("input", { type: "file", accept: "image/png", id: "icon-file", class: "visually-hidden", onchange: async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    const response = await fetch(`/api/agents/${name}/icon`, { method: "PUT", headers: { "content-type": "image/png" }, body: file });
    if (!response.ok) showError((await response.json()).error); else route();
  } });
  return el("label", { class: "icon-upload", title: "Upload a PNG icon (at most 256 KiB)" },
    el("img", { class: "icon big", src: `/api/agents/${name}/icon?${Date.now()}`, alt: `${name}'s icon; click to upload another` }), input);
}

// The terminal: live output with a line between turns, following the end unless told not to,
// and downloadable as text.
function terminalSection(name) {
  const terminal = el("pre", { id: "terminal", class: "terminal", "data-follow": "on" });
  const decoder = new TextDecoder();
  const followButton = el("button", { id: "follow", type: "button", onclick: () => {
    const on = terminal.dataset.follow !== "on";
    terminal.dataset.follow = on ? "on" : "off";
    followButton.textContent = on ? "Stop following" : "Follow";
    if (on) terminal.scrollTop = terminal.scrollHeight;
  } }, "Stop following");
  const download = el("a", { id: "download", class: "button", href: "#", download: `${name}-terminal.txt`, onclick: () => {
    if (download.href.startsWith("blob:")) URL.revokeObjectURL(download.href);
    download.href = URL.createObjectURL(new Blob([terminal.textContent], { type: "text/plain" }));
  } }, "Download");
  follow(`/api/agents/${name}/terminal`, (chunk) => {
    const text = chunk.text !== undefined ? chunk.text : decoder.decode(Uint8Array.from(atob(chunk.bytes), (c) => c.charCodeAt(0)));
    terminal.append(text);
    if (terminal.dataset.follow === "on") terminal.scrollTop = terminal.scrollHeight;
  }, "term");
  let lastTurn = null;
  const separate = (label, stamp) => {
    if (terminal.textContent && !terminal.textContent.endsWith("\n")) terminal.append("\n");
    terminal.append(el("span", { class: "turn-separator" }, `── ${label} · ${new Date(stamp).toLocaleTimeString()} ──\n`));
  };
  return {
    terminal,
    controls: el("p", { class: "buttons" }, followButton, " ", download),
    // Called with each turn header: a new turn starts a new section.
    onTurn: (header, label) => {
      if (header.state === "working" && header.todo_id && header.todo_id !== lastTurn) {
        if (lastTurn !== null || terminal.textContent) separate(label, header.started_at || Date.now());
        lastTurn = header.todo_id;
      }
    },
  };
}

async function agentView(name) {
  const one = api("GET", `/api/agents/${encodeURIComponent(name)}`).catch((error) => { if (error.status === 404) return null; throw error; });
  const [agent, hives, names] = await Promise.all([one, hiveStatuses(), scheduleNames()]);
  if (!agent) throw new Error(`There is no agent ${name}.`);
  const have = await features();
  const header = el("p", { id: "turn-header", class: "muted" }, "waiting for the turn header...");
  const cancel = async () => {
    try { await api("POST", `/api/agents/${name}/turn/cancel`); showError(""); } catch (error) { showError(`${name}: ${error.message}`); }
  };
  const term = terminalSection(name);
  const showHeader = (h) => {
    const who = turnSource(h.source, names);
    term.onTurn(h, who);
    header.replaceChildren(state(h.state), " ",
      ...(h.state === "working" ? [`${who} (${h.todo_id}), for `, el("span", { "data-elapsed": h.started_at, id: "turn-elapsed" }, elapsedText(h.started_at)), " ",
        el("button", { class: "danger", id: "cancel-turn", onclick: cancel }, "Cancel turn")] : []));
  };
  // Headers are shown in their order; one from a schedule made after the page was opened waits
  // for its name to be looked up.
  let shown = Promise.resolve();
  follow(`/api/agents/${name}/turn`, (h) => {
    shown = shown.then(async () => {
      const id = h.source && h.source.startsWith("schedule:") ? h.source.slice("schedule:".length) : null;
      if (id && !names[id]) Object.assign(names, await scheduleNames());
      showHeader(h);
    });
  }, "turn");
  const work = workSections(name, names);
  const sections = [
    el("div", { class: "agent-head" }, iconUpload(name), el("div", {}, el("h1", {}, name),
      el("p", { id: "agent-states" }, pill("wanted", agent.wanted.state), " ", pill("on its hive", agent.actual ? agent.actual.actual : "unknown"), " ", reportedStale(agent, hives[agent.hive])),
      el("p", { class: "muted" }, "on ", hiveLink(agent.hive), `, ${agent.origin}`), labelEditor(agent))),
    el("p", {}, stateButtons(agent)),
    el("h2", {}, "Turn"), header,
    ...work.above,
    el("h2", {}, "Terminal"), term.controls, term.terminal,
    ...work.below,
  ];
  if (agent.origin === "created" && canCreate(have)) {
    sections.push(await optional("Linked accounts", async () => {
      const accounts = await api("GET", `/api/hives/${agent.hive}/agents/${name}/linked-accounts`);
      return table(["Kind", "Name", "Host", "User", ""], accounts.map((a) => [a.kind, a.name, a.host, a.user, a.own ? "own" : "linked"]));
    }));
  }
  sections.push(await optional("Config pull request", async () => {
    const pr = (await api("GET", "/api/config-prs")).find((p) => p.agent === name);
    if (!pr) return el("p", { class: "empty" }, "No config pull request.");
    return el("p", {}, el("a", { href: pr.url }, `#${pr.number} ${pr.title}`), " ", state(pr.state), pr.mergeable === false ? " conflicts" : "");
  }));
  return sections;
}

// The agent's labels, each removable, and a box adding `key=value` ones: one merge patch each.
function labelEditor(agent) {
  const chips = el("span", { id: "agent-labels" });
  const change = async (patch) => {
    try {
      const answer = await api("PATCH", `/api/agents/${agent.name}/labels`, patch);
      draw(answer.labels);
      showError("");
      return true;
    } catch (error) {
      showError(`${agent.name}: ${error.message}`);
      return false;
    }
  };
  const draw = (labels) => chips.replaceChildren(labelChips(labels, (key) => change({ [key]: null })) || el("span", { class: "muted" }, "no labels"));
  draw(agent.labels);
  const input = el("input", { id: "label-input", placeholder: "team=infra", "aria-label": "Add labels", size: 14 });
  const form = el("form", { class: "inline", id: "label-form", onsubmit: async (event) => {
    event.preventDefault();
    let labels;
    try { labels = parseLabels(input.value); } catch (error) { showError(error.message); return; }
    if (Object.keys(labels).length && await change(labels)) input.value = "";
  } }, input, el("button", { type: "submit" }, "Add label"));
  return el("p", { class: "agent-labels" }, "Labels: ", chips, " ", form);
}

// Says so when the agent's hive has stopped reporting (its states above are its last report),
// and when its hive has not applied the wanted state yet.
function reportedStale(agent, hive) {
  const notes = [];
  if (hive && hive.stale) notes.push(state(hive.age_secs == null ? "hive never reported" : `as of ${hive.age_secs} s ago; hive not reporting`, "stale"));
  if (agent.actual && agent.actual.wanted !== agent.wanted.state) notes.push(state(`pending: ${agent.wanted.state}`, "pending"));
  return notes;
}

// A section whose feature this controller may not have: it says so rather than breaking the page.
async function optional(title, load) {
  const section = el("section", {}, el("h2", {}, title));
  try {
    section.append(await load());
  } catch (error) {
    section.append(el("p", { class: "empty" }, `Not available here: ${error.message}`));
  }
  return section;
}

function confirmTyped(text, word) {
  const dialog = document.getElementById("confirm");
  const input = document.getElementById("confirm-input");
  const ok = document.getElementById("confirm-ok");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-word").textContent = word || "";
  document.getElementById("confirm-typed").hidden = !word;
  input.value = "";
  ok.disabled = Boolean(word);
  input.oninput = () => { ok.disabled = input.value !== word; };
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok" && (!word || input.value === word));
    dialog.returnValue = "";
    dialog.showModal();
    (word ? input : ok).focus();
  });
}

// ---- the job graph ----

const SVG = "http://www.w3.org/2000/svg";
// A node's box and the room around it, in SVG units.
const NODE = { width: 200, height: 46, across: 240, down: 58 };
// A group whose jobs all succeeded (or were skipped) this long ago is folded to one line.
const FOLD_AFTER_MS = 10 * 60 * 1000;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

// Each job's column: how many dependencies deep it is within its group.
function depths(nodes, edges) {
  const ids = new Set(nodes.map((n) => n.id));
  const from = {};
  for (const e of edges) if (ids.has(e.from) && ids.has(e.to)) (from[e.to] = from[e.to] || []).push(e.from);
  const depth = {};
  const of = (id, seen = new Set()) => {
    if (depth[id] !== undefined) return depth[id];
    if (seen.has(id)) return 0;
    seen.add(id);
    depth[id] = Math.max(-1, ...(from[id] || []).map((f) => of(f, seen))) + 1;
    return depth[id];
  };
  for (const n of nodes) of(n.id);
  return depth;
}

// One group's jobs drawn left to right by dependency, each edge an arrow from a dependency
// to the job waiting on it; a failed job has its Retry button beside the drawing.
function drawGroup(nodes, edges, onRetry) {
  const depth = depths(nodes, edges);
  const rows = {};
  const place = {};
  for (const n of nodes) {
    const column = depth[n.id];
    rows[column] = (rows[column] || 0) + 1;
    place[n.id] = { x: column * NODE.across + 4, y: (rows[column] - 1) * NODE.down + 4 };
  }
  const width = (Math.max(...Object.keys(rows).map(Number)) + 1) * NODE.across;
  const height = Math.max(...Object.values(rows)) * NODE.down + 4;
  const picture = svg("svg", { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))));
  for (const e of edges) {
    const a = place[e.from];
    const b = place[e.to];
    if (!a || !b) continue;
    const [x1, y1, x2, y2] = [a.x + NODE.width, a.y + NODE.height / 2, b.x, b.y + NODE.height / 2];
    const bend = (x2 - x1) / 2;
    picture.append(svg("path", { class: "edge", d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
  }
  for (const n of nodes) {
    const { x, y } = place[n.id];
    const title = svg("title");
    const why = n.state === "skipped" ? "\nnothing to do: its system is not configured on this controller" : (n.last_error ? `\n${n.last_error}` : "");
    title.textContent = `${n.id}: ${n.state}${n.attempts ? `, ${n.attempts} attempt(s)` : ""}${why}`;
    const kind = svg("text", { x: x + 10, y: y + 19, class: "kind" });
    kind.textContent = n.kind.length > 26 ? `${n.kind.slice(0, 25)}…` : n.kind;
    const words = svg("text", { x: x + 10, y: y + 36, class: "words" });
    words.textContent = n.state + (n.attempts > 1 ? ` · ${n.attempts} attempts` : "");
    picture.append(svg("g", { class: `node ${n.state}`, "data-job": n.id }, title,
      svg("rect", { x, y, width: NODE.width, height: NODE.height, rx: 8 }), kind, words));
  }
  const failed = nodes.filter((n) => n.state === "failed");
  return [el("div", { class: "scroll" }, picture),
    failed.map((n) => el("p", { class: "job-error" }, state("failed"), ` ${n.kind}: ${n.last_error || "no error recorded"} `,
      el("button", { class: "retry", "data-job": n.id, onclick: () => onRetry(n) }, "Retry")))];
}

// The graph by agent (jobs for no agent last); an agent's graph whose every job succeeded (or
// was skipped) a while ago is folded to one line, so the page stays short however long the controller runs.
function graphView(graph, onRetry) {
  if (graph.nodes.length === 0) return el("p", { class: "empty" }, "No jobs.");
  const groups = {};
  for (const n of graph.nodes) (groups[n.agent || ""] = groups[n.agent || ""] || []).push(n);
  const names = Object.keys(groups).sort((a, b) => (a === "") - (b === "") || a.localeCompare(b));
  return el("div", { class: "job-graph" }, names.map((name) => {
    const nodes = groups[name];
    const done = nodes.every((n) => ["succeeded", "skipped"].includes(n.state) && n.finished_at && Date.now() - Date.parse(n.finished_at) > FOLD_AFTER_MS);
    const ended = nodes.map((n) => n.finished_at).filter(Boolean).sort().pop();
    const summary = el("summary", {}, el("b", {}, name || "not for an agent"), ` · ${nodes.length} job${nodes.length === 1 ? "" : "s"} · `,
      Object.entries(countBy(nodes, (n) => n.state)).map(([k, c]) => [state(`${c} ${k}`, k), " "]), done && ended ? ["all done ", since(ended)] : "");
    return el("details", { class: "job-group", "data-agent": name, open: !done }, summary, drawGroup(nodes, graph.edges, onRetry));
  }));
}

// Redraws `container` with the graph every second while the view is shown.
function liveGraph(path, container) {
  const retry = async (n) => {
    try { await api("POST", `/api/jobq/jobs/${encodeURIComponent(n.id)}/retry`); showError(""); } catch (error) { showError(`${n.kind}: ${error.message}`); }
  };
  // The generation changes with every change of the graph: an unchanged one is not redrawn.
  poll(1, () => api("GET", path), (graph) => graphView(graph, retry), container);
}

// What a successful create says: the agent starts paused, and where to find it.
function createdNotice(name, hive) {
  return el("p", { id: "created", class: "notice" }, "Created ", agentLink(name), ` on ${hive}. It starts paused: once its jobs below have finished, open its page and press Up.`);
}

async function createView() {
  const [hives, have] = await Promise.all([api("GET", "/api/hives"), features()]);
  const able = canCreate(have);
  const graph = el("div", { id: "create-graph" });
  const result = el("div", {}, able ? "" : el("p", { id: "create-unavailable", class: "empty" },
    "This controller cannot create agents: it was started without a secret store or without its NATS signing keys (the setup guide says how to give it both). Agents declared on a hive work without them."));
  const form = el("form", { class: "stack", id: "create-form", onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    try {
      const request = { name: data.get("name"), hive: data.get("hive"), spec: { turn_command: data.get("turn_command") } };
      const labels = parseLabels(data.get("labels") || "");
      if (Object.keys(labels).length) request.labels = labels;
      const created = await api("POST", "/api/agents", request);
      showError("");
      result.replaceChildren(createdNotice(data.get("name"), data.get("hive")));
      liveGraph(created.graph, graph);
    } catch (error) {
      showError(error.message);
    }
  } },
  // Chromium compiles a pattern with the `v` flag, where a `-` in a class must be escaped.
  el("label", {}, "Name", el("input", { name: "name", required: true, pattern: "[a-z][a-z0-9\\-]{0,31}", title: "lowercase letters, digits and -, starting with a letter, at most 32", placeholder: "e.g. gamma" })),
  el("label", {}, "Hive", el("select", { name: "hive" }, hives.map((h) => el("option", { value: h.name }, h.name)))),
  el("label", {}, "Turn command", el("input", { name: "turn_command", required: true, placeholder: "e.g. claude -p" }),
    el("small", {}, "Required: the command each turn runs, with the prompt on its standard input.")),
  el("label", {}, "Labels", el("input", { name: "labels", placeholder: "e.g. team=infra tier=gold" }),
    el("small", {}, "Optional: key=value pairs, to find and group agents.")),
  el("button", { type: "submit", disabled: !able }, "Create"));
  return [el("h1", {}, "Create an agent"), result, form, el("h2", {}, "Its jobs"), graph];
}

async function jobsView() {
  const container = el("div", {});
  liveGraph("/api/jobq/graph", container);
  return [el("h1", {}, "Jobs"), container];
}

// ---- schedules ----

// An interval as the CLI writes it: 90s, 30m, 1h, 1d.
function every(seconds) {
  if (!seconds) return "once";
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (seconds % size === 0) return `${seconds / size}${unit}`;
  return `${seconds}s`;
}

// The CLI's interval syntax ("90s", "30m", "1h30m", "1d") in seconds; throws saying what is wrong.
function parseEvery(text) {
  const units = { s: 1, m: 60, h: 3600, d: 86400 };
  const parts = [...text.trim().matchAll(/(\d+)\s*([smhd])/g)];
  if (!parts.length || parts.map((p) => p[0]).join("") !== text.trim().replace(/\s+/g, "")) {
    throw new Error(`"${text}" is not an interval: write e.g. 90s, 30m, 1h or 1d`);
  }
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * units[unit], 0);
}

// When the schedule fires next, as the controller computed it (calendars in their zone's rules).
function nextFire(schedule) {
  return schedule.next_fire ? new Date(schedule.next_fire) : null;
}

// A one-shot whose time has passed has fired: it is done, not "up".
function isDone(schedule) {
  return !schedule.interval && !schedule.calendar && Date.parse(schedule.anchor) <= Date.now();
}

function stamp(date) {
  return date.toISOString().replace(/\.\d+Z$/, "Z");
}

// A datetime-local value (the viewer's zone) for an instant.
function localInput(stampText) {
  const date = new Date(stampText);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

function scheduleForm(roster, editing, done) {
  const kind = editing ? (editing.calendar ? "calendar" : editing.interval ? "every" : "once") : "once";
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const form = el("form", { class: "stack", id: "schedule-form", "data-editing": editing ? editing.id : null, onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const agents = data.getAll("agents");
    try {
      if (!agents.length) throw new Error("Pick at least one agent.");
      const timing = data.get("kind");
      const anchor = data.get("anchor") ? stamp(new Date(data.get("anchor"))) : stamp(new Date(Date.now() + 5000));
      const body = { name: data.get("name"), agents, body: data.get("body"), anchor,
        interval: timing === "every" ? parseEvery(data.get("every")) : null,
        calendar: timing === "calendar" ? data.get("calendar").trim() : null,
        tz: timing === "calendar" ? (data.get("tz").trim() || "UTC") : null };
      if (editing) await api("PATCH", `/api/schedules/${editing.id}`, body, { "if-match": String(editing.revision) });
      else await api("POST", "/api/schedules", { ...body, paused: false });
      showError("");
      done();
    } catch (error) { showError(error.message); }
  } },
  el("label", {}, "Name", el("input", { name: "name", required: true, value: editing ? editing.name : null })),
  el("fieldset", { id: "schedule-agents" }, el("legend", {}, "Agents"), roster.map((a) => el("label", { class: "check" },
    el("input", { type: "checkbox", name: "agents", value: a.name, checked: editing ? editing.agents.includes(a.name) : false }), a.name))),
  el("label", {}, "Prompt", el("textarea", { name: "body", required: true, rows: 3 }, editing ? editing.body : "")),
  el("fieldset", { class: "timing" }, el("legend", {}, "When"),
    ["once", "every", "calendar"].map((k) => el("label", { class: "check" }, el("input", { type: "radio", name: "kind", value: k, checked: k === kind }),
      { once: "once", every: "every interval", calendar: "calendar" }[k])),
    el("label", {}, "First fire (your time zone; empty: in 5 seconds)", el("input", { name: "anchor", type: "datetime-local", value: editing ? localInput(editing.anchor) : null })),
    el("label", {}, "Interval (like 90s, 30m, 1h, 1d)", el("input", { name: "every", placeholder: "e.g. 1h", value: editing && editing.interval ? every(editing.interval) : null })),
    el("label", {}, "Calendar (cron: minute hour day month weekday, or @daily)", el("input", { name: "calendar", placeholder: "e.g. 0 9 * * 1-5", value: editing ? editing.calendar : null })),
    el("label", {}, "Time zone of the calendar", el("input", { name: "tz", list: "zones", placeholder: "UTC", value: editing ? editing.tz : null }),
      el("datalist", { id: "zones" }, zones.map((z) => el("option", { value: z }))))),
  el("span", { class: "buttons" }, el("button", { type: "submit" }, editing ? "Save" : "Add schedule"), " ",
    editing ? el("button", { type: "button", onclick: done }, "Cancel") : ""));
  return form;
}

async function schedulesView() {
  const roster = await api("GET", "/api/agents");
  const editor = el("div", { id: "schedule-editor" }, el("h2", {}, "Add"), scheduleForm(roster, null, route));
  const change = async (s, patch) => {
    try {
      if (patch === null) await api("DELETE", `/api/schedules/${s.id}`, undefined, { "if-match": String(s.revision) });
      else await api("PATCH", `/api/schedules/${s.id}`, patch, { "if-match": String(s.revision) });
      showError("");
    } catch (error) { showError(`${s.name}: ${error.message}`); }
    route();
  };
  const row = (s) => {
    const next = nextFire(s);
    const timing = s.calendar ? `${s.calendar} (${s.tz || "UTC"})` : s.interval ? `every ${every(s.interval)}` : el("span", {}, "once at ", at(s.anchor));
    return [s.name, s.agents.join(", "), timing, next ? at(next.toISOString()) : "-",
      state(s.done ? "done" : s.paused ? "paused" : "up"),
      el("span", { class: "buttons", "data-schedule": s.name },
        s.done ? "" : el("button", { onclick: () => change(s, { paused: !s.paused }) }, s.paused ? "Resume" : "Pause"), " ",
        el("button", { class: "edit", onclick: () => { editor.replaceChildren(el("h2", {}, `Edit ${s.name}`), scheduleForm(roster, s, route)); editor.scrollIntoView(); } }, "Edit"), " ",
        el("button", { class: "danger remove", onclick: async () => {
          if (await confirmTyped(`Remove the schedule ${s.name}? It fires no more.`)) change(s, null);
        } }, "Remove"))];
  };
  const list = el("div", { id: "schedule-list" });
  // A one-shot turns done when its time passes: that is part of what is compared.
  const load = async () => (await api("GET", "/api/schedules")).map((s) => ({ ...s, done: isDone(s) }));
  await poll(3, load, (schedules) => table(["Name", "Agents", "When", "Next fire", "State", ""], schedules.map(row), { id: "schedules" }), list);
  return [el("h1", {}, "Schedules"), list,
    el("p", { class: "muted" }, "Times are in your time zone; hover one for UTC."), editor];
}

// ---- forge and links ----

async function configPrsView() {
  return [el("h1", {}, "Config pull requests"), await optional("Open and recent", async () => {
    const prs = await api("GET", "/api/config-prs");
    return table(["Agent", "PR", "State", "Mergeable", "Updated"], prs.map((p) =>
      [p.agent, el("a", { href: p.url }, `#${p.number} ${p.title}`), state(p.state), p.mergeable == null ? "-" : (p.mergeable ? "yes" : "conflicts"), since(p.updated)]));
  })];
}

async function issuesView() {
  return [el("h1", {}, "Issues"), await optional("Open across the organisation", async () => {
    const report = await api("GET", "/api/issues");
    if (!report.repos.length) return el("p", { class: "empty" }, "No open issue.");
    return el("div", {}, report.repos.map((r) => el("section", {}, el("h2", {}, `${r.repo} (${r.total})`),
      Object.entries(r.labels).map(([label, issues]) => el("div", {}, el("p", { class: "muted" }, label || "no label"),
        el("ul", {}, issues.map((i) => el("li", {}, el("a", { href: i.url }, `#${i.number} ${i.title}`), " ", since(i.updated)))))))));
  })];
}

async function linksView() {
  const links = await api("GET", "/api/quick-links");
  if (!links.length) return [el("h1", {}, "Links"), el("p", { class: "empty" }, "No quick links are configured; the controller's quick links file lists them.")];
  return [el("h1", {}, "Links"), el("div", { class: "links" }, links.map((l) => el("a", { href: l.url, rel: "noopener" }, l.title, l.description ? el("span", { class: "muted" }, ` - ${l.description}`) : "")))];
}

const views = { overview: overviewView, hives: hivesView, agents: agentsView, create: createView, jobs: jobsView, schedules: schedulesView, "config-prs": configPrsView, issues: issuesView, links: linksView };
const pages = { hives: hiveView, agents: agentView };

async function route() {
  for (const stop of live) stop();
  live = [];
  if (route.shown !== location.hash) showError("");
  route.shown = location.hash;
  // Set again once the new view is drawn: whoever waits for a view waits for this.
  delete main.dataset.view;
  // `#/view/arg?key=value`: the query holds what a view pages by (the agents list's cursor).
  const [path, query = ""] = location.hash.split("?");
  const [, view = "overview", arg] = path.split("/");
  const known = views[view] ? view : "overview";
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("here", link.getAttribute("href") === `#/${known}`);
  document.getElementById("nav").classList.remove("open");
  try {
    const content = arg && pages[known] ? await pages[known](decodeURIComponent(arg)) : await views[known](new URLSearchParams(query));
    main.replaceChildren(...content);
    main.dataset.view = arg ? `${known}/item` : known;
  } catch (error) {
    main.replaceChildren(el("h1", {}, "Unavailable"), el("p", { class: "empty" }, forPeople(error.message)));
  }
}

document.getElementById("menu").addEventListener("click", () => document.getElementById("nav").classList.toggle("open"));
window.addEventListener("hashchange", route);
route();
