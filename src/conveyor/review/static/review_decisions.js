// The review page's decisions: one item (approve, reject, a way on for a blocked item, undo) and
// many (the selection or every item matching the filter, confirmed with the count first). A key
// pressed while a decision is saving is refused where the reviewer looks, never dropped.
"use strict";

(function (P) {
  const { state, metrics } = P;
  const { $, el, clear, post, itemPath, statusWords, statusOf } = window.ConveyorKit;
  const { ask: askReason, remember: rememberReason } = window.ConveyorReasons;

  // -- decisions ------------------------------------------------------------------------------

  // Decide the open item, then show the next one (fetched in advance): the time from the key press
  // to the next item on screen is what a reviewer waits for.
  async function decideCurrent(action, comment, started) {
    const itemId = state.current;
    const index = state.items.findIndex((i) => i.item_id === itemId);
    if (!itemId) return;
    if (refusedWhileBusy()) return;
    if (action === "approve" && $("approve").disabled) {
      P.setResult("decision-result", "Not applied: " + $("approve-blocked").textContent, "error");
      return;
    }
    state.busy = true;
    const t0 = started || performance.now();
    try {
      const text = comment !== undefined ? comment : $("comment").value;
      const done = await post("decisions", { action: action, comment: text || null, item_ids: [itemId] });
      const blocked = (done.blocked || [])[0];
      if (blocked) {  // the item stays: it needs a correction, an answer or another way on
        P.setResult("decision-result", "Not applied to " + itemId + ": " + blocked.blockers.map((b) => b.need).join("; "), "error");
        state.views.delete(itemId);
        return;
      }
      $("comment").value = "";
      const refused = done.already_decided[0] || done.not_awaiting_review[0];
      state.views.delete(itemId);
      state.picked.delete(itemId);
      state.decided.add(itemId);
      P.dropItem(itemId);
      if (state.items.length) await P.openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      else P.showEmpty();
      if (refused) P.setResult("decision-result", "Not applied to " + itemId + ": " + (refused.decided_by ? "already decided by " + refused.decided_by : "not awaiting review") + " (it is " + statusWords(refused.status) + ").", "error");
      else {
        P.setResult("decision-result", itemId + " " + (action === "approve" ? "approved" : "rejected") + ": now " + statusOf(done.decided[0].to_status) + ".", "ok");
        if (action === "reject") rememberReason(text);
        offerUndo(itemId, done.decided[0].undoable);
      }
      state.busy = false;
      metrics.decisions.push({ item: itemId, action: action, ms: performance.now() - t0 });
      P.scheduleRefill();
    } catch (err) {
      metrics.errors += 1;
      P.setResult("decision-result", err.status === 403 ? "You may not decide on items of this DAG." : "Not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
  }

  // A key pressed while a decision is being saved is refused where the reviewer looks, never dropped.
  function refusedWhileBusy() {
    if (!state.busy) return false;
    metrics.refused = (metrics.refused || 0) + 1;
    state.refusedDuringSave = true;
    P.setResult("decision-result", "Still saving the last decision: nothing was applied, press the key again in a moment.", "error");
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
      await P.openItem(itemId);
      P.setResult("decision-result", "Undone: " + itemId + " is " + statusWords(done.to_status) + " again.", "ok");
      P.loadQueue();
    } catch (err) {
      P.setResult("decision-result", "Not undone: " + err.message, "error");
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
      P.dropItem(itemId);
      if (state.items.length) await P.openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      else P.showEmpty();
      const words = { retry_ai: "sent back to the AI step", retry_effect: "sent back to be tried again", done_elsewhere: "recorded as done elsewhere" };
      P.setResult("decision-result", itemId + " " + words[action] + ": now " + statusOf(done.to_status) + ".", "ok");
      offerUndo(itemId, done.undoable);
      P.scheduleRefill();
    } catch (err) {
      P.setResult("decision-result", "Not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
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
      P.renderQueue();
      if (state.decided.has(state.current)) {
        if (state.items.length) P.openAt(Math.min(Math.max(state.cursor, 0), state.items.length - 1));
        else P.showEmpty();
      }
      $("bulk-comment").value = "";
      state.views.clear();
      await P.loadQueue();
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
  function cancelConfirm() {
    confirmThen = null;
    $("confirm-dialog").close();
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

  Object.assign(P, {
    decideCurrent, refusedWhileBusy, offerUndo, undoLast, wayOn, decideBulk, confirmBulk, cancelConfirm,
    confirmed, askBulkReject, askDoneElsewhere,
  });
})(window.ConveyorPage);
