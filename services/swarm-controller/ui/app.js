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
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
  return node;
}

function state(text) {
  return el("span", { class: `state ${text}` }, text);
}

function table(headers, rows) {
  if (rows.length === 0) return el("p", { class: "empty" }, "Nothing yet.");
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))));
}

function showError(message) {
  banner.textContent = message;
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
    const error = new Error((value && value.error) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return value;
}

// A section whose feature this controller may not have (no forge, no secret store): it says so
// rather than breaking the page.
async function optional(title, load) {
  const section = el("section", {}, el("h2", {}, title));
  try {
    section.append(await load());
  } catch (error) {
    section.append(el("p", { class: "empty" }, `Not available here: ${error.message}`));
  }
  return section;
}

function ago(stamp) {
  if (!stamp) return "-";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(stamp)) / 1000));
  if (seconds < 90) return `${seconds}s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)}m ago`;
  return `${Math.round(seconds / 3600)}h ago`;
}

function confirmTyped(text, word) {
  const dialog = document.getElementById("confirm");
  const input = document.getElementById("confirm-input");
  const ok = document.getElementById("confirm-ok");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-word").textContent = word;
  input.value = "";
  ok.disabled = true;
  input.oninput = () => { ok.disabled = input.value !== word; };
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok" && input.value === word);
    dialog.showModal();
    input.focus();
  });
}

// ---- views ----

async function hivesView() {
  const [hives, statuses] = await Promise.all([api("GET", "/api/hives"), api("GET", "/api/hives/status")]);
  const byName = Object.fromEntries(statuses.map((s) => [s.hive, s]));
  return [el("h1", {}, "Hives"), table(["Hive", "Description", "Status", "Age", "Agents", "Load"], hives.map((h) => {
    const s = byName[h.name] || {};
    const agents = s.status ? Object.keys(s.status.agents || {}).length : "-";
    return [h.name, h.description || "", state(s.status ? (s.stale ? "stale" : "fresh") : "never"),
      s.age_secs == null ? "-" : `${s.age_secs}s`, String(agents), s.status ? s.status.load.map((l) => l.toFixed(2)).join(" ") : "-"];
  }))];
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

async function agentsView() {
  const agents = await api("GET", "/api/agents");
  const rows = agents.map((a) => {
    const wanted = a.wanted.state;
    const actual = a.actual ? a.actual.actual : "unknown";
    const controls = el("span", {},
      ["up", "paused", "offline"].filter((s) => s !== wanted && wanted !== "destroyed").map((s) =>
        el("button", { "data-agent": a.name, "data-state": s, onclick: () => setState(a, s) }, { up: "Up", paused: "Pause", offline: "Offline" }[s])),
      wanted === "destroyed" ? "" : el("button", { class: "danger", "data-agent": a.name, "data-state": "destroyed", onclick: () => setState(a, "destroyed") }, "Destroy"));
    return [el("img", { class: "icon", src: `/api/agents/${a.name}/icon`, alt: "" }),
      el("a", { href: `#/agents/${a.name}` }, a.name), a.hive, a.origin, state(wanted), state(actual), lastTurn(a.last_turn), controls];
  });
  return [el("h1", {}, "Agents"), table(["", "Agent", "Hive", "Origin", "Wanted", "Actual", "Last turn", ""], rows)];
}

// How a turn ended, as a badge: "succeeded", "failed (exit 3)", "cancelled"...
function outcome(turn) {
  const words = turn.outcome.replace("_", " ");
  return state(turn.outcome === "failed" && turn.exit_code != null ? `${words} (exit ${turn.exit_code})` : words);
}

function lastTurn(turn) {
  return turn ? el("span", {}, outcome(turn), ` ${ago(turn.ended_at)}`) : "-";
}

// The prompt box and the queue (shown above the terminal) and the turn history (below it) of one
// agent.
function workSections(name) {
  const queue = el("div", { id: "queue" });
  const turns = el("div", { id: "turns" });
  const shown = el("pre", { id: "turn-output", class: "terminal", hidden: true });
  const refresh = async () => {
    try {
      const [waiting, page] = await Promise.all([api("GET", `/api/agents/${name}/todos`), api("GET", `/api/agents/${name}/turns?limit=20`)]);
      queue.replaceChildren(table(["Todo", "State", "Source", "Age", "Prompt", ""], waiting.map((t) => [t.id, state(t.state), t.source, `${t.age_seconds}s`, t.preview,
        t.state === "waiting" ? el("button", { class: "danger", onclick: async () => {
          try { await api("DELETE", `/api/agents/${name}/todos/${encodeURIComponent(t.id)}`); showError(""); } catch (error) { showError(error.message); }
          refresh();
        } }, "Remove") : ""])));
      turns.replaceChildren(table(["Started", "Todo", "Source", "Result", "Took", ""], page.turns.map((t) => [ago(t.started_at), t.todo_id,
        t.schedule_name ? `schedule ${t.schedule_name}` : t.source, outcome(t), `${(t.duration_ms / 1000).toFixed(1)}s`,
        el("button", { onclick: () => { shown.hidden = false; shown.textContent = `${t.prompt}\n---\n${t.output}`; } }, "Output")])));
    } catch (error) {
      queue.replaceChildren(el("p", { class: "empty" }, error.message));
    }
  };
  const poll = setInterval(refresh, 2000);
  live.push(() => clearInterval(poll));
  refresh();
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
  el("label", {}, "Prompt", el("textarea", { name: "body", required: true, rows: 3, placeholder: "what the agent should do now" })),
  el("span", {}, el("button", { type: "submit" }, "Send"), " ", el("output", { class: "muted" })));
  return { above: [el("h2", {}, "Prompt now"), form, el("h2", {}, "Queue"), queue], below: [el("h2", {}, "Turns"), turns, shown] };
}

function follow(path, onEvent, name) {
  const source = new EventSource(path);
  source.addEventListener(name, (event) => onEvent(JSON.parse(event.data)));
  live.push(() => source.close());
  return source;
}

async function agentView(name) {
  const agents = await api("GET", "/api/agents");
  const agent = agents.find((a) => a.name === name);
  if (!agent) throw new Error(`no agent ${name}`);
  const header = el("p", { id: "turn-header", class: "muted" }, "waiting for the turn header...");
  const terminal = el("pre", { id: "terminal", class: "terminal" });
  const decoder = new TextDecoder();
  const cancel = async () => {
    try { await api("POST", `/api/agents/${name}/turn/cancel`); showError(""); } catch (error) { showError(`${name}: ${error.message}`); }
  };
  follow(`/api/agents/${name}/turn`, (h) => {
    header.replaceChildren(state(h.state), " ", h.todo_id ? `${h.todo_id} (${h.source}), started ${ago(h.started_at)}` : "",
      h.state === "working" ? el("button", { class: "danger", id: "cancel-turn", onclick: cancel }, "Cancel turn") : "");
  }, "turn");
  follow(`/api/agents/${name}/terminal`, (chunk) => {
    const text = chunk.text !== undefined ? chunk.text : decoder.decode(Uint8Array.from(atob(chunk.bytes), (c) => c.charCodeAt(0)));
    const atBottom = terminal.scrollTop + terminal.clientHeight >= terminal.scrollHeight - 4;
    terminal.append(text);
    if (atBottom) terminal.scrollTop = terminal.scrollHeight;
  }, "term");
  const work = workSections(name);
  const upload = el("input", { type: "file", accept: "image/png", onchange: async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    const response = await fetch(`/api/agents/${name}/icon`, { method: "PUT", headers: { "content-type": "image/png" }, body: file });
    if (!response.ok) showError((await response.json()).error); else route();
  } });
  return [
    el("h1", {}, el("img", { class: "icon", src: `/api/agents/${name}/icon?${Date.now()}`, alt: "" }), ` ${name} `, state(agent.wanted.state), " ", state(agent.actual ? agent.actual.actual : "unknown")),
    el("p", { class: "muted" }, `on ${agent.hive}, ${agent.origin}`, " · icon ", upload),
    el("h2", {}, "Turn"), header,
    ...work.above,
    el("h2", {}, "Terminal"), terminal,
    ...work.below,
    await optional("Linked accounts", async () => {
      const accounts = await api("GET", `/api/hives/${agent.hive}/agents/${name}/linked-accounts`);
      return table(["Kind", "Name", "Host", "User", ""], accounts.map((a) => [a.kind, a.name, a.host, a.user, a.own ? "own" : "linked"]));
    }),
    await optional("Config pull request", async () => {
      try {
        const pr = await api("GET", `/api/agents/${name}/config-pr`);
        return el("p", {}, el("a", { href: pr.url }, `#${pr.number} ${pr.title}`), " ", state(pr.state), pr.mergeable === false ? " conflicts" : "");
      } catch (error) {
        if (error.status === 404) return el("p", { class: "empty" }, "No config pull request.");
        throw error;
      }
    }),
  ];
}

function graphTable(graph) {
  return table(["Job", "Kind", "Agent", "State", "Attempts", "Last error"], graph.nodes.map((n) =>
    [n.id, n.kind, n.agent || "-", state(n.state), String(n.attempts), n.last_error || ""]));
}

// Redraws `container` with the graph every second while the view is shown.
function liveGraph(path, container) {
  let stopped = false;
  const draw = async () => {
    if (stopped) return;
    try { container.replaceChildren(graphTable(await api("GET", path))); } catch (error) { container.replaceChildren(el("p", { class: "empty" }, error.message)); }
    timer = setTimeout(draw, 1000);
  };
  let timer = setTimeout(draw, 0);
  live.push(() => { stopped = true; clearTimeout(timer); });
}

async function createView() {
  const hives = await api("GET", "/api/hives");
  const graph = el("div", { id: "create-graph" });
  const form = el("form", { class: "stack", id: "create-form", onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    try {
      const created = await api("POST", "/api/agents", { name: data.get("name"), hive: data.get("hive"), spec: { turn_command: data.get("turn_command") } });
      showError("");
      liveGraph(created.graph, graph);
    } catch (error) {
      showError(error.message);
    }
  } },
  el("label", {}, "Name", el("input", { name: "name", required: true, pattern: "[a-z][a-z0-9\\-]{0,31}", placeholder: "gamma" })),
  el("label", {}, "Hive", el("select", { name: "hive" }, hives.map((h) => el("option", { value: h.name }, h.name)))),
  el("label", {}, "Turn command", el("input", { name: "turn_command", required: true, placeholder: "claude -p" })),
  el("button", { type: "submit" }, "Create"));
  return [el("h1", {}, "Create an agent"), form, el("h2", {}, "Its jobs"), graph];
}

async function jobsView() {
  const container = el("div", {});
  liveGraph("/api/jobq/graph", container);
  return [el("h1", {}, "Jobs"), container];
}

function every(seconds) {
  if (!seconds) return "once";
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (seconds % size === 0) return `every ${seconds / size}${unit}`;
  return `every ${seconds}s`;
}

function nextFire(schedule) {
  const anchor = Date.parse(schedule.anchor);
  const now = Date.now();
  if (now < anchor) return new Date(anchor);
  if (!schedule.interval) return null;
  const step = schedule.interval * 1000;
  return new Date(anchor + (Math.floor((now - anchor) / step) + 1) * step);
}

async function schedulesView() {
  const schedules = await api("GET", "/api/schedules");
  const change = async (s, patch) => {
    try {
      if (patch === null) await api("DELETE", `/api/schedules/${s.id}`, undefined, { "if-match": String(s.revision) });
      else await api("PATCH", `/api/schedules/${s.id}`, patch, { "if-match": String(s.revision) });
      showError("");
    } catch (error) { showError(`${s.name}: ${error.message}`); }
    route();
  };
  const rows = schedules.map((s) => {
    // A calendar's next fire needs its zone's rules: swarmctl schedule show lists them.
    const next = s.paused || s.calendar ? null : nextFire(s);
    const timing = s.calendar ? `${s.calendar} (${s.tz || "UTC"})` : every(s.interval);
    return [s.name, s.agents.join(", "), timing, next ? next.toISOString().replace(".000", "") : "-", state(s.paused ? "paused" : "up"),
      el("span", {},
        el("button", { onclick: () => change(s, { paused: !s.paused }) }, s.paused ? "Resume" : "Pause"), " ",
        el("button", { onclick: () => { const body = prompt(`New prompt for ${s.name}`, s.body); if (body !== null) change(s, { body }); } }, "Edit"), " ",
        el("button", { class: "danger", onclick: () => change(s, null) }, "Remove"))];
  });
  const form = el("form", { class: "stack", id: "schedule-form", onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const seconds = Number(data.get("every") || 0);
    const anchor = data.get("anchor") ? new Date(data.get("anchor")).toISOString().replace(/\.\d+Z$/, "Z") : new Date(Date.now() + 5000).toISOString().replace(/\.\d+Z$/, "Z");
    try {
      await api("POST", "/api/schedules", { name: data.get("name"), agents: data.get("agents").split(",").map((a) => a.trim()).filter(Boolean), body: data.get("body"), anchor, interval: seconds > 0 ? seconds : null, paused: false });
      showError("");
      route();
    } catch (error) { showError(error.message); }
  } },
  el("label", {}, "Name", el("input", { name: "name", required: true })),
  el("label", {}, "Agents (comma separated)", el("input", { name: "agents", required: true })),
  el("label", {}, "Prompt", el("textarea", { name: "body", required: true, rows: 3 })),
  el("label", {}, "First fire (empty: in 5 seconds)", el("input", { name: "anchor", type: "datetime-local" })),
  el("label", {}, "Every (seconds; empty: once)", el("input", { name: "every", type: "number", min: 1 })),
  el("button", { type: "submit" }, "Add schedule"));
  return [el("h1", {}, "Schedules"), table(["Name", "Agents", "Interval", "Next fire", "State", ""], rows), el("h2", {}, "Add"), form];
}

async function configPrsView() {
  return [el("h1", {}, "Config pull requests"), await optional("Open and recent", async () => {
    const prs = await api("GET", "/api/config-prs");
    return table(["Agent", "PR", "State", "Mergeable", "Updated"], prs.map((p) =>
      [p.agent, el("a", { href: p.url }, `#${p.number} ${p.title}`), state(p.state), p.mergeable == null ? "-" : (p.mergeable ? "yes" : "conflicts"), ago(p.updated)]));
  })];
}

async function issuesView() {
  return [el("h1", {}, "Issues"), await optional("Open across the organisation", async () => {
    const report = await api("GET", "/api/issues");
    if (!report.repos.length) return el("p", { class: "empty" }, "No open issue.");
    return el("div", {}, report.repos.map((r) => el("section", {}, el("h2", {}, `${r.repo} (${r.total})`),
      Object.entries(r.labels).map(([label, issues]) => el("div", {}, el("p", { class: "muted" }, label || "no label"),
        el("ul", {}, issues.map((i) => el("li", {}, el("a", { href: i.url }, `#${i.number} ${i.title}`), ` ${ago(i.updated)}`))))))));
  })];
}

async function linksView() {
  const links = await api("GET", "/api/quick-links");
  if (!links.length) return [el("h1", {}, "Links"), el("p", { class: "empty" }, "No quick links are configured (SWARM_QUICK_LINKS_FILE).")];
  return [el("h1", {}, "Links"), el("div", { class: "links" }, links.map((l) => el("a", { href: l.url, rel: "noopener" }, l.title, l.description ? el("span", { class: "muted" }, ` - ${l.description}`) : "")))];
}

const views = { hives: hivesView, agents: agentsView, create: createView, jobs: jobsView, schedules: schedulesView, "config-prs": configPrsView, issues: issuesView, links: linksView };

async function route() {
  for (const stop of live) stop();
  live = [];
  if (route.shown !== location.hash) showError("");
  route.shown = location.hash;
  const [, view = "agents", arg] = location.hash.split("/");
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("here", link.getAttribute("href") === `#/${view}`);
  try {
    const content = view === "agents" && arg ? await agentView(decodeURIComponent(arg)) : await (views[view] || agentsView)();
    main.replaceChildren(...content);
    main.dataset.view = view;
  } catch (error) {
    main.replaceChildren(el("h1", {}, "Unavailable"), el("p", { class: "empty" }, error.message));
  }
}

window.addEventListener("hashchange", route);
route();
