// The review page's shared state: what the URL asked for, the page of the queue on screen, the open
// item, the selection; and window.__conveyorReview, which records per decision the milliseconds from
// the key press to the next item shown (bench/review_page.py reads it). The page's parts
// (review_queue.js, review_item.js, review_decisions.js, review_editor.js, review.js) each add their
// functions to window.ConveyorPage and call each other's through it, so the load order of the files
// matters only for this one, which comes first.
"use strict";

window.ConveyorPage = (function () {
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

  function syncUrl() {
    const q = new URLSearchParams();
    if (state.workflow) q.set("workflow", state.workflow);
    if (state.status) q.set("status", state.status);
    if (state.runId) q.set("run_id", state.runId);
    if (state.current) q.set("item", state.current);
    window.history.replaceState(null, "", q.toString() ? "?" + q.toString() : window.location.pathname);
  }

  return { PAGE_SIZE, params, state, metrics, inRun, syncUrl };
})();
