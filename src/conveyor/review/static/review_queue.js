// The review page's queue: the page of items waiting for a person, drawn as rows narrow enough
// for the run's tab, the cursor, the selection for bulk decisions, and refilling the page after a
// decision.
"use strict";

(function (P) {
  const { PAGE_SIZE, state, syncUrl } = P;
  const { $, el, clear, api, formatAge, formatTime, cardValue, statusNode, plain, claimText } = window.ConveyorKit;

  // -- the queue ------------------------------------------------------------------------------

  async function loadQueue(keepCursor) {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(state.offset) });
    if (state.workflow) q.set("workflow", state.workflow);
    if (state.status) q.set("status", state.status);
    if (state.runId) q.set("run_id", state.runId);
    const summary = $("queue-summary");
    try {
      const page = await api("queue?" + q.toString());
      state.loadedAt = Date.now();
      // A page asked for before a decision landed may still hold the item: leave it out.
      const fresh = page.items.filter((i) => !state.decided.has(i.item_id));
      page.total -= page.items.length - fresh.length;
      page.items = fresh;
      state.page = page;
      state.items = fresh;
      renderWorkflows(page.workflows);
      state.compact = false;  // this page's columns may fit where the last page's did not
      renderQueue();
      const index = state.items.findIndex((i) => i.item_id === state.current);
      if (index >= 0) moveCursor(index);
      else if ((!state.current || state.fromList) && state.items.length) {
        P.openAt(keepCursor === false ? 0 : Math.min(Math.max(state.cursor, 0), state.items.length - 1));
      } else moveCursor(-1);
    } catch (err) {
      summary.textContent = "Could not load the queue: " + err.message;
      summary.className = "error";
    }
  }

  function renderWorkflows(workflows) {
    const select = $("filter-workflow");
    while (select.options.length > 1) select.remove(1);
    const names = workflows.slice();
    if (state.workflow && names.indexOf(state.workflow) < 0) names.push(state.workflow);
    for (const name of names) {
      const option = el("option", name);
      option.value = name;
      select.appendChild(option);
    }
    select.value = state.workflow;
  }

  // The columns: the context the run tab already shows (workflow, run) is left out. One row per item,
  // narrow enough for the run's tab: the item (key, status, age, claim), its workflow's card fields
  // (one column each when the page holds one workflow, label/value pairs otherwise), and why it waits
  // (the checks in plain words, the model's long answers, the confidence). A column that can be empty
  // says how to tell (filled); one empty on every row of the page is left out, so it takes no width
  // from the others (quarantined rows have no model category or confidence, for one).
  const hasValue = (field) => Boolean(field) && field.value !== null && field.value !== undefined && field.value !== "";
  function columns() {
    const workflows = new Set(state.items.map((i) => i.workflow));
    const single = Boolean(state.workflow) || workflows.size <= 1;
    const cols = [{ head: "", cls: "pick" }, { head: "Item", cls: "key" }];
    if (single && !state.compact) {
      const first = state.items.find((i) => i.card && i.card.length);
      for (const [n, field] of ((first && first.card) || []).entries()) {
        if (field.kind === "long") continue;
        const numeric = ["amount", "number", "percent"].indexOf(field.kind) >= 0;
        cols.push({ head: field.label, cls: numeric ? "num" : "", card: n, filled: (item) => hasValue((item.card || [])[n]) });
      }
    } else {
      cols.push({ head: "Card", cls: "card", card: "all", filled: (item) => (item.card || []).some(hasValue) });
    }
    cols.push({ head: "Why it waits", cls: "checks" });
    return { cols: cols.filter((c) => !c.filled || state.items.some(c.filled)), single };
  }

  function renderQueue() {
    const { cols, single } = columns();
    $("queue").classList.toggle("compact", state.compact);
    const headRow = $("queue").tHead.rows[0];
    clear(headRow);
    for (const c of cols) headRow.appendChild(el("th", c.head, c.cls === "num" ? "num" : ""));
    const body = $("queue").tBodies[0];
    clear(body);
    state.items.forEach((item, index) => body.appendChild(queueRow(item, index, cols, single)));
    // Too wide for its panel (the run's tab beside Airflow's grid, a narrow window): one column per
    // card field would push "Why it waits" out of sight, so the card fields share one column.
    if (!state.compact && $("queue").scrollWidth > $("queue-panel").clientWidth + 1) {
      state.compact = true;
      renderQueue();
      return;
    }
    const page = state.page;
    const last = page.offset + page.items.length;
    const summary = $("queue-summary");
    summary.className = "";
    summary.textContent = page.total === 0
      ? "Nothing waits for a person" + (state.workflow ? " in " + state.workflow : "") + "."
      : page.total + " waiting";
    $("page-info").textContent = page.total ? (page.offset + 1) + "-" + last + " of " + page.total : "";
    $("prev").disabled = page.offset === 0;
    $("next").disabled = last >= page.total;
    renderBulk();
  }

  function queueRow(item, index, cols, single) {
    const row = document.createElement("tr");
    row.dataset.itemId = item.item_id;
    row.dataset.index = String(index);
    if (state.picked.has(item.item_id)) row.classList.add("picked");
    for (const c of cols) {
      const td = el("td", null, c.cls);
      if (c.cls === "pick") {
        const box = document.createElement("input");
        box.type = "checkbox";
        box.checked = state.picked.has(item.item_id);
        box.tabIndex = -1;
        box.setAttribute("aria-label", "select " + item.item_id);
        box.addEventListener("click", (e) => { e.stopPropagation(); togglePick(item.item_id); });
        td.appendChild(box);
      } else if (c.cls === "key") {
        td.appendChild(el("b", item.business_key));
        const where = [state.workflow ? null : item.workflow, state.runId ? null : "run " + item.run_id].filter(Boolean);
        if (where.length) {
          const small = el("small", where.join(" · "), "where");
          small.title = where.join("\n");
          td.appendChild(small);
        }
        // Every row keeps the claim's line, empty when nobody holds it: a claim that lands with a refill
        // (the item just opened) never makes its row taller and moves the rows below under the pointer.
        const mark = item.claim ? el("span", claimText(item.claim), "claim" + (item.claim.mine ? " mine" : ""))
          : el("span", "\u00a0", "claim none");
        if (!item.claim) mark.setAttribute("aria-hidden", "true");
        td.appendChild(mark);
      } else if (c.card === "all") {
        const pairs = el("div", null, "card-pairs");
        for (const field of item.card || []) {
          if (field.kind === "long" || !hasValue(field)) continue;  // an empty pair says nothing
          const pair = el("span", null, "pair");
          pair.append(el("span", field.label, "muted"), document.createTextNode(" "), cardValue(field));
          pairs.appendChild(pair);
        }
        td.appendChild(pairs);
        for (const field of item.card || []) {
          if (field.kind === "long" && field.value) td.appendChild(el("div", field.label + ": " + field.value, "long"));
        }
      } else if (c.card !== undefined) {
        const field = (item.card || [])[c.card];
        if (field) td.appendChild(cardValue(field));
      } else if (c.cls === "checks") {
        const line = el("div", null, "state");
        line.append(statusNode(item.status), document.createTextNode(" · waiting "));
        const age = el("span", formatAge(item.age_seconds), "age");
        age.dataset.age = String(item.age_seconds);
        age.title = "waiting since " + formatTime(item.waiting_since);
        line.appendChild(age);
        td.appendChild(line);
        const checks = item.checks && item.checks.length ? item.checks : [item.reason || ""];
        for (const text of checks) td.appendChild(el("div", plain(text)));
        if (single && !state.compact) {
          for (const field of item.card || []) {
            if (field.kind === "long" && field.value) td.appendChild(el("div", field.label + ": " + field.value, "long"));
          }
        }
      }
      row.appendChild(td);
    }
    // By the row's item, not its position then: the page may have refilled since it was drawn.
    row.addEventListener("click", () => P.openAt(state.items.findIndex((i) => i.item_id === item.item_id)));
    return row;
  }

  function tickAges() {
    const elapsed = (Date.now() - state.loadedAt) / 1000;
    for (const cell of document.querySelectorAll("#queue .age")) cell.textContent = formatAge(Number(cell.dataset.age) + elapsed);
  }

  function moveCursor(index) {
    state.cursor = index;
    for (const row of $("queue").tBodies[0].rows) row.classList.toggle("cursor", Number(row.dataset.index) === index);
    const row = $("queue").tBodies[0].rows[index];
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  function dropItem(itemId) {
    const i = state.items.findIndex((x) => x.item_id === itemId);
    if (i < 0) return;
    state.items.splice(i, 1);
    state.page.total = Math.max(0, state.page.total - 1);
    state.page.items = state.items;
    renderQueue();
  }

  function showEmpty() {
    state.current = null;
    syncUrl();
    $("item-body").hidden = true;
    $("item-empty").hidden = false;
    $("item-empty").textContent = "Nothing left on this page.";
  }

  let refillTimer = null;
  function scheduleRefill() {
    // Refill the page from the server once the reviewer pauses (or the page runs low).
    window.clearTimeout(refillTimer);
    refillTimer = window.setTimeout(() => loadQueue(), state.items.length < 5 ? 0 : 4000);
  }

  // -- bulk -----------------------------------------------------------------------------------

  function togglePick(itemId) {
    state.allMatching = false;
    if (state.picked.has(itemId)) state.picked.delete(itemId); else state.picked.add(itemId);
    const row = $("queue").querySelector("tr[data-item-id='" + CSS.escape(itemId) + "']");
    if (row) { row.classList.toggle("picked", state.picked.has(itemId)); row.querySelector("input").checked = state.picked.has(itemId); }
    renderBulk();
  }

  function renderBulk() {
    const n = state.allMatching ? (state.page ? state.page.total : 0) : state.picked.size;
    $("bulk-count").textContent = state.allMatching ? "All " + n + " matching this filter" : n ? n + " selected" : "Nothing selected";
    for (const id of ["bulk-approve", "bulk-reject", "bulk-clear"]) $(id).disabled = n === 0;
    $("select-all-matching").disabled = !state.page || state.page.total === 0 || state.allMatching;
  }

  Object.assign(P, {
    loadQueue, tickAges, renderQueue, moveCursor, dropItem, showEmpty, scheduleRefill, togglePick, renderBulk,
    hasValue,
  });
})(window.ConveyorPage);
