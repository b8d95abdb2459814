// Conveyor review queue page. Every value from the ledger is rendered with textContent: a payload
// holding markup shows as text and never runs. The page calls ../api/review/* with the Airflow UI's
// session cookie; decisions are POSTed as JSON.
//
// Working the queue: j/k move, a approves, r rejects (asks why), e edits, x selects, A/R decide the
// selection, ? shows the keys. After a decision the next item opens (already fetched in advance).
// window.__conveyorReview.decisions records, per decision, the milliseconds from the key press to the
// next item shown (bench/review_page.py reads it).
"use strict";

(function () {
  const PAGE_SIZE = 50;
  const params = new URLSearchParams(window.location.search);
  const state = {
    workflow: params.get("workflow") || "",
    status: params.get("status") || "",
    runId: params.get("run_id") || "",
    offset: 0,
    page: null,
    items: [],
    cursor: -1,
    current: null,
    views: new Map(),
    picked: new Set(),
    allMatching: false,
    loadedAt: Date.now(),
    busy: false,
    fromList: false,
    decided: new Set(),
    canDecide: new Map(),
    compact: false,  // the card fields in one column: the page is too narrow for one column each
  };
  const metrics = { decisions: [], errors: 0 };
  window.__conveyorReview = metrics;
  const inRun = Boolean(state.workflow && state.runId);
  const { $, el, clear, api, post, itemPath, formatAge, formatTime, shortTime, clock, formatJson, cardValue,
    statusWords, statusOf, statusNode, plain, claimText } = window.ConveyorKit;
  const { ask: askReason, remember: rememberReason, wire: wireReasons } = window.ConveyorReasons;

  function syncUrl() {
    const q = new URLSearchParams();
    if (state.workflow) q.set("workflow", state.workflow);
    if (state.status) q.set("status", state.status);
    if (state.runId) q.set("run_id", state.runId);
    if (state.current) q.set("item", state.current);
    window.history.replaceState(null, "", q.toString() ? "?" + q.toString() : window.location.pathname);
  }

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
        openAt(keepCursor === false ? 0 : Math.min(Math.max(state.cursor, 0), state.items.length - 1));
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
        if (item.claim) td.appendChild(el("span", claimText(item.claim), "claim" + (item.claim.mine ? " mine" : "")));
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
    row.addEventListener("click", () => openAt(state.items.findIndex((i) => i.item_id === item.item_id)));
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

  // -- one item -------------------------------------------------------------------------------

  function fetchView(itemId) {
    if (!state.views.has(itemId)) {
      const loading = Promise.all([
        api(itemPath(itemId)),
        api("source/" + encodeURIComponent(itemId)).catch(() => ({ findings: [] })),
      ]).then(([view, source]) => Object.assign(view, { source: source.findings || [] }));
      loading.catch(() => state.views.delete(itemId));
      state.views.set(itemId, loading);
    }
    return state.views.get(itemId);
  }

  function prefetch(index) {
    const next = state.items[index];
    if (next) fetchView(next.item_id).catch(() => {});
  }

  // Opening an item paints it at once from its queue row (card, checks, payload, model output), then
  // completes it (history, source row, what the user may do) from the item's own answer, usually
  // fetched in advance. The returned promise settles at the first paint.
  function openAt(index) {
    if (index < 0 || index >= state.items.length) return Promise.resolve();
    moveCursor(index);
    const shown = openItem(state.items[index].item_id, true);
    prefetch(index + 1);
    return shown;
  }

  function openItem(itemId, fromList) {
    state.current = itemId;
    state.fromList = Boolean(fromList);
    syncUrl();
    $("item-empty").hidden = true;
    $("item-body").hidden = false;
    $("editor").hidden = true;
    $("claim-note").hidden = true;
    const listed = state.items.find((i) => i.item_id === itemId);
    if (listed) {
      renderItem({
        item: listed, history: null, source: null, awaiting_review: true, approve_to: listed.review_target,
        last_decision: null, can_decide: state.canDecide.get(listed.workflow) === true, blockers: listed.blockers || [],
      });
    }
    // Only an item on the queue is claimed: opening a decided one (from search, a link) claims nothing.
    if (listed) claim(itemId);
    const loaded = fetchView(itemId).then((view) => {
      state.canDecide.set(view.item.workflow, view.can_decide || state.canDecide.get(view.item.workflow) === true);
      if (!listed && view.awaiting_review && view.can_decide && state.current === itemId) claim(itemId);
      if (state.current === itemId) renderItem(view);
    }).catch((err) => {
      if (state.current !== itemId) return;
      $("item-title").textContent = itemId;
      $("decision").hidden = true;
      setResult("decision-result", err.status === 404 ? "No such item in the ledger." : err.message, "error");
    });
    return listed ? Promise.resolve() : loaded;
  }

  function claim(itemId) {
    const note = $("claim-note");
    post(itemPath(itemId) + "/claim", {}).then((held) => {
      if (state.current !== itemId) return;
      note.hidden = false;
      note.className = "mine";
      note.textContent = "Claimed by you until " + clock(held.expires_at);
    }).catch((err) => {
      if (state.current !== itemId) return;
      note.hidden = !(err.status === 409 && err.detail && err.detail.reviewer);
      note.className = "";
      if (!note.hidden) note.textContent = "Being reviewed by " + err.detail.reviewer + " until " + clock(err.detail.expires_at) + ": you may still decide (the first decision wins).";
    });
  }

  function setResult(id, text, kind) {
    // A key refused while this decision was saving stays said once the decision lands.
    if (kind === "ok" && state.refusedDuringSave) {
      text += " A key pressed while it was saving was not applied: press it again.";
      state.refusedDuringSave = false;
    }
    $(id).textContent = text;
    $(id).className = kind || "";
    $(id).dataset.fromView = "";
  }

  function renderItem(view) {
    const item = view.item;
    if ($("item-title").dataset.itemId !== item.item_id) setResult("decision-result", "");
    $("item-title").textContent = item.business_key;
    $("item-title").dataset.itemId = item.item_id;
    $("item-id").textContent = inRun ? "" : item.item_id;
    const listed = state.items.find((i) => i.item_id === item.item_id);
    const checks = $("item-checks");
    clear(checks);
    for (const text of (listed && listed.checks && listed.checks.length ? listed.checks : [plain(item.reason) || "(no reason recorded)"])) checks.appendChild(el("li", plain(text)));
    const fields = $("item-fields");
    clear(fields);
    const rows = [["Status", item.status], ["Workflow", inRun ? null : item.workflow], ["Run", inRun ? null : item.run_id]];
    const card = (listed && listed.card) || [];
    for (const field of card) if (hasValue(field)) rows.push([field.label, field]);  // an empty field says nothing
    // Confidence once: the card shows it when the workflow put it there.
    const onCard = card.some((f) => f.path === "confidence" || f.path === "item.confidence");
    const shownChecks = (listed && listed.checks) || [item.reason || ""];
    const lastError = plain(item.last_error);
    rows.push(
      ["Confidence", onCard || item.confidence === null ? null : Math.round(Number(item.confidence) * 100) + "%"],
      ["Approve sends it on as", view.approve_to ? statusWords(view.approve_to) : null],
      ["Last error", !lastError || shownChecks.some((c) => plain(c) && lastError.indexOf(plain(c)) >= 0) || lastError === plain(item.reason) ? null : lastError],
      ["Attempts", item.attempts], ["Waiting since", formatTime(item.updated_at)],
    );
    if (view.last_decision) rows.push(["Last decision", view.last_decision.actor + " (" + statusWords(view.last_decision.to_status) + ", " + formatTime(view.last_decision.at) + ")"]);
    for (const [name, value] of rows) {
      if (value === null || value === undefined || value === "") continue;
      fields.appendChild(el("dt", name));
      const dd = el("dd");
      if (name === "Status") dd.appendChild(statusNode(value));
      else if (typeof value === "object") dd.appendChild(cardValue(value));
      else dd.textContent = String(value);
      fields.appendChild(dd);
    }
    $("item-payload").textContent = formatJson(item.payload);
    $("item-ai").textContent = formatJson(item.ai_result);
    $("item-body").dataset.loaded = view.history ? item.item_id : "";
    const source = view.source && view.source[0];
    $("source-box").hidden = !source;
    if (source) {
      $("source-where").textContent = "row " + (source.row_number || "?") + " of the input of run " + source.run_id + " (suite " + source.suite + ")";
      $("item-source").textContent = formatJson(source.row_data);
    }
    const history = $("history").tBodies[0];
    clear(history);
    if (!view.history) history.appendChild(el("tr")).appendChild(el("td", "loading…", "muted"));
    for (const r of view.history || []) {
      const row = document.createElement("tr");
      for (const text of [shortTime(r.at), r.from_status ? statusWords(r.from_status) : "(new)", statusWords(r.to_status), r.actor, plain(r.reason)]) row.appendChild(el("td", text));
      history.appendChild(row);
    }
    $("decision").hidden = !view.can_decide;
    // An approval that would let the item past its step's contract is off, and the page says why
    // before the key is pressed (the server refuses it anyway).
    const blockers = view.blockers || [];
    const needs = blockers.map((b) => b.need).join("; ");
    $("approve").disabled = blockers.length > 0;
    $("approve").title = blockers.length ? "cannot be approved as it is: " + needs
      : view.approve_to ? "moves the item to " + view.approve_to : "";
    $("approve-blocked").hidden = !blockers.length;
    $("approve-blocked").textContent = blockers.length ? "Approve is off: " + needs : "";
    // The ways on a blocked item takes instead (known from the item's own answer).
    const actions = view.history ? view.actions || [] : blockers.flatMap((b) => b.actions);
    $("edit").hidden = actions.indexOf("correct") < 0 && Boolean(view.history);
    $("retry-ai").hidden = actions.indexOf("retry_ai") < 0;
    $("retry-effect").hidden = actions.indexOf("retry_effect") < 0;
    $("done-elsewhere").hidden = actions.indexOf("done_elsewhere") < 0;
    // What the user may do is known from the item's own answer only (not from its queue row).
    if (view.history) {
      if ($("decision-result").dataset.fromView) setResult("decision-result", "");
      const note = !view.awaiting_review ? "This item is not awaiting review (it is " + item.status + ")."
        : !view.can_decide ? "You may read this item but not decide on it." : "";
      if (note) setResult("decision-result", note);
      $("decision-result").dataset.fromView = note ? "1" : "";
    }
  }

  // -- decisions ------------------------------------------------------------------------------

  // Decide the open item, then show the next one (fetched in advance): the time from the key press
  // to the next item on screen is what a reviewer waits for.
  async function decideCurrent(action, comment, started) {
    const itemId = state.current;
    const index = state.items.findIndex((i) => i.item_id === itemId);
    if (!itemId) return;
    if (refusedWhileBusy()) return;
    if (action === "approve" && $("approve").disabled) {
      setResult("decision-result", "Not applied: " + $("approve-blocked").textContent, "error");
      return;
    }
    state.busy = true;
    const t0 = started || performance.now();
    try {
      const text = comment !== undefined ? comment : $("comment").value;
      const done = await post("decisions", { action: action, comment: text || null, item_ids: [itemId] });
      const blocked = (done.blocked || [])[0];
      if (blocked) {  // the item stays: it needs a correction, an answer or another way on
        setResult("decision-result", "Not applied to " + itemId + ": " + blocked.blockers.map((b) => b.need).join("; "), "error");
        state.views.delete(itemId);
        return;
      }
      $("comment").value = "";
      const refused = done.already_decided[0] || done.not_awaiting_review[0];
      state.views.delete(itemId);
      state.picked.delete(itemId);
      state.decided.add(itemId);
      dropItem(itemId);
      if (state.items.length) await openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      else showEmpty();
      if (refused) setResult("decision-result", "Not applied to " + itemId + ": " + (refused.decided_by ? "already decided by " + refused.decided_by : "not awaiting review") + " (it is " + statusWords(refused.status) + ").", "error");
      else {
        setResult("decision-result", itemId + " " + (action === "approve" ? "approved" : "rejected") + ": now " + statusOf(done.decided[0].to_status) + ".", "ok");
        if (action === "reject") rememberReason(text);
        offerUndo(itemId, done.decided[0].undoable);
      }
      state.busy = false;
      metrics.decisions.push({ item: itemId, action: action, ms: performance.now() - t0 });
      scheduleRefill();
    } catch (err) {
      metrics.errors += 1;
      setResult("decision-result", err.status === 403 ? "You may not decide on items of this DAG." : "Not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
  }

  // A key pressed while a decision is being saved is refused where the reviewer looks, never dropped.
  function refusedWhileBusy() {
    if (!state.busy) return false;
    metrics.refused = (metrics.refused || 0) + 1;
    state.refusedDuringSave = true;
    setResult("decision-result", "Still saving the last decision: nothing was applied, press the key again in a moment.", "error");
    return true;
  }

  // Undo: the reviewer's own last decision, while the item has not moved on (the server checks both).
  // Undo is offered only where the decision's answer says it can be undone (conveyor/review/undo.py
  // decides): a rejection is final, so Undo after one would only say no.
  function offerUndo(itemId, undoable) {
    state.lastDecided = undoable ? itemId : null;
    $("undo").hidden = !undoable;
    $("undo").title = undoable ? "take back your decision on " + itemId : "";
  }
  async function undoLast() {
    const itemId = state.lastDecided;
    if (!itemId || refusedWhileBusy()) return;
    state.busy = true;
    try {
      const done = await post(itemPath(itemId) + "/decision", { action: "undo" });
      state.lastDecided = null;
      $("undo").hidden = true;
      state.decided.delete(itemId);
      state.views.delete(itemId);
      await openItem(itemId);
      setResult("decision-result", "Undone: " + itemId + " is " + statusWords(done.to_status) + " again.", "ok");
      loadQueue();
    } catch (err) {
      setResult("decision-result", "Not undone: " + err.message, "error");
    } finally {
      state.busy = false;
    }
  }

  // The ways on for a blocked item: retry_ai, retry_effect, done_elsewhere (with a reference).
  async function wayOn(action, reference) {
    const itemId = state.current;
    if (!itemId || refusedWhileBusy() || $(action === "retry_ai" ? "retry-ai" : action === "retry_effect" ? "retry-effect" : "done-elsewhere").hidden) return;
    const index = state.items.findIndex((i) => i.item_id === itemId);
    state.busy = true;
    try {
      const body = { action: action, comment: $("comment").value || null };
      if (reference) body.reference = reference;
      const done = await post(itemPath(itemId) + "/decision", body);
      $("comment").value = "";
      state.views.delete(itemId);
      state.decided.add(itemId);
      dropItem(itemId);
      if (state.items.length) await openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      else showEmpty();
      const words = { retry_ai: "sent back to the AI step", retry_effect: "sent back to be tried again", done_elsewhere: "recorded as done elsewhere" };
      setResult("decision-result", itemId + " " + words[action] + ": now " + statusOf(done.to_status) + ".", "ok");
      offerUndo(itemId, done.undoable);
      scheduleRefill();
    } catch (err) {
      setResult("decision-result", "Not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
  }

  // d: the item's details (data, source row, history) brought into view in turn, no scrolling.
  function nextDetails() {
    const parts = Array.from(document.querySelectorAll("#item-body .details")).filter((n) => !n.hidden);
    if (!parts.length || $("item-body").hidden) return;
    state.detailsAt = ((state.detailsAt === undefined ? -1 : state.detailsAt) + 1) % parts.length;
    // Just below the sticky decision bar (scrollIntoView would tuck the section under it).
    const panel = $("item-panel");
    const under = $("decision").hidden ? panel.getBoundingClientRect().top : $("decision").getBoundingClientRect().bottom;
    panel.scrollTop += parts[state.detailsAt].getBoundingClientRect().top - under - 6;
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

  // -- corrections (e) ------------------------------------------------------------------------

  // e: the item's fields as a form (typed inputs, the failing field focused with its text selected);
  // the JSON of the data stays one click away for what a form cannot say.
  async function openEditor() {
    if (!state.current) return;
    const view = await fetchView(state.current);
    if (!view.can_decide || (view.actions || []).indexOf("correct") < 0) return;
    const quarantined = view.item.status === "quarantined";
    // The data the form covers (a gate over extracted fields corrects the AI result, not the payload).
    const data = (view.form || []).length ? Object.fromEntries(view.form.map((f) => [f.name, f.value]))
      : quarantined ? view.item.payload : view.item.ai_result || {};
    $("editor").hidden = false;
    $("editor").dataset.kind = quarantined ? "payload" : "ai_result";
    const asForm = Boolean((view.form || []).length);
    $("editor-label").textContent = asForm ? (quarantined ? "Correct the input" : "Correct the AI step's answer")
      : quarantined ? "Corrected payload (JSON object)" : "Corrected model answer (JSON object)";
    $("editor-text").value = JSON.stringify(data, null, 2);
    state.editorData = data;
    state.editorFields = view.form || [];
    const focus = ConveyorForm.build($("editor-form"), state.editorFields);
    $("editor-json").open = !state.editorFields.length;
    setResult("editor-result", "");
    const target = $("editor-json").open ? $("editor-text") : focus;
    if (target) {
      target.focus();
      if (target.select) target.select();
    }
  }

  // Closing the editor gives the keys back to the queue.
  function closeEditor() {
    $("editor").hidden = true;
    $("editor-text").blur();
  }

  // Only the fields that changed travel (the server merges them field by field); a removed field
  // is sent as null.
  function changedFields(before, after) {
    const changed = {};
    for (const key of Object.keys(after)) if (JSON.stringify(after[key]) !== JSON.stringify((before || {})[key])) changed[key] = after[key];
    for (const key of Object.keys(before || {})) if (!(key in after)) changed[key] = null;
    return changed;
  }

  async function submitCorrection(fromJson) {
    const itemId = state.current;
    if (refusedWhileBusy()) return;
    let changed;
    if (fromJson) {
      let edited;
      try {
        edited = JSON.parse($("editor-text").value);
        if (!edited || typeof edited !== "object" || Array.isArray(edited)) throw new Error("it must be a JSON object");
      } catch (e) {
        setResult("editor-result", "Not valid JSON: " + e.message, "error");
        return;
      }
      changed = changedFields(state.editorData, edited);
    } else changed = ConveyorForm.changes($("editor-form"), state.editorFields || []);
    if (!Object.keys(changed).length) { setResult("editor-result", "Nothing changed.", "error"); return; }
    const body = { action: "correct", comment: $("comment").value || null, changes: changed };
    state.busy = true;
    setResult("editor-result", "Saving…");
    try {
      const done = await post(itemPath(itemId) + "/decision", body);
      state.busy = false;
      closeEditor();
      state.views.delete(itemId);
      const index = state.items.findIndex((i) => i.item_id === itemId);
      dropItem(itemId);
      if (state.items.length) await openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      setResult("decision-result", itemId + " corrected: now " + statusOf(done.to_status) + ".", "ok");
      offerUndo(itemId, done.undoable);
      scheduleRefill();
    } catch (err) {
      setResult("editor-result", "The correction was not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
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

  async function decideBulk(action, comment) {
    const body = { action: action, comment: comment || $("bulk-comment").value || null };
    if (state.allMatching) body.filter = { workflow: state.workflow || null, run_id: state.runId || null, status: state.status || null };
    else body.item_ids = Array.from(state.picked);
    if (!body.filter && !body.item_ids.length) return;
    const box = $("bulk-result");
    clear(box);
    try {
      const done = await post("decisions", body);
      const verb = action === "approve" ? "Approved" : "Rejected";
      box.className = "";
      box.appendChild(el("div", verb + " " + done.decided.length + " item(s)" + (done.already_decided.length ? "; " + done.already_decided.length + " decided by someone else first:" : ".")));
      const list = el("ul");
      for (const r of done.already_decided) list.appendChild(el("li", r.item_id + ": " + r.decided_by + " (" + r.status + ")"));
      for (const r of done.not_awaiting_review) list.appendChild(el("li", r.item_id + ": not awaiting review (" + r.status + ")"));
      for (const id of done.unknown) list.appendChild(el("li", id + ": no such item"));
      for (const b of done.blocked || []) list.appendChild(el("li", b.item_id + ": cannot be approved as it is: " + b.blockers.map((x) => x.need).join("; ")));
      if (done.remaining) box.appendChild(el("div", done.remaining + " matching item(s) remain undecided."));
      if (list.childNodes.length) box.appendChild(list);
      for (const d of done.decided) state.decided.add(d.item_id);
      for (const r of done.already_decided) state.decided.add(r.item_id);
      const before = state.items.length;
      state.items = state.items.filter((i) => !state.decided.has(i.item_id));
      state.page.items = state.items;
      state.page.total = Math.max(0, state.page.total - (before - state.items.length));
      state.picked.clear();
      state.allMatching = false;
      renderQueue();
      if (state.decided.has(state.current)) {
        if (state.items.length) openAt(Math.min(Math.max(state.cursor, 0), state.items.length - 1));
        else showEmpty();
      }
      $("bulk-comment").value = "";
      state.views.clear();
      await loadQueue();
    } catch (err) {
      box.className = "error";
      box.textContent = "Not applied: " + err.message;
    }
  }

  // -- dialogs and keys -----------------------------------------------------------------------

  // Bulk decisions ask first, with the count: one key must never decide many items by mistake.
  let confirmThen = null;
  function confirmBulk(action, then) {
    const n = state.allMatching ? (state.page ? state.page.total : 0) : state.picked.size;
    if (!n) return;
    confirmThen = then;
    const what = state.allMatching ? "all " + n + " item(s) matching this filter" : n + " selected item(s)";
    $("confirm-title").textContent = (action === "approve" ? "Approve " : "Reject ") + what + "?";
    $("confirm-ok").textContent = action === "approve" ? "Approve " + n : "Reject " + n;
    $("confirm-dialog").showModal();
    $("confirm-ok").focus();
  }
  function confirmed() {
    const then = confirmThen;
    confirmThen = null;
    $("confirm-dialog").close();
    if (then) then();
  }

  function askBulkReject() {
    const n = state.allMatching ? (state.page ? state.page.total : 0) : state.picked.size;
    if (!n) {
      const box = $("bulk-result");
      box.className = "error";
      box.textContent = "Nothing selected: press x on the items to reject (or click All matching) first; r rejects the open item.";
      return;
    }
    askReason("Reject " + $("bulk-count").textContent + ": why?", (why) => { rememberReason(why); decideBulk("reject", why); });
  }
  function askDoneElsewhere() {
    if (!state.current || $("done-elsewhere").hidden) return;
    askReason("Done elsewhere: where was " + state.current + "'s effect done?", (reference) => wayOn("done_elsewhere", reference),
      { reference: true, ok: "Record it" });
  }

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT")) return;
    if (document.querySelector("dialog[open]")) return;
    const started = performance.now();
    const actions = {
      j: () => openAt(Math.min(state.cursor + 1, state.items.length - 1)),
      k: () => openAt(Math.max(state.cursor - 1, 0)),
      a: () => decideCurrent("approve", undefined, started),
      r: () => state.current && askReason("Reject " + state.current + ": why?", (why) => decideCurrent("reject", why)),
      e: () => openEditor(),
      i: () => wayOn("retry_ai"),
      y: () => wayOn("retry_effect"),
      w: () => askDoneElsewhere(),
      u: () => undoLast(),
      d: () => nextDetails(),
      x: () => state.items[state.cursor] && togglePick(state.items[state.cursor].item_id),
      A: () => confirmBulk("approve", () => decideBulk("approve")),
      R: () => askBulkReject(),
      "?": () => $("help-dialog").showModal(),
      "/": () => $("search").focus(),
    };
    const run = actions[event.key];
    if (!run) return;
    event.preventDefault();
    run();
  }

  // -- search ---------------------------------------------------------------------------------

  async function search(text) {
    const box = $("search-result");
    clear(box);
    const query = text.trim();
    box.hidden = !query;
    if (!query) return;
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
        link.addEventListener("click", (event) => { event.preventDefault(); openItem(item.item_id); });
        entry.append(link, document.createTextNode(" is "), statusNode(item.status, true),
          document.createTextNode(" in run " + item.run_id + ", since " + formatTime(item.updated_at)));
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
    document.body.classList.toggle("in-run", inRun);
    // A status in the URL the queue does not have: say so and show every status, keeping the
    // workflow and run the URL names (a typo must not lose the reviewer's place).
    const statuses = Array.from($("filter-status").options).map((o) => o.value);
    if (statuses.indexOf(state.status) < 0) {
      const box = $("bulk-result");
      box.className = "error";
      box.textContent = "There is no status \u201c" + state.status + "\u201d on the queue (use " + statuses.filter(Boolean).map(statusWords).join(" or ") + "): showing every status.";
      state.status = "";
      syncUrl();
    }
    $("filter-status").value = state.status;
    $("filter-run").value = state.runId;
    $("filters").addEventListener("submit", (event) => {
      event.preventDefault();
      state.workflow = $("filter-workflow").value;
      state.status = $("filter-status").value;
      state.runId = $("filter-run").value.trim();
      state.offset = 0;
      state.allMatching = false;
      state.picked.clear();
      syncUrl();
      loadQueue();
    });
    $("filter-workflow").addEventListener("change", () => $("filters").requestSubmit());
    $("filter-status").addEventListener("change", () => $("filters").requestSubmit());
    $("refresh").addEventListener("click", () => { state.views.clear(); loadQueue(); });
    $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE_SIZE); loadQueue(false); });
    $("next").addEventListener("click", () => { state.offset += PAGE_SIZE; loadQueue(false); });
    $("search-form").addEventListener("submit", (event) => { event.preventDefault(); search($("search").value); });
    $("approve").addEventListener("click", () => decideCurrent("approve"));
    $("reject").addEventListener("click", () => askReason("Reject " + state.current + ": why?", (why) => decideCurrent("reject", why)));
    $("edit").addEventListener("click", () => openEditor());
    $("editor-save").addEventListener("click", () => submitCorrection($("editor-json").open));
    $("editor-cancel").addEventListener("click", () => closeEditor());
    $("editor-text").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submitCorrection(true); }
      if (e.key === "Escape") { e.preventDefault(); closeEditor(); }
    });
    $("editor-form").addEventListener("submit", (e) => { e.preventDefault(); submitCorrection(false); });
    $("editor-form").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submitCorrection(false); }
      if (e.key === "Escape") { e.preventDefault(); closeEditor(); }
    });
    $("retry-ai").addEventListener("click", () => wayOn("retry_ai"));
    $("retry-effect").addEventListener("click", () => wayOn("retry_effect"));
    $("done-elsewhere").addEventListener("click", () => askDoneElsewhere());
    $("undo").addEventListener("click", () => undoLast());
    wireReasons();
    $("help-button").addEventListener("click", () => $("help-dialog").showModal());
    $("select-all-matching").addEventListener("click", () => { state.allMatching = true; renderBulk(); });
    $("bulk-approve").addEventListener("click", () => confirmBulk("approve", () => decideBulk("approve")));
    $("confirm-form").addEventListener("submit", (e) => { e.preventDefault(); confirmed(); });
    $("confirm-cancel").addEventListener("click", () => { confirmThen = null; $("confirm-dialog").close(); });
    $("bulk-reject").addEventListener("click", () => askBulkReject());
    $("bulk-clear").addEventListener("click", () => { state.picked.clear(); state.allMatching = false; renderQueue(); });
    document.addEventListener("keydown", onKey);
    let resizing = 0;
    let width = window.innerWidth;
    window.addEventListener("resize", () => {
      if (window.innerWidth === width) return;  // a height change (the host resizing the frame) changes no column
      width = window.innerWidth;
      window.clearTimeout(resizing);
      resizing = window.setTimeout(() => { if (state.page) { state.compact = false; renderQueue(); moveCursor(state.cursor); } }, 200);
    });
    const wanted = params.get("item");
    if (wanted) { state.current = wanted; openItem(wanted); }
    loadQueue();
    window.setInterval(tickAges, 15000);
    window.setInterval(() => { if (!state.busy && !document.querySelector("dialog[open]")) loadQueue(); }, 60000);
    window.setInterval(() => { if (state.current) claim(state.current); }, 120000);
  });
})();
