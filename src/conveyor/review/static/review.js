// Conveyor review queue page. Every value from the ledger is rendered with textContent: a payload
// holding markup shows as text and never runs. The page calls ../api/review/* with the Airflow UI's
// session cookie; decisions are POSTed as JSON.
"use strict";

(function () {
  const API = "../api/review/";
  const PAGE_SIZE = 50;
  const params = new URLSearchParams(window.location.search);
  const state = {
    workflow: params.get("workflow") || "",
    status: params.get("status") || "",
    runId: params.get("run_id") || "",
    offset: 0,
    selected: params.get("item") || null,
    loadedAt: Date.now(),
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  class ApiError extends Error {
    constructor(status, detail) {
      const message = typeof detail === "string" ? detail : (detail && detail.message) || JSON.stringify(detail);
      super(message);
      this.status = status;
      this.detail = detail;
    }
  }

  async function api(path, options) {
    const response = await fetch(API + path, Object.assign({ credentials: "same-origin", headers: { Accept: "application/json" } }, options || {}));
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      if (response.status === 401) throw new ApiError(401, "Your Airflow session has ended: log in to Airflow again.");
      throw new ApiError(response.status, body && body.detail !== undefined ? body.detail : response.statusText);
    }
    return body;
  }

  function formatAge(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m";
    return s + "s";
  }

  function formatTime(iso) {
    if (!iso) return "";
    const t = new Date(iso);
    return isNaN(t.getTime()) ? String(iso) : t.toLocaleString();
  }

  function formatJson(value) {
    if (value === null || value === undefined) return "(none)";
    return JSON.stringify(value, null, 2);
  }

  function statusCell(status) {
    return el("span", status, "status status-" + String(status).replace(/[^a-z_]/g, ""));
  }

  function syncUrl() {
    const q = new URLSearchParams();
    if (state.workflow) q.set("workflow", state.workflow);
    if (state.status) q.set("status", state.status);
    if (state.runId) q.set("run_id", state.runId);
    if (state.selected) q.set("item", state.selected);
    const query = q.toString();
    window.history.replaceState(null, "", query ? "?" + query : window.location.pathname);
  }

  // -- the queue ----------------------------------------------------------------------------

  async function loadQueue() {
    const summary = $("queue-summary");
    const q = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(state.offset) });
    if (state.workflow) q.set("workflow", state.workflow);
    if (state.status) q.set("status", state.status);
    if (state.runId) q.set("run_id", state.runId);
    summary.className = "";
    try {
      const page = await api("queue?" + q.toString());
      state.loadedAt = Date.now();
      renderWorkflows(page.workflows);
      renderQueue(page);
    } catch (err) {
      summary.textContent = "Could not load the queue: " + err.message;
      summary.className = "error";
      clear($("queue").tBodies[0]);
    }
  }

  function renderWorkflows(workflows) {
    const select = $("filter-workflow");
    const keep = state.workflow;
    while (select.options.length > 1) select.remove(1);
    const names = workflows.slice();
    if (keep && names.indexOf(keep) < 0) names.push(keep);
    for (const name of names) {
      const option = el("option", name);
      option.value = name;
      select.appendChild(option);
    }
    select.value = keep;
  }

  function renderQueue(page) {
    const body = $("queue").tBodies[0];
    clear(body);
    for (const item of page.items) {
      const row = document.createElement("tr");
      row.dataset.itemId = item.item_id;
      if (item.item_id === state.selected) row.className = "selected";
      row.appendChild(el("td", item.item_id));
      row.appendChild(el("td", item.workflow));
      row.appendChild(el("td", item.run_id));
      const status = el("td");
      status.appendChild(statusCell(item.status));
      row.appendChild(status);
      row.appendChild(el("td", item.priority));
      row.appendChild(el("td", item.confidence === null ? "" : Number(item.confidence).toFixed(2)));
      row.appendChild(el("td", item.reason || ""));
      const age = el("td", formatAge(item.age_seconds), "age");
      age.dataset.age = String(item.age_seconds);
      age.title = "waiting since " + formatTime(item.waiting_since);
      row.appendChild(age);
      row.addEventListener("click", () => openItem(item.item_id));
      body.appendChild(row);
    }
    const first = page.total === 0 ? 0 : page.offset + 1;
    const last = page.offset + page.items.length;
    $("queue-summary").textContent = page.total === 0
      ? "Nothing waits for a person" + (state.workflow ? " in " + state.workflow : "") + "."
      : page.total + " item(s) waiting for a person.";
    $("page-info").textContent = page.total ? first + "-" + last + " of " + page.total : "";
    $("prev").disabled = page.offset === 0;
    $("next").disabled = last >= page.total;
  }

  function tickAges() {
    const elapsed = (Date.now() - state.loadedAt) / 1000;
    for (const cell of document.querySelectorAll("#queue td.age")) {
      cell.textContent = formatAge(Number(cell.dataset.age) + elapsed);
    }
  }

  // -- one item -----------------------------------------------------------------------------

  async function openItem(itemId) {
    state.selected = itemId;
    syncUrl();
    for (const row of $("queue").tBodies[0].rows) {
      row.className = row.dataset.itemId === itemId ? "selected" : "";
    }
    const panel = $("item-panel");
    panel.hidden = false;
    $("decision-result").textContent = "";
    $("decision-result").className = "";
    try {
      const view = await api("items/" + encodeURIComponent(itemId));
      renderItem(view);
    } catch (err) {
      $("item-title").textContent = itemId;
      clear($("item-fields"));
      $("item-payload").textContent = "";
      $("item-ai").textContent = "";
      clear($("history").tBodies[0]);
      $("decision").hidden = true;
      $("decision-result").textContent = err.status === 404 ? "No such item in the ledger." : err.message;
      $("decision-result").className = "error";
    }
  }

  function renderItem(view) {
    const item = view.item;
    $("item-title").textContent = item.item_id;
    const fields = $("item-fields");
    clear(fields);
    const rows = [
      ["Status", item.status],
      ["Workflow", item.workflow],
      ["Business key", item.business_key],
      ["Run", item.run_id],
      ["Reason", item.reason],
      ["Confidence", item.confidence === null ? null : Number(item.confidence).toFixed(3)],
      ["Priority", item.priority],
      ["Approval moves it to", view.approve_to],
      ["Last error", item.last_error],
      ["Attempts", item.attempts],
      ["Last change", formatTime(item.updated_at)],
    ];
    if (view.last_decision) {
      rows.push(["Last decision", view.last_decision.actor + " (" + view.last_decision.to_status + ", " + formatTime(view.last_decision.at) + ")"]);
    }
    for (const [name, value] of rows) {
      if (value === null || value === undefined || value === "") continue;
      fields.appendChild(el("dt", name));
      const dd = el("dd");
      if (name === "Status") dd.appendChild(statusCell(value));
      else dd.textContent = String(value);
      fields.appendChild(dd);
    }
    $("item-payload").textContent = formatJson(item.payload);
    $("item-ai").textContent = formatJson(item.ai_result);

    const history = $("history").tBodies[0];
    clear(history);
    for (const record of view.history) {
      const row = document.createElement("tr");
      row.appendChild(el("td", formatTime(record.at)));
      row.appendChild(el("td", record.from_status || "(new)"));
      row.appendChild(el("td", record.to_status));
      row.appendChild(el("td", record.actor));
      row.appendChild(el("td", record.reason || ""));
      history.appendChild(row);
    }

    const decision = $("decision");
    decision.hidden = !view.can_decide;
    const canCorrect = view.can_decide && view.actions.indexOf("correct") >= 0;
    $("correct").hidden = !canCorrect;
    $("correction").hidden = !canCorrect;
    if (canCorrect) $("corrected-payload").value = JSON.stringify(item.payload, null, 2);
    $("approve").title = view.approve_to ? "moves the item to " + view.approve_to : "";
    if (!view.awaiting_review) {
      $("decision-result").textContent = "This item is not awaiting review (it is " + item.status + ").";
    } else if (!view.can_decide) {
      $("decision-result").textContent = "You may read this item but not decide on it.";
    }
  }

  async function decide(action) {
    const itemId = state.selected;
    if (!itemId) return;
    const result = $("decision-result");
    const body = { action: action, comment: $("comment").value || null };
    if (action === "correct") {
      try {
        body.payload = JSON.parse($("corrected-payload").value);
      } catch (e) {
        result.textContent = "The corrected payload is not valid JSON: " + e.message;
        result.className = "error";
        return;
      }
    }
    for (const id of ["approve", "reject", "correct"]) $(id).disabled = true;
    try {
      const done = await api("items/" + encodeURIComponent(itemId) + "/decision", {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      $("comment").value = "";
      await openItem(itemId);
      result.textContent = "Decision recorded: " + done.item_id + " is now " + done.to_status + " (by " + done.actor + ").";
      result.className = "ok";
    } catch (err) {
      await openItem(itemId);
      if (err.status === 409) result.textContent = "Not applied: " + err.message;
      else if (err.status === 403) result.textContent = "You may not decide on items of this DAG.";
      else result.textContent = "Not applied: " + err.message;
      result.className = "error";
    } finally {
      for (const id of ["approve", "reject", "correct"]) $(id).disabled = false;
      loadQueue();
    }
  }

  // -- search ---------------------------------------------------------------------------------

  async function search(text) {
    const box = $("search-result");
    clear(box);
    box.hidden = false;
    const query = text.trim();
    if (!query) {
      box.hidden = true;
      return;
    }
    try {
      const found = await api("search?" + new URLSearchParams({ q: query }).toString());
      if (!found.items.length) {
        box.appendChild(el("p", "No item " + query + " in the ledger (or not in a workflow you may read).", "error"));
        return;
      }
      const list = el("ul");
      for (const item of found.items) {
        const entry = el("li");
        const link = el("a", item.item_id);
        link.href = "#";
        link.addEventListener("click", (event) => {
          event.preventDefault();
          openItem(item.item_id);
        });
        entry.appendChild(link);
        entry.appendChild(document.createTextNode(" is "));
        entry.appendChild(statusCell(item.status));
        entry.appendChild(document.createTextNode(" in run " + item.run_id + ", since " + formatTime(item.updated_at)));
        list.appendChild(entry);
      }
      box.appendChild(list);
      if (found.items.length === 1) openItem(found.items[0].item_id);
    } catch (err) {
      box.appendChild(el("p", "Search failed: " + err.message, "error"));
    }
  }

  // -- wiring ---------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("filter-status").value = state.status;
    $("filter-run").value = state.runId;
    $("filters").addEventListener("submit", (event) => {
      event.preventDefault();
      state.workflow = $("filter-workflow").value;
      state.status = $("filter-status").value;
      state.runId = $("filter-run").value.trim();
      state.offset = 0;
      syncUrl();
      loadQueue();
    });
    $("filter-workflow").addEventListener("change", () => $("filters").requestSubmit());
    $("filter-status").addEventListener("change", () => $("filters").requestSubmit());
    $("refresh").addEventListener("click", () => loadQueue());
    $("prev").addEventListener("click", () => {
      state.offset = Math.max(0, state.offset - PAGE_SIZE);
      loadQueue();
    });
    $("next").addEventListener("click", () => {
      state.offset += PAGE_SIZE;
      loadQueue();
    });
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      search($("search").value);
    });
    $("approve").addEventListener("click", () => decide("approve"));
    $("reject").addEventListener("click", () => decide("reject"));
    $("correct").addEventListener("click", () => decide("correct"));
    loadQueue();
    if (state.selected) openItem(state.selected);
    window.setInterval(tickAges, 15000);
    window.setInterval(loadQueue, 60000);
  });
})();
