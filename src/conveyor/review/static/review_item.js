// The review page's open item: painted at once from its queue row, completed from its own
// answer (fetched in advance), claimed while it is open; and the line under the decision bar that
// says what happened.
"use strict";

(function (P) {
  const { state, inRun, syncUrl } = P;
  const { $, el, clear, api, post, itemPath, formatTime, shortTime, clock, formatJson, cardValue, statusWords, statusNode, plain } = window.ConveyorKit;

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
    P.moveCursor(index);
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
    for (const field of card) if (P.hasValue(field)) rows.push([field.label, field]);  // an empty field says nothing
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

  Object.assign(P, {
    fetchView, openAt, openItem, claim, setResult, nextDetails,
  });
})(window.ConveyorPage);
