// Conveyor review queue page. Every value from the ledger is rendered with textContent: a payload
// holding markup shows as text and never runs. The page calls ../api/review/* with the Airflow UI's
// session cookie; decisions are POSTed as JSON.
//
// Working the queue: j/k move, a approves, r rejects (asks why), e edits, x selects, A/R decide the
// selection, ? shows the keys. After a decision the next item opens (already fetched in advance).
//
// The page's parts, each a file loaded before this one: review_page.js (the state they share),
// review_queue.js, review_item.js, review_decisions.js, review_editor.js; this file holds the keys,
// search and the wiring of the page's controls.
"use strict";

(function (P) {
  const { PAGE_SIZE, params, state, inRun, syncUrl } = P;
  const { $, el, clear, api, formatTime, statusWords, statusNode } = window.ConveyorKit;
  const { ask: askReason, wire: wireReasons } = window.ConveyorReasons;

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT")) return;
    if (document.querySelector("dialog[open]")) return;
    const started = performance.now();
    const actions = {
      j: () => P.openAt(Math.min(state.cursor + 1, state.items.length - 1)),
      k: () => P.openAt(Math.max(state.cursor - 1, 0)),
      a: () => P.decideCurrent("approve", undefined, started),
      r: () => state.current && askReason("Reject " + state.current + ": why?", (why) => P.decideCurrent("reject", why)),
      e: () => P.openEditor(),
      i: () => P.wayOn("retry_ai"),
      y: () => P.wayOn("retry_effect"),
      w: () => P.askDoneElsewhere(),
      u: () => P.undoLast(),
      d: () => P.nextDetails(),
      x: () => state.items[state.cursor] && P.togglePick(state.items[state.cursor].item_id),
      A: () => P.confirmBulk("approve", () => P.decideBulk("approve")),
      R: () => P.askBulkReject(),
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
        link.addEventListener("click", (event) => { event.preventDefault(); P.openItem(item.item_id); });
        entry.append(link, document.createTextNode(" is "), statusNode(item.status, true),
          document.createTextNode(" in run " + item.run_id + ", since " + formatTime(item.updated_at)));
        list.appendChild(entry);
      }
      box.appendChild(list);
      if (found.items.length === 1) P.openItem(found.items[0].item_id);
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
      P.loadQueue();
    });
    $("filter-workflow").addEventListener("change", () => $("filters").requestSubmit());
    $("filter-status").addEventListener("change", () => $("filters").requestSubmit());
    $("refresh").addEventListener("click", () => { state.views.clear(); P.loadQueue(); });
    $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE_SIZE); P.loadQueue(false); });
    $("next").addEventListener("click", () => { state.offset += PAGE_SIZE; P.loadQueue(false); });
    $("search-form").addEventListener("submit", (event) => { event.preventDefault(); search($("search").value); });
    $("approve").addEventListener("click", () => P.decideCurrent("approve"));
    $("reject").addEventListener("click", () => askReason("Reject " + state.current + ": why?", (why) => P.decideCurrent("reject", why)));
    $("edit").addEventListener("click", () => P.openEditor());
    $("editor-save").addEventListener("click", () => P.submitCorrection($("editor-json").open));
    $("editor-cancel").addEventListener("click", () => P.closeEditor());
    $("editor-text").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); P.submitCorrection(true); }
      if (e.key === "Escape") { e.preventDefault(); P.closeEditor(); }
    });
    $("editor-form").addEventListener("submit", (e) => { e.preventDefault(); P.submitCorrection(false); });
    $("editor-form").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); P.submitCorrection(false); }
      if (e.key === "Escape") { e.preventDefault(); P.closeEditor(); }
    });
    $("retry-ai").addEventListener("click", () => P.wayOn("retry_ai"));
    $("retry-effect").addEventListener("click", () => P.wayOn("retry_effect"));
    $("done-elsewhere").addEventListener("click", () => P.askDoneElsewhere());
    $("undo").addEventListener("click", () => P.undoLast());
    wireReasons();
    $("help-button").addEventListener("click", () => $("help-dialog").showModal());
    $("select-all-matching").addEventListener("click", () => { state.allMatching = true; P.renderBulk(); });
    $("bulk-approve").addEventListener("click", () => P.confirmBulk("approve", () => P.decideBulk("approve")));
    $("confirm-form").addEventListener("submit", (e) => { e.preventDefault(); P.confirmed(); });
    $("confirm-cancel").addEventListener("click", () => P.cancelConfirm());
    $("bulk-reject").addEventListener("click", () => P.askBulkReject());
    $("bulk-clear").addEventListener("click", () => { state.picked.clear(); state.allMatching = false; P.renderQueue(); });
    document.addEventListener("keydown", onKey);
    let resizing = 0;
    let width = window.innerWidth;
    window.addEventListener("resize", () => {
      if (window.innerWidth === width) return;  // a height change (the host resizing the frame) changes no column
      width = window.innerWidth;
      window.clearTimeout(resizing);
      resizing = window.setTimeout(() => { if (state.page) { state.compact = false; P.renderQueue(); P.moveCursor(state.cursor); } }, 200);
    });
    const wanted = params.get("item");
    if (wanted) { state.current = wanted; P.openItem(wanted); }
    P.loadQueue();
    window.setInterval(P.tickAges, 15000);
    window.setInterval(() => { if (!state.busy && !document.querySelector("dialog[open]")) P.loadQueue(); }, 60000);
    window.setInterval(() => { if (state.current) P.claim(state.current); }, 120000);
  });
})(window.ConveyorPage);
