// The review page's correction editor (e): the item's fields as a typed form, the JSON one click
// away; only the fields that changed travel.
"use strict";

(function (P) {
  const { state } = P;
  const { $, post, itemPath, statusOf } = window.ConveyorKit;

  // -- corrections (e) ------------------------------------------------------------------------

  // e: the item's fields as a form (typed inputs, the failing field focused with its text selected);
  // the JSON of the data stays one click away for what a form cannot say.
  async function openEditor() {
    if (!state.current) return;
    const view = await P.fetchView(state.current);
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
    P.setResult("editor-result", "");
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
    if (P.refusedWhileBusy()) return;
    let changed;
    if (fromJson) {
      let edited;
      try {
        edited = JSON.parse($("editor-text").value);
        if (!edited || typeof edited !== "object" || Array.isArray(edited)) throw new Error("it must be a JSON object");
      } catch (e) {
        P.setResult("editor-result", "Not valid JSON: " + e.message, "error");
        return;
      }
      changed = changedFields(state.editorData, edited);
    } else changed = ConveyorForm.changes($("editor-form"), state.editorFields || []);
    if (!Object.keys(changed).length) { P.setResult("editor-result", "Nothing changed.", "error"); return; }
    const body = { action: "correct", comment: $("comment").value || null, changes: changed };
    state.busy = true;
    P.setResult("editor-result", "Saving…");
    try {
      const done = await post(itemPath(itemId) + "/decision", body);
      state.busy = false;
      closeEditor();
      state.views.delete(itemId);
      const index = state.items.findIndex((i) => i.item_id === itemId);
      P.dropItem(itemId);
      if (state.items.length) await P.openAt(Math.min(Math.max(index, 0), state.items.length - 1));
      P.setResult("decision-result", itemId + " corrected: now " + statusOf(done.to_status) + ".", "ok");
      P.offerUndo(itemId, done.undoable);
      P.scheduleRefill();
    } catch (err) {
      P.setResult("editor-result", "The correction was not applied: " + err.message, "error");
    } finally {
      state.busy = false;
    }
  }

  Object.assign(P, {
    openEditor, closeEditor, submitCorrection,
  });
})(window.ConveyorPage);
